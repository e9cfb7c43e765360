//! A selected span's OTLP spans (issue 25): its GPU span is a child of the application's own
//! span (exported by the OpenTelemetry layer), not of a host span gpuspan makes, and carries
//! `gpuspan.kind = span`. On lavapipe (a wgpu bracket), against the real collector the OTLP
//! tests use (`otlp_common`). gpuspan's layer sits under the OpenTelemetry layer here, so it is
//! told of each entry before that layer makes the span the current context: the parent is the
//! span's own context all the same.
#![cfg(all(feature = "otlp", feature = "wgpu-suite"))]

mod otlp_common;

use gpuspan::otlp::{OtlpConfig, Protocol};
use gpuspan_tests::gpu::Gpu;
use otlp_common::{all_named, assert_no_orphans, by_name, test_id, Collector};
use std::time::Duration;
use tracing_subscriber::prelude::*;

fn draw(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    gpu.queue.submit([encoder.finish()]);
}

/// Selected: a measurement scope.
#[tracing_attributes::instrument(skip_all, fields(frame = n))]
fn render_frame(gpu: &Gpu, n: u64) {
    draw(gpu);
    draw(gpu);
}

/// Exported by the OpenTelemetry layer, not selected.
#[tracing_attributes::instrument(target = "app_request", skip_all)]
fn request(gpu: &Gpu) {
    render_frame(gpu, 7);
}

#[test]
fn a_selected_spans_gpu_span_is_a_child_of_the_users_span() {
    let Some(gpu) = Gpu::for_test(1 << 14, 256) else { return };
    let collector = Collector::shared_or_own();
    let id = test_id("spans-otlp");
    let otlp = OtlpConfig::new()
        .protocol(Protocol::Grpc)
        .endpoint(collector.grpc_url())
        .service_name("gpuspan-tests")
        .resource_attribute("test.id", &id)
        .schedule_delay(Duration::from_millis(100))
        .metric_interval(Duration::from_secs(30))
        .start()
        .expect("OTLP export starts");
    let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with("spans_otlp=info")).with(otlp.layer());
    tracing::subscriber::with_default(subscriber, || request(&gpu));
    gpu.wait();
    assert!(gpuspan::flush(), "the bracket resolved");
    assert!(otlp.flush(Duration::from_secs(10)), "flush finished");
    let report = otlp.shutdown();
    assert_eq!(report.spans_lost(), 0, "{report}");

    // request and render_frame from the OpenTelemetry layer, render_frame [gpu] from gpuspan.
    let spans = collector.wait_spans(&id, Duration::from_secs(20), |s| s.len() >= 3);
    assert_no_orphans(&spans, &[]);
    let frames = all_named(&spans, "render_frame");
    assert_eq!(frames.len(), 1, "one span for the user's span, no second host span from gpuspan: {spans:#?}");
    let (req, frame, gpu_span) = (by_name(&spans, "request"), frames[0], by_name(&spans, "render_frame [gpu]"));
    assert_eq!(frame["parent_span_id"], req["span_id"]);
    assert_eq!(gpu_span["parent_span_id"], frame["span_id"], "the GPU span is the user's span's child");
    assert_eq!(gpu_span["trace_id"], req["trace_id"]);
    let attr = |k: &str| gpu_span["attributes"][k].clone();
    assert_eq!(attr("gpuspan.kind"), "span");
    assert_eq!(attr("gpuspan.role"), "gpu");
    assert_eq!(attr("gpu.timing.source"), "gpu_timestamp");
    assert_eq!(attr("gpu.timing.bracket_end"), "exit");
    assert_eq!(attr("frame"), 7, "the span's field");
    assert_eq!(spans.len(), 3, "{spans:#?}");
}
