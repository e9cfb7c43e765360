//! What a scope costs on the caller's thread, against the same function without the attribute,
//! measured in one run so the ratios hold on any machine.
//!
//! - `plain`: the function without gpuspan (the baseline).
//! - `gpuspan_off`: annotated, feature on, `GPUSPAN=off` at run time (target ≤ 1 ns added).
//! - `host_scope_sampled_out`: annotated, on, a host-timed call shorter than its threshold:
//!   the full path into the aggregates, no span exported (target ≤ 25 ns added).
//! - `host_scope_with_subscriber`: the same with a `tracing` subscriber that records spans,
//!   to show how much of a scope is `tracing` itself.
//! - `host_scope_in_request`: the same inside an application span (a request), no capture.
//! - `host_scope_in_request_captured`: the same with a capture file configured, so that the
//!   scope takes its span chain (docs/decisions.md, 28); the difference is that chain's cost.

use criterion::{criterion_group, Criterion};
use std::hint::black_box;

#[inline(never)]
fn plain(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

#[gpuspan::gpu_kernel(threshold_us = 1_000_000)]
#[inline(never)]
fn annotated(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

/// Every call becomes a record (and, with a capture, a frame in the file).
#[gpuspan::gpu_kernel(trace_all)]
#[inline(never)]
fn recorded(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

fn scope_overhead(c: &mut Criterion) {
    let mut g = c.benchmark_group("scope");
    g.bench_function("plain", |b| b.iter(|| plain(black_box(7))));
    gpuspan::set_enabled(false);
    g.bench_function("gpuspan_off", |b| b.iter(|| annotated(black_box(7))));
    gpuspan::set_enabled(true);
    g.bench_function("host_scope_sampled_out", |b| b.iter(|| annotated(black_box(7))));
    let subscriber = tracing_subscriber::registry();
    tracing::subscriber::with_default(subscriber, || {
        g.bench_function("host_scope_with_subscriber", |b| b.iter(|| annotated(black_box(7))));
        let request = tracing::info_span!("request");
        request.in_scope(|| g.bench_function("host_scope_in_request", |b| b.iter(|| annotated(black_box(7)))));
        // From here on scopes take their span chain; calls stay below the threshold, so the
        // capture file itself writes nothing per call.
        let dir = std::env::temp_dir().join(format!("gpuspan-scope-bench-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let guard = gpuspan::Config::from_env()
            .no_trace_file()
            .summary(false)
            .trace_all(false)
            .capture(dir.join("bench.gpuspan"))
            .init();
        request.in_scope(|| g.bench_function("host_scope_in_request_captured", |b| b.iter(|| annotated(black_box(7)))));
        drop(guard);
        let _ = std::fs::remove_dir_all(&dir);
    });
    g.finish();
}

/// The loop callgrind counts: `valgrind --tool=callgrind --collect-atstart=no
/// --toggle-collect='scope::counted*' <bench binary> --calls in_request|in_request_captured N`.
#[inline(never)]
fn counted(f: fn(u64) -> u64, n: u64) {
    for i in 0..n {
        black_box(f(black_box(i)));
    }
}

/// Runs `n` annotated calls inside an application span, with a capture file configured or not,
/// without criterion: instructions per call are repeatable on a busy machine, times are not.
/// `recorded_in_request_captured`: every call becomes a record written to the capture, and
/// takes its span chain (`gpuspan::spans::from` in callgrind's inclusive costs).
fn calls(case: &str, n: u64) {
    tracing::subscriber::with_default(tracing_subscriber::registry(), || {
        let dir = std::env::temp_dir().join(format!("gpuspan-scope-calls-{}", std::process::id()));
        let guard = match case {
            "in_request" => None,
            "in_request_captured" | "recorded_in_request_captured" => {
                let _ = std::fs::create_dir_all(&dir);
                Some(gpuspan::Config::from_env().no_trace_file().summary(false).capture(dir.join("c.gpuspan")).init())
            }
            other => panic!("no case {other}: in_request or in_request_captured"),
        };
        let f: fn(u64) -> u64 = if case.starts_with("recorded") { recorded } else { annotated };
        tracing::info_span!("request").in_scope(|| {
            black_box(f(black_box(0)));
            counted(f, n);
        });
        drop(guard);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

criterion_group!(benches, scope_overhead);

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
