//! What one instrumented call costs the caller, gpuspan against the instrumentation people
//! already use, all in one binary and one run so that every ratio holds on the machine it was
//! taken on (docs/benchmarks.md, "Peers").
//!
//! Every case times the same tiny function (a multiply and a rotate, never inlined):
//!
//! - `plain`: the function without instrumentation (the baseline);
//! - `gpuspan_off`: `#[gpu_kernel]`, feature on, `GPUSPAN=off` at run time;
//! - `gpuspan_host_no_params/<subscriber>`: the same gpuspan scope with `skip_all` (the cost of
//!   recording the parameter, as `#[instrument]` does, is the difference);
//! - `gpuspan_host/<subscriber>` and `tracing_instrument/<subscriber>`: a host-timed gpuspan
//!   scope (counted, too short to export) and `tracing`'s `#[instrument]`, with no subscriber,
//!   a bare `tracing_subscriber::registry()`, the registry with a layer that does nothing, and
//!   the registry with a `fmt` layer writing to `std::io::sink`;
//! - `fastrace_local`: `#[fastrace::trace]` under a `LocalCollector` (collected every 1 000 calls,
//!   the collection counted);
//! - `puffin_frame`: `profile_scope!` with scopes on, a new frame every 1 000 calls (counted);
//! - `tracy_ondemand`: `tracy_client::span!` with the client started on demand and no profiler
//!   connected (so no server is needed; Tracy then records nothing).
//!
//! And what `gpuspan::layer()` costs a program's own spans (docs/spans.md), under the registry
//! with and without the layer (`registry_gpuspan_layer`, selecting `peers_selected=info`), and
//! the same beside a layer that wants every span (`registry_noop_layer[_gpuspan_layer]`):
//!
//! - `span_enter_exit/<subscriber>`: entering and leaving an existing span the layer does not
//!   select;
//! - `span_lifetime/<subscriber>`: creating, entering, leaving and closing an unselected span;
//! - `selected_span_lifetime/registry_gpuspan_layer`: the same for a selected span, host-only
//!   (no GPU backend registered): one scope opened and closed, counted like a host call;
//! - `selected_span_reenter/registry_gpuspan_layer`: entering and leaving a selected span that
//!   is already open (as per poll of a future).

use criterion::{criterion_group, BenchmarkGroup, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

/// Calls per collection / frame for the profilers that hand spans over in batches.
const BATCH: u64 = 1_000;

#[inline(always)]
fn work(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

#[inline(never)]
fn plain(x: u64) -> u64 {
    work(x)
}

#[gpuspan::gpu_kernel]
#[inline(never)]
fn gpuspan_scope(x: u64) -> u64 {
    work(x)
}

/// The same scope recording no parameter: what `gpuspan_scope` cost before `#[gpu_kernel]`
/// recorded parameters as `#[instrument]` does (issue 26).
#[gpuspan::gpu_kernel(skip_all)]
#[inline(never)]
fn gpuspan_scope_no_params(x: u64) -> u64 {
    work(x)
}

#[tracing_attributes::instrument]
#[inline(never)]
fn tracing_instrument(x: u64) -> u64 {
    work(x)
}

#[fastrace::trace]
#[inline(never)]
fn fastrace_span(x: u64) -> u64 {
    work(x)
}

#[inline(never)]
fn puffin_scope(x: u64) -> u64 {
    puffin::profile_scope!("puffin_scope");
    work(x)
}

#[inline(never)]
fn tracy_span(x: u64) -> u64 {
    let _span = tracy_client::span!("tracy_span");
    work(x)
}

/// A layer that asks for everything and does nothing with it.
struct NoopLayer;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

/// Runs `iters` calls in batches of [`BATCH`], calling `between` after each batch, and returns
/// the time of the whole (calls and batch boundaries).
fn batched(iters: u64, mut call: impl FnMut(), mut between: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        for _ in 0..n {
            call();
        }
        between();
        left -= n;
    }
    start.elapsed()
}

/// gpuspan's host scope and `#[instrument]` side by side under the current subscriber.
fn host_pair(g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, config: &str) {
    g.bench_function(format!("gpuspan_host/{config}"), |b| b.iter(|| gpuspan_scope(black_box(7))));
    g.bench_function(format!("gpuspan_host_no_params/{config}"), |b| b.iter(|| gpuspan_scope_no_params(black_box(7))));
    g.bench_function(format!("tracing_instrument/{config}"), |b| b.iter(|| tracing_instrument(black_box(7))));
}

fn peers(c: &mut Criterion) {
    let mut g = c.benchmark_group("peers");
    g.bench_function("plain", |b| b.iter(|| plain(black_box(7))));

    gpuspan::set_enabled(false);
    g.bench_function("gpuspan_off", |b| b.iter(|| gpuspan_scope(black_box(7))));
    gpuspan::set_enabled(true);

    host_pair(&mut g, "no_subscriber");

    g.bench_function("fastrace_local", |b| {
        b.iter_custom(|iters| {
            let mut collector = Some(fastrace::local::LocalCollector::start());
            batched(
                iters,
                || {
                    black_box(fastrace_span(black_box(7)));
                },
                || {
                    black_box(collector.take().map(|c| c.collect()));
                    collector = Some(fastrace::local::LocalCollector::start());
                },
            )
        })
    });

    puffin::set_scopes_on(true);
    g.bench_function("puffin_frame", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                || {
                    black_box(puffin_scope(black_box(7)));
                },
                || puffin::GlobalProfiler::lock().new_frame(),
            )
        })
    });
    puffin::set_scopes_on(false);

    let _tracy = tracy_client::Client::start();
    g.bench_function("tracy_ondemand", |b| b.iter(|| tracy_span(black_box(7))));

    tracing::subscriber::with_default(tracing_subscriber::registry(), || host_pair(&mut g, "registry"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(NoopLayer), || {
        host_pair(&mut g, "registry_noop_layer")
    });
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(fmt), || {
        host_pair(&mut g, "registry_fmt_sink")
    });
    g.finish();
    spans(c);
}

