//! Memory and throughput soak: millions of annotated calls, with the resident set size printed
//! as it goes. Checks that the runtime's memory stays flat (no per-call growth) and measures how
//! many calls per second one core turns into aggregates.
//!
//! `cargo run --release -p gpuspan-tests --bin soak -- [calls]` (default 10 000 000).

use std::time::Instant;

#[gpuspan::gpu_kernel(name = "soak_kernel", threshold_us = 1_000_000)]
#[inline(never)]
fn soak_kernel(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

/// Resident set size in KiB, from /proc (Linux).
fn rss_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

fn main() {
    let calls: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    let before = rss_kib().unwrap_or(0);
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    let steps = 10;
    let per_step = calls / steps;
    let mut acc = 0u64;
    let start = Instant::now();
    let mut rss = Vec::new();
    for _ in 0..steps {
        for i in 0..per_step {
            acc ^= soak_kernel(std::hint::black_box(i));
        }
        rss.push(rss_kib().unwrap_or(0));
    }
    let elapsed = start.elapsed();
    drop(guard);
    let s = gpuspan::summary();
    let counted = s.site("soak_kernel").map_or(0, |r| r.calls);
    println!("calls: {} (aggregated: {counted}), checksum {acc:x}", per_step * steps);
    println!(
        "time: {:.3} s, {:.1} ns per call, {:.2} M calls/s on one thread",
        elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / (per_step * steps) as f64,
        (per_step * steps) as f64 / elapsed.as_secs_f64() / 1e6
    );
    println!("rss KiB: before init {before}, after each tenth {rss:?}");
    let first = rss[0];
    let last = *rss.last().unwrap_or(&first);
    println!(
        "rss growth over the run: {} KiB; added by the runtime (last - before): {} KiB",
        last as i64 - first as i64,
        last as i64 - before as i64
    );
    assert_eq!(counted, per_step * steps, "every call aggregated");
}
