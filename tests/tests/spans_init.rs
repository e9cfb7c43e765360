//! `GPUSPAN_SPANS` read by `init()` and `gpuspan::layer()` installed before it (issue 25): a
//! program with only `tracing` spans gets its selected spans in the timeline (named after the
//! span, `gpuspan.kind = span`, `gpu.timing.source = gpu_timestamp`), in the capture file and in
//! the summary, on lavapipe. A process of its own: it sets the environment and the global
//! subscriber.
#![cfg(feature = "wgpu-suite")]

use gpuspan_tests::gpu::Gpu;

/// A third party's GPU code, as in spans_wgpu.rs.
fn draw(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    gpu.queue.submit([encoder.finish()]);
}

#[tracing_attributes::instrument(skip_all, fields(n = n))]
fn render_frame(gpu: &Gpu, n: u64) {
    draw(gpu);
}

#[tracing_attributes::instrument(target = "elsewhere", skip_all)]
fn not_selected(gpu: &Gpu) {
    draw(gpu);
}

#[test]
fn gpuspan_spans_selects_spans_for_the_timeline_the_capture_and_the_summary() {
    let Some(gpu) = Gpu::for_test(1 << 14, 64) else { return };
    std::env::set_var("GPUSPAN_SPANS", "spans_init=info");
    use tracing_subscriber::layer::SubscriberExt;
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(gpuspan::layer()))
        .expect("the only subscriber");
    let dir = std::env::temp_dir().join(format!("gpuspan-spans-init-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (trace, capture) = (dir.join("spans.trace.json"), dir.join("spans.gpuspan"));
    let guard = gpuspan::Config::from_env().summary(false).trace_all(true).trace_file(&trace).capture(&capture).init();
    for n in 0..3 {
        render_frame(&gpu, n);
    }
    not_selected(&gpu);
    gpu.wait();
    assert!(gpuspan::flush());
    let summary = gpuspan::summary();
    assert_eq!(summary.site("render_frame").map(|s| s.calls), Some(3), "{summary}");
    assert!(summary.site("not_selected").is_none());
    drop(guard);

    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let frames: Vec<_> = events.iter().filter(|e| e["name"] == "render_frame" && e["ph"] == "X").collect();
    // One host event and one GPU event per span.
    assert_eq!(frames.len(), 6, "{frames:?}");
    for e in &frames {
        assert_eq!(e["args"]["gpuspan.kind"], "span", "{e}");
        assert_eq!(e["args"]["gpu.timing.source"], "gpu_timestamp", "{e}");
        assert_eq!(e["args"]["gpu.timing.bracket_end"], "exit", "{e}");
    }
    let mut ns: Vec<_> = frames.iter().filter_map(|e| e["args"]["n"].as_i64()).collect();
    ns.sort();
    assert_eq!(ns, [0, 0, 1, 1, 2, 2], "the span's field in its events' args");
    assert!(!events.iter().any(|e| e["name"] == "not_selected"));

    let c = gpuspan_capture::Capture::open(&capture).expect("the capture reads");
    let name = |r: &gpuspan_capture::Record| c.site(r.site).map(|s| s.name.clone()).unwrap_or_default();
    let recs: Vec<_> = c.records.iter().filter(|r| name(r) == "render_frame").collect();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.gpu.is_some()), "each span GPU-timed in the capture");
    let (report, _) = gpuspan_cli::report::stream(&capture, false).expect("the report reads it");
    let row = report.sites.iter().find(|s| s.site == "render_frame").expect("`gpuspan report` has a row per span name");
    assert_eq!((row.recorded, row.calls), (3, Some(3)), "{row:?}");
    assert_eq!(row.sources, ["gpu_timestamp"], "{row:?}");
}