fn unselected() -> tracing::Span {
    tracing::info_span!(target: "peers_unselected", "unselected")
}

fn selected() -> tracing::Span {
    tracing::info_span!(target: "peers_selected", "selected")
}

/// An unselected span's entry and life, under the registry with and without the layer.
fn span_pair(g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, config: &str) {
    let span = unselected();
    g.bench_function(format!("span_enter_exit/{config}"), |b| {
        b.iter(|| {
            let _e = span.enter();
            black_box(work(black_box(7)))
        })
    });
    g.bench_function(format!("span_lifetime/{config}"), |b| b.iter(|| unselected().in_scope(|| work(black_box(7)))));
}

/// What `gpuspan::layer()` adds to a program's own spans.
fn spans(c: &mut Criterion) {
    let mut g = c.benchmark_group("peers");
    tracing::subscriber::with_default(tracing_subscriber::registry(), || span_pair(&mut g, "registry"));
    // Alone, the layer's filter disables an unselected span's callsite for the whole subscriber;
    // beside a layer that wants every span (as `fmt` does), the span lives and the layer is asked.
    tracing::subscriber::with_default(tracing_subscriber::registry().with(NoopLayer), || {
        span_pair(&mut g, "registry_noop_layer")
    });
    let both = tracing_subscriber::registry().with(NoopLayer).with(gpuspan::layer_with("peers_selected=info"));
    tracing::subscriber::with_default(both, || span_pair(&mut g, "registry_noop_layer_gpuspan_layer"));
    let layered = tracing_subscriber::registry().with(gpuspan::layer_with("peers_selected=info"));
    tracing::subscriber::with_default(layered, || {
        span_pair(&mut g, "registry_gpuspan_layer");
        g.bench_function("selected_span_lifetime/registry_gpuspan_layer", |b| {
            b.iter(|| selected().in_scope(|| work(black_box(7))))
        });
        let open = selected();
        open.in_scope(|| {});
        g.bench_function("selected_span_reenter/registry_gpuspan_layer", |b| {
            b.iter(|| {
                let _e = open.enter();
                black_box(work(black_box(7)))
            })
        });
    });
    g.finish();
}

