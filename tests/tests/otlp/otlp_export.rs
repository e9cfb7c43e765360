//! Spans and metrics reach a real OpenTelemetry collector with the right names, attributes,
//! parents and clocks, over gRPC and over HTTP/protobuf.
#![cfg(feature = "otlp")]

use crate::otlp_common;

use gpuspan::otlp::{OtlpConfig, Protocol};
use gpuspan::{gpu_kernel, gpu_transfer, Backend, Direction, Site, SiteDesc, SiteKind, TimingSource};
use gpuspan_testing::record::{
    Activity, ActivityKind, DeviceLabel, GpuTiming, Interval, KernelGeometry, MemoryKind, Record,
};
use gpuspan_testing::OtlpExport;
use otlp_common::{all_named, assert_no_orphans, by_name, test_id, Collector};
use rusty_fork::rusty_fork_test;
use serde_json::Value as Json;
use std::time::Duration;
use tracing_subscriber::prelude::*;

#[gpu_transfer(direction = cpu_to_gpu, trace_all)]
fn upload(data: &[f32]) -> Vec<f32> {
    data.to_vec()
}

#[gpu_kernel(trace_all)]
fn step(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = v.sqrt() + 1.0);
}

#[gpu_kernel(name = "failing_step", trace_all)]
fn failing(fail: bool) -> Result<(), String> {
    if fail {
        Err("no".into())
    } else {
        Ok(())
    }
}

/// Far under its threshold: aggregated and counted in metrics, never a span. The threshold is
/// its own and generous: on a busy 2-core CI machine a preempted call of this function once took
/// 101 µs, past the default 100 µs, and became a span.
#[gpu_kernel(threshold_us = 1_000_000)]
fn tiny(x: u64) -> u64 {
    x.wrapping_mul(3)
}

/// The application's own span, as `#[instrument]` or a request span would be.
fn request(n: usize) {
    tracing::info_span!("request").in_scope(|| {
        let mut v = upload(&vec![4.0f32; n]);
        step(&mut v);
        let _ = failing(true);
    });
}

static IMPORTED: Site = Site::new(SiteDesc {
    name: "imported.gemm",
    function: "gemm",
    kind: SiteKind::Kernel,
    backend: Backend::Cuda,
    module_path: "otlp_export",
    file: file!(),
    line: line!(),
    direction: None,
    threshold_us: None,
    trace_all: true,
    track_memory: false,
});

/// A record with GPU timing and two activities, as the CUDA backend makes them: the clocks of
/// its spans must come back exactly.
fn gpu_record(base: u64) -> Record {
    let dev = Some(DeviceLabel::new(0, "Test GPU"));
    let mut r = Record::new(&IMPORTED, 1, 0, Interval { start_ns: base, end_ns: base + 20_000 });
    let mut gpu = GpuTiming::new(Interval { start_ns: base + 35_000, end_ns: base + 235_000 }, TimingSource::Cupti);
    gpu.busy_ns = 190_000;
    gpu.device = dev.clone();
    r.gpu = Some(gpu);
    let geometry = KernelGeometry {
        grid: [64, 32, 1],
        block: [256, 1, 1],
        registers_per_thread: 96,
        static_shared_bytes: 16384,
        ..KernelGeometry::default()
    };
    let mut kernel = Activity::new(
        "sgemm_128x64",
        Interval { start_ns: base + 35_000, end_ns: base + 175_000 },
        ActivityKind::Kernel(geometry),
    );
    let copy = ActivityKind::Copy {
        bytes: 1 << 20,
        direction: Some(Direction::GpuToCpu),
        src: MemoryKind::Device,
        dst: MemoryKind::Pinned,
    };
    let mut copy = Activity::new("memcpy DtoH", Interval { start_ns: base + 185_000, end_ns: base + 235_000 }, copy);
    (kernel.stream, kernel.device) = (Some(7), dev.clone());
    (copy.stream, copy.device) = (Some(7), dev);
    r.activities = vec![kernel, copy];
    r
}

fn wall_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn attr<'a>(span: &'a Json, key: &str) -> &'a Json {
    &span["attributes"][key]
}

