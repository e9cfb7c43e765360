//! Issue 31's last cost target: a selected span of the spans layer costs no more than an
//! annotated CUDA window scope, with CUPTI timing running and nothing launched inside, so that
//! each figure is what the scope adds around the user's launches. Needs a CUDA device and CUPTI:
//! `GPUSPAN_BENCH_DIR=.bench scripts/gpu-bench build-span-window` here, then
//! `bash .bench/gpu-bench run-span-window` on the GPU machine.
//!
//! - `plain`: the function unannotated (the baseline);
//! - `cuda_window_scope`: a bare `#[gpu_kernel]`, which under CUPTI marks its thread's window;
//! - `selected_span_lifetime`: a span the layer selects, made, entered, left and closed around
//!   the plain function (each entry a window of the thread, as the window scope's: decision 71);
//! - `selected_span_reenter`: entering and leaving one selected span already made;
//! - `others_span_reenter`: the same for a span another (no-op) layer wants and gpuspan's layer
//!   does not select: what `tracing` itself costs there (the registry, the per-layer filters), so
//!   that `selected_span_reenter` minus it is gpuspan's own share.

use criterion::Criterion;
use std::hint::black_box;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt};

/// A layer that wants spans of one target and does nothing with them.
struct Noop;

impl<S: tracing::Subscriber> Layer<S> for Noop {}

#[inline(never)]
fn plain(x: u64) -> u64 {
    x.rotate_left(5) ^ 0x9e37_79b9
}

#[gpuspan::gpu_kernel]
#[inline(never)]
fn window_scope(x: u64) -> u64 {
    x.rotate_left(5) ^ 0x9e37_79b9
}

fn selected() -> tracing::Span {
    tracing::info_span!(target: "span_vs_window::selected", "selected")
}

fn others() -> tracing::Span {
    tracing::info_span!(target: "span_vs_window::others", "others")
}

fn main() {
    let subscriber = tracing_subscriber::registry()
        .with(gpuspan::layer_with("span_vs_window::selected=info"))
        .with(Noop.with_filter(Targets::new().with_target("span_vs_window::others", LevelFilter::INFO)));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let _guard = gpuspan::Config::default().summary(false).no_trace_file().init();
    let timing = gpuspan::cuda::start();
    assert_eq!(timing, gpuspan::cuda::Timing::Cupti, "this bench needs a CUDA device and CUPTI");
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("span_vs_window");
    g.bench_function("plain", |b| b.iter(|| plain(black_box(7))));
    g.bench_function("cuda_window_scope", |b| b.iter(|| window_scope(black_box(7))));
    g.bench_function("selected_span_lifetime", |b| b.iter(|| selected().in_scope(|| plain(black_box(7)))));
    let open = selected();
    g.bench_function("selected_span_reenter", |b| b.iter(|| open.in_scope(|| plain(black_box(7)))));
    let theirs = others();
    g.bench_function("others_span_reenter", |b| b.iter(|| theirs.in_scope(|| plain(black_box(7)))));
    g.finish();
    c.final_summary();
}