/// Runs one case `n` times under its subscriber, without criterion: the mode used to count
/// instructions per call with callgrind (`scripts/count-calls`).
#[inline(never)]
fn calls(case: &str, n: u64) {
    let (what, config) = case.split_once('/').unwrap_or((case, "no_subscriber"));
    if what.starts_with("span_") {
        span_calls(what, config, n);
        return;
    }
    let f: fn(u64) -> u64 = match what {
        "plain" => plain,
        "gpuspan_off" => {
            gpuspan::set_enabled(false);
            gpuspan_scope
        }
        "gpuspan_host" => gpuspan_scope,
        "tracing_instrument" => tracing_instrument,
        "tracy_ondemand" => {
            let _ = tracy_client::Client::start();
            tracy_span
        }
        "fastrace_local" => {
            black_box(fastrace_span(black_box(0)));
            counted_fastrace(n);
            return;
        }
        other => panic!("no case {other} in calls mode"),
    };
    // One call first, outside the counted loop: clock calibration, thread-local set-up.
    black_box(f(black_box(0)));
    let run = || counted(f, n);
    match config {
        "no_subscriber" => run(),
        "registry" => tracing::subscriber::with_default(tracing_subscriber::registry(), run),
        "registry_noop_layer" => tracing::subscriber::with_default(tracing_subscriber::registry().with(NoopLayer), run),
        "registry_fmt_sink" => {
            let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
            tracing::subscriber::with_default(tracing_subscriber::registry().with(fmt), run)
        }
        other => panic!("no configuration {other}"),
    }
}

/// [`calls`] for an unselected span's cases, under the subscribers of [`spans`].
fn span_calls(what: &str, config: &str, n: u64) {
    let run = || {
        let span = unselected();
        black_box(span.in_scope(|| work(black_box(0))));
        match what {
            "span_enter_exit" => counted_span_enter_exit(&span, n),
            "span_lifetime" => counted_span_lifetime(n),
            other => panic!("no case {other} in calls mode"),
        }
    };
    let selection = "peers_selected=info";
    match config {
        "registry" => tracing::subscriber::with_default(tracing_subscriber::registry(), run),
        "registry_noop_layer" => tracing::subscriber::with_default(tracing_subscriber::registry().with(NoopLayer), run),
        // Any second layer's share of the stack: what gpuspan's layer is measured against.
        "registry_noop_layer_noop_layer" => {
            tracing::subscriber::with_default(tracing_subscriber::registry().with(NoopLayer).with(NoopLayer), run)
        }
        "registry_noop_layer_gpuspan_layer" => tracing::subscriber::with_default(
            tracing_subscriber::registry().with(NoopLayer).with(gpuspan::layer_with(selection)),
            run,
        ),
        "registry_gpuspan_layer" => {
            tracing::subscriber::with_default(tracing_subscriber::registry().with(gpuspan::layer_with(selection)), run)
        }
        other => panic!("no configuration {other}"),
    }
}

/// Entering and leaving an existing unselected span, counted.
#[inline(never)]
fn counted_span_enter_exit(span: &tracing::Span, n: u64) {
    for i in 0..n {
        let _e = span.enter();
        black_box(work(black_box(i)));
    }
}

/// Creating, entering, leaving and closing an unselected span, counted.
#[inline(never)]
fn counted_span_lifetime(n: u64) {
    for i in 0..n {
        black_box(unselected().in_scope(|| work(black_box(i))));
    }
}

/// The loop callgrind counts (`--toggle-collect='peers::counted*'`).
#[inline(never)]
fn counted(f: fn(u64) -> u64, n: u64) {
    for i in 0..n {
        black_box(f(black_box(i)));
    }
}

/// [`counted`] for fastrace: spans under a `LocalCollector`, collected every [`BATCH`] calls.
#[inline(never)]
fn counted_fastrace(n: u64) {
    let mut collector = Some(fastrace::local::LocalCollector::start());
    batched(
        n,
        || {
            black_box(fastrace_span(black_box(7)));
        },
        || {
            black_box(collector.take().map(|c| c.collect()));
            collector = Some(fastrace::local::LocalCollector::start());
        },
    );
}

criterion_group!(benches, peers);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--calls") {
        let n = args.get(i + 2).and_then(|n| n.parse().ok()).expect("--calls CASE N");
        calls(&args[i + 1], n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
