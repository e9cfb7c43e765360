//! OTLP export throughput against a real collector: sampled records (a host span and a GPU span
//! each) pushed as fast as the exporter takes them, with the queue sized so that nothing needs
//! dropping, then flushed; prints spans per second and every loss counter.
//!
//! `otlp_throughput <endpoint> <grpc|http> [records]`, e.g. with `scripts/collector start`:
//! `otlp_throughput http://127.0.0.1:4318 http 100000`.

use gpuspan::otlp::{OtlpConfig, Protocol};
use gpuspan::{Backend, Site, SiteDesc, SiteKind};
use gpuspan_testing::record::{GpuTiming, Interval, TimingSource};
use gpuspan_testing::OtlpExport;
use gpuspan_testing::Record;
use std::time::{Duration, Instant};

static SITE: Site = Site::new(SiteDesc {
    name: "throughput_kernel",
    function: "throughput_kernel",
    kind: SiteKind::Kernel,
    backend: Backend::Cuda,
    module_path: "otlp_throughput",
    file: file!(),
    line: line!(),
    direction: None,
    threshold_us: None,
    trace_all: true,
    track_memory: false,
});

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let endpoint = args.next().ok_or("usage: otlp_throughput <endpoint> <grpc|http> [records]")?;
    let protocol = match args.next().as_deref() {
        Some("grpc") => Protocol::Grpc,
        _ => Protocol::HttpProtobuf,
    };
    let records: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let otlp = OtlpConfig::new()
        .endpoint(endpoint.clone())
        .protocol(protocol)
        .service_name("gpuspan-throughput")
        .max_queue_size((2 * records) as usize)
        .max_export_batch_size(4096)
        .start()?;
    let base = gpuspan_testing::clock::now_ns();
    let t = Instant::now();
    for i in 0..records {
        let start = base + i * 1_000;
        let mut r = Record::new(&SITE, i + 1, 1, Interval { start_ns: start, end_ns: start + 400 });
        r.gpu = Some(GpuTiming::new(Interval { start_ns: start + 500, end_ns: start + 900 }, TimingSource::Cupti));
        otlp.export(&r);
    }
    let queued = t.elapsed();
    let flushed = otlp.flush(Duration::from_secs(120));
    let elapsed = t.elapsed();
    let s = otlp.stats();
    let spans = 2 * records;
    println!(
        "{endpoint} ({protocol:?}): {spans} spans queued in {:.3} s, exported in {:.3} s = {:.0} spans/s; flushed: {flushed}",
        queued.as_secs_f64(),
        elapsed.as_secs_f64(),
        s.spans_exported as f64 / elapsed.as_secs_f64()
    );
    println!(
        "exported {}, dropped {}, failed {}, abandoned {}, pending {}",
        s.spans_exported, s.spans_dropped, s.spans_failed, s.spans_abandoned, s.spans_pending
    );
    let report = otlp.shutdown();
    println!("shutdown: {report:?}");
    Ok(())
}
