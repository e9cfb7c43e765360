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

use criterion::{criterion_group, criterion_main, Criterion};
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
        request.in_scope(|| {
            g.bench_function("host_scope_in_request_captured", |b| b.iter(|| annotated(black_box(7))))
        });
        drop(guard);
        let _ = std::fs::remove_dir_all(&dir);
    });
    g.finish();
}

criterion_group!(benches, scope_overhead);
criterion_main!(benches);
