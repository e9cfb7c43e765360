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

/// Nested selected spans: the outer one's bracket holds the inner one's.
#[tracing_attributes::instrument(skip_all)]
fn outer_pass(gpu: &Gpu) {
    draw(gpu);
    inner_pass(gpu);
    draw(gpu);
}

#[tracing_attributes::instrument(skip_all)]
fn inner_pass(gpu: &Gpu) {
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
    for _ in 0..2 {
        outer_pass(&gpu);
    }
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
    // The span's own tracks: its host events beside the threads', its GPU events beside the device's.
    let track = |e: &serde_json::Value| {
        events
            .iter()
            .find(|m| m["ph"] == "M" && m["name"] == "thread_name" && m["pid"] == e["pid"] && m["tid"] == e["tid"])
            .and_then(|m| m["args"]["name"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    for e in &frames {
        assert_eq!(e["cat"].as_str().map(|c| c.ends_with("span")), Some(true), "{e}");
        assert!(track(e).ends_with("span: render_frame"), "on the span's own track: {} {e}", track(e));
    }

    let c = gpuspan_capture::Capture::open(&capture).expect("the capture reads");
    let name = |r: &gpuspan_capture::Record| c.site(r.site).map(|s| s.name.clone()).unwrap_or_default();
    let recs: Vec<_> = c.records.iter().filter(|r| name(r) == "render_frame").collect();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.gpu.is_some()), "each span GPU-timed in the capture");
    let site = |n: &str| c.sites.iter().find(|s| s.name == n).unwrap_or_else(|| panic!("no site {n}"));
    assert_eq!(site("render_frame").kind, gpuspan_capture::SiteKind::Span, "the capture says it is a span");
    // A span's record names its own instance, so what ran inside it names it as an ancestor.
    let span_name = |id: Option<u64>| c.spans.iter().find(|s| Some(s.id) == id).map(|s| s.name.clone());
    assert!(recs.iter().all(|r| span_name(r.span).as_deref() == Some("render_frame")), "{recs:?}");
    let inner: Vec<_> = c.records.iter().filter(|r| r.site == site("inner_pass").id).collect();
    assert_eq!(inner.len(), 2);
    for r in &inner {
        let parent = c.spans.iter().find(|s| Some(s.id) == r.span).and_then(|s| s.parent);
        assert_eq!(span_name(parent).as_deref(), Some("outer_pass"), "inner_pass's instance is inside outer_pass's");
    }
    let (report, _) = gpuspan_cli::report::stream(&capture, false).expect("the report reads it");
    let row = report.sites.iter().find(|s| s.site == "render_frame").expect("`gpuspan report` has a row per span name");
    assert_eq!((row.recorded, row.calls), (3, Some(3)), "{row:?}");
    assert_eq!(row.sources, ["gpu_timestamp"], "{row:?}");
    assert_eq!(row.kind, "span", "{row:?}");
    // Self and inclusive GPU time per span name: the outer span's bracket holds the inner one's.
    let span_row = |n: &str| {
        report.spans.iter().find(|s| s.span == n).unwrap_or_else(|| panic!("no span row {n}: {:?}", report.spans))
    };
    let (outer, inner) = (span_row("outer_pass"), span_row("inner_pass"));
    assert_eq!((outer.recorded, inner.recorded), (2, 2));
    assert_eq!(inner.self_ns, inner.inclusive_ns, "nothing selected inside inner_pass: {inner:?}");
    assert!(outer.self_ns > 0 && outer.self_ns < outer.inclusive_ns, "{outer:?}");
    assert_eq!(
        outer.inclusive_ns - outer.self_ns,
        inner.inclusive_ns,
        "the outer span's inclusive time less its self time is its child's: {outer:?} {inner:?}"
    );
    assert!(outer.bracketed && outer.inclusive_p50_ns >= outer.self_p50_ns);
    let frame = span_row("render_frame");
    assert_eq!((frame.recorded, frame.calls, frame.self_ns), (3, Some(3), frame.inclusive_ns));
    let text = report.to_text();
    assert!(text.contains("Selected spans") && text.contains("outer_pass"), "{text}");
    let csv = report.table(gpuspan_cli::report::CsvTable::Spans).to_csv();
    assert!(csv.lines().next().unwrap().contains("GPU self (ns)"), "{csv}");
    assert_eq!(csv.lines().count(), 4, "a header and three span names: {csv}");
}
