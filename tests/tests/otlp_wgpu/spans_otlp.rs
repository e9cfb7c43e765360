//! A selected span's OTLP spans (issue 25): its GPU span is a child of the application's own
//! span (exported by the OpenTelemetry layer), not of a host span gpuspan makes, and carries
//! `gpuspan.kind = span`. On lavapipe (a wgpu bracket), against the real collector the OTLP
//! tests use (`otlp_common`). gpuspan's layer sits under the OpenTelemetry layer here, so it is
//! told of each entry before that layer makes the span the current context: the parent is the
//! span's own context all the same.
#![cfg(all(feature = "otlp", feature = "wgpu-suite"))]

use crate::otlp_common;

use gpuspan::otlp::{OtlpConfig, Protocol};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;
use otlp_common::{all_named, assert_no_orphans, by_name, test_id, Collector};
use rusty_fork::rusty_fork_test;
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
    let subscriber =
        tracing_subscriber::registry().with(gpuspan::layer_with(concat!(module_path!(), "=info"))).with(otlp.layer());
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

/// Loads weights under a span, keeping them: the owner of a live buffer.
#[tracing_attributes::instrument(skip_all)]
fn load(gpu: &Gpu) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("weights"),
        size: 1 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    })
}

/// A scratch buffer made and dropped under a span: the peak, then gone.
#[tracing_attributes::instrument(skip_all)]
fn decode(gpu: &Gpu) {
    drop(gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("kv cache"),
        size: 4 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    }));
}

rusty_fork_test! {
    /// An instrumented device's memory (decision 65) reaches the collector as metrics: live
    /// bytes per device and per owner, and the peak, the figures the summary states.
    #[test]
    fn an_instrumented_devices_memory_reaches_the_collector_as_metrics() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        let collector = Collector::shared_or_own();
        let id = test_id("wgpu-memory-otlp");
        let otlp = OtlpConfig::new()
            .protocol(Protocol::Grpc)
            .endpoint(collector.grpc_url())
            .service_name("gpuspan-tests")
            .resource_attribute("test.id", &id)
            .metric_interval(Duration::from_millis(200))
            .start()
            .expect("OTLP export starts");
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with(concat!(module_path!(), "=info")));
        let weights = tracing::subscriber::with_default(subscriber, || {
            let weights = load(&gpu);
            decode(&gpu);
            weights
        });
        let summary = gpuspan::summary().to_string();
        let report = otlp.shutdown();
        assert_eq!(report.metric_exports_failed, 0, "{report}");
        let data = 4096; // the helper's own buffer
        let (live, peak) = (data + (1 << 20), data + (5 << 20));
        assert!(summary.contains("live 1.0 MiB in 2 buffers and textures; peak 5.0 MiB"), "{summary}");
        let points = collector.wait_metrics(&id, Duration::from_secs(20), |m| {
            m.iter().any(|p| p["name"] == "gpuspan.wgpu.memory.peak")
        });
        // The last point of each: what the device held when the export shut down.
        let last = |name: &str, owner: Option<&str>| {
            points
                .iter()
                .rev()
                .find(|p| p["name"] == name && owner.is_none_or(|o| p["attributes"]["gpuspan.memory.owner"] == o))
                .unwrap_or_else(|| panic!("{name} {owner:?} in {points:#?}"))
                .clone()
        };
        let usage = last("gpuspan.wgpu.memory.usage", None);
        assert_eq!(usage["unit"], "By");
        assert_eq!(usage["value"], live);
        assert!(usage["attributes"]["gpu.device.name"].is_string(), "{usage}");
        assert_eq!(last("gpuspan.wgpu.memory.peak", None)["value"], peak);
        assert_eq!(last("gpuspan.wgpu.memory.owner.usage", Some("load"))["value"], 1 << 20);
        drop(weights);
    }
}