fn roundtrip(protocol: Protocol) {
    let collector = Collector::shared_or_own();
    let id = test_id(&format!("export-{}", protocol.as_str().replace('/', "-")));
    let endpoint = collector.url(protocol);
    let otlp = OtlpConfig::new()
        .protocol(protocol)
        .endpoint(endpoint)
        .service_name("gpuspan-tests")
        .resource_attribute("test.id", &id)
        .schedule_delay(Duration::from_millis(100))
        .metric_interval(Duration::from_secs(30))
        .start()
        .expect("OTLP export starts");

    let subscriber = tracing_subscriber::registry().with(otlp.layer());
    tracing::subscriber::with_default(subscriber, || {
        request(1 << 16);
        for i in 0..1000 {
            std::hint::black_box(tiny(i));
        }
    });
    let base = gpuspan_testing::clock::now_ns();
    otlp.export(&gpu_record(base));
    assert!(otlp.flush(Duration::from_secs(10)), "flush finished");
    let report = otlp.shutdown();
    println!("{protocol:?}: {report}");
    assert_eq!(report.spans_lost(), 0, "{report}");
    assert!(report.metric_exports >= 1, "{report}");

    // request + upload + step + failing_step + (imported host, gpu, 2 activities) = 8
    let spans = collector.wait_spans(&id, Duration::from_secs(20), |s| s.len() >= 8);
    println!("{protocol:?}: the collector received {} spans", spans.len());
    assert_eq!(spans.len(), 8, "{spans:#?}");
    assert_no_orphans(&spans, &[]);
    assert!(spans.iter().all(|s| s["name"] != "tiny"), "calls under the threshold are not spans");

    let resource = &spans[0]["resource"];
    assert_eq!(resource["service.name"], "gpuspan-tests");
    assert_eq!(resource["process.pid"], i64::from(std::process::id()));
    assert!(resource["host.name"].is_string());

    // The application's span is exported by the layer; gpuspan's host spans hang under it.
    let req = by_name(&spans, "request");
    assert_eq!(req["parent_span_id"], "");
    let up = by_name(&spans, "upload");
    let st = by_name(&spans, "step");
    let fl = by_name(&spans, "failing_step");
    for s in [up, st, fl] {
        assert_eq!(s["parent_span_id"], req["span_id"], "{} is a child of the request span", s["name"]);
        assert_eq!(s["trace_id"], req["trace_id"]);
        assert_eq!(attr(s, "gpu.timing.source"), "host", "host timing is labelled as such");
        assert_eq!(attr(s, "gpu.backend"), "host");
        assert_eq!(attr(s, "gpuspan.role"), "host");
        assert_eq!(attr(s, "code.file.path"), file!());
        assert!(attr(s, "code.line.number").as_i64().unwrap() > 0);
        assert!(
            s["start_ns"].as_u64() >= req["start_ns"].as_u64() && s["end_ns"].as_u64() <= req["end_ns"].as_u64(),
            "{} lies inside its parent on the wall clock",
            s["name"]
        );
    }
    assert!(all_named(&spans, "upload [gpu]").is_empty(), "no GPU span is made up from host time");
    assert_eq!(attr(up, "gpu_transfer.bytes"), 4 << 16);
    assert_eq!(attr(up, "gpu_transfer.direction"), "cpu_to_gpu");
    assert_eq!(attr(up, "gpu_transfer.name"), "upload");
    assert!(attr(up, "gpu_transfer.bandwidth_bytes_per_s").as_f64().unwrap() > 0.0);
    assert_eq!(attr(st, "gpu.kernel"), "step");
    assert_eq!(attr(st, "code.function.name"), concat!(module_path!(), "::step"));
    assert_eq!(attr(st, "gpu.is_slow").as_bool(), Some(attr(st, "gpu.duration_us").as_f64().unwrap() >= 100.0));
    assert_eq!(attr(st, "gpu.threshold_us"), 100.0);
    assert_eq!(attr(fl, "error"), true);
    assert_eq!(fl["status_code"], 2, "errors set the span status");

    // The GPU span: a child of the host span, with the GPU's own interval. Exported times are
    // gpuspan's clock moved onto the wall clock by one offset per record, so every time is
    // checked to the nanosecond relative to the host span's start, and the start itself
    // against the wall clock.
    let rec = gpu_record(base);
    let g = rec.gpu.as_ref().unwrap();
    let host = by_name(&spans, "imported.gemm");
    let gpu = by_name(&spans, "imported.gemm [gpu]");
    let t0 = host["start_ns"].as_u64().unwrap();
    let rel = |s: &Json| (s["start_ns"].as_u64().unwrap() - t0, s["end_ns"].as_u64().unwrap() - t0);
    let wall_base = base as i128 + (wall_now_ns() as i128 - gpuspan_testing::clock::now_ns() as i128);
    assert!(
        (t0 as i128 - wall_base).abs() < 50_000_000,
        "host span start {t0} is the record's start on the wall clock"
    );
    assert_eq!(host["parent_span_id"], "");
    assert_eq!(rel(host), (0, 20_000));
    assert_eq!(gpu["parent_span_id"], host["span_id"]);
    assert_eq!(
        rel(gpu),
        (g.interval.start_ns - base, g.interval.end_ns - base),
        "the GPU span has the GPU interval, not the host's"
    );
    assert_eq!(attr(gpu, "gpu.timing.source"), "cupti");
    assert_eq!(attr(gpu, "gpuspan.role"), "gpu");
    assert_eq!(attr(gpu, "gpu.duration_us"), 190.0);
    assert_eq!(attr(gpu, "gpu.host_duration_us"), 20.0);
    assert_eq!(attr(gpu, "gpu.device.name"), "Test GPU");
    let kernel = by_name(&spans, "sgemm_128x64");
    let copy = by_name(&spans, "memcpy DtoH");
    for (s, a) in [(kernel, &rec.activities[0]), (copy, &rec.activities[1])] {
        assert_eq!(s["parent_span_id"], gpu["span_id"], "activities are children of the GPU span");
        assert_eq!(rel(s), (a.interval.start_ns - base, a.interval.end_ns - base));
        assert_eq!(attr(s, "gpu.cuda.stream_id"), 7);
    }
    assert_eq!(*attr(kernel, "gpu.cuda.grid_dim"), serde_json::json!([64, 32, 1]));
    assert_eq!(*attr(kernel, "gpu.cuda.block_dim"), serde_json::json!([256, 1, 1]));
    assert_eq!(attr(kernel, "gpu.cuda.registers_per_thread"), 96);
    assert_eq!(attr(kernel, "gpu.cuda.shared_mem_bytes"), 16384);
    assert_eq!(attr(copy, "gpu_transfer.bytes"), 1 << 20);
    assert_eq!(attr(copy, "gpu_transfer.direction"), "gpu_to_cpu");
    assert_eq!(attr(copy, "gpu_transfer.src_kind"), "device");
    assert_eq!(attr(copy, "gpu_transfer.dst_kind"), "pinned");

    // Every call is in the metrics, the 1000 fast ones included.
    let points = collector.wait_metrics(&id, Duration::from_secs(20), |m| {
        m.iter().any(|p| p["name"] == "gpuspan.call.duration" && p["attributes"]["gpuspan.site"] == "tiny")
            && m.iter().any(|p| p["name"] == "gpuspan.transfer.bytes")
    });
    let tiny = points
        .iter()
        .find(|p| p["name"] == "gpuspan.call.duration" && p["attributes"]["gpuspan.site"] == "tiny")
        .expect("a duration point for `tiny`");
    println!("{protocol:?}: metric point for tiny: {tiny}");
    assert_eq!(tiny["unit"], "s");
    assert_eq!(tiny["count"], 1000, "every call counted, none sampled away");
    assert_eq!(tiny["attributes"]["gpu.timing.source"], "host");
    let bytes = points.iter().find(|p| p["name"] == "gpuspan.transfer.bytes").expect("a bytes point");
    assert_eq!(bytes["unit"], "By");
    assert_eq!(bytes["attributes"]["gpuspan.site"], "upload");
    assert_eq!(bytes["value"], 4 << 16);
}

// Each test in its own process: each starts the process's OTLP export (one at a time) and
// counts every call of the file's sites into its metrics.
rusty_fork_test! {
    #[test]
    fn grpc_spans_and_metrics_reach_the_collector() {
        roundtrip(Protocol::Grpc);
    }
}

rusty_fork_test! {
    #[test]
    fn http_protobuf_spans_and_metrics_reach_the_collector() {
        roundtrip(Protocol::HttpProtobuf);
    }
}
