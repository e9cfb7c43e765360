//! Every public item of gpuspan, called with the `enabled` feature off: a program written against
//! the instrumented API must compile unchanged without it (no `#[cfg]` around gpuspan calls), and
//! each call must do nothing. `tests/api.rs` runs these; with the `backends` feature the
//! backends' API is called too (still without `enabled`).

use std::time::{Duration, Instant};

/// Calls the core API and checks that each call did nothing.
pub fn call_core() {
    let guard = gpuspan::Config::from_env()
        .summary(false)
        .trace_file("/nonexistent/gpuspan-off-check.trace.json")
        .no_trace_file()
        .capture("/nonexistent/gpuspan-off-check.gpuspan")
        .no_capture()
        .threshold_us(gpuspan::DEFAULT_THRESHOLD_US)
        .trace_all(true)
        .timeline_capacity(16)
        .flush_on_signal(true)
        .init();
    assert!(guard.trace_file().is_none() && guard.capture_file().is_none());
    drop(gpuspan::init());
    // Ends nothing (nothing runs); the guard's drop after it does nothing either.
    gpuspan::shutdown();
    drop(guard);

    gpuspan::set_enabled(true);
    assert!(gpuspan::flush());
    assert!(gpuspan::flush_timeout(Duration::from_millis(1)));
    assert!(gpuspan::all_sites().is_empty());

    let capture = gpuspan::Capture::start();
    assert!(capture.records().is_empty() && capture.of("k").is_empty());

    let summary: gpuspan::Summary = gpuspan::summary();
    assert!(summary.reached.is_empty() && summary.never_reached.is_empty());
    assert!(summary.site("k").is_none());
    assert!(summary.to_string().contains("no annotated function was called"));
    let rows: Vec<&gpuspan::SiteSummary> = summary.reached.iter().collect();
    assert!(rows.iter().all(|r| r.bandwidth_bytes_per_s().is_none() || r.calls > 0));

    // The data types stay, so code that reads records compiles.
    let _: fn(&gpuspan::Record) -> gpuspan::TimingSource = gpuspan::Record::source;
    let kinds =
        [gpuspan::SiteKind::Kernel.as_str(), gpuspan::Backend::Host.as_str(), gpuspan::Direction::CpuToGpu.as_str()];
    assert_eq!(kinds, ["kernel", "host", "cpu_to_gpu"]);
    assert_eq!(gpuspan::TimingSource::ALL.len(), 4);
    let _: Option<gpuspan::record::GpuTiming> = None;
    let _: Option<gpuspan::memory::MemoryMark> = None;
    let _: Option<&gpuspan::Site> = None;
    let _: Option<gpuspan::SiteDesc> = None;

    let a = gpuspan::clock::now_ns();
    let raw = gpuspan::clock::raw();
    assert!(gpuspan::clock::raw_to_ns(raw) >= a);
    assert!(gpuspan::clock::raw_delta_ns(raw, gpuspan::clock::raw()) < 60_000_000_000);
    assert!(gpuspan::clock::instant_ns(Instant::now()).abs_diff(a) < 60_000_000_000);
}

/// Calls the CUDA API (no device needed: nothing is loaded).
#[cfg(feature = "backends")]
pub fn call_cuda() {
    assert!(gpuspan::cuda::probe().is_ok_and(|d| d.is_empty()));
    assert_eq!(gpuspan::cuda::start(), gpuspan::cuda::Timing::Host);
    assert_eq!(gpuspan::cuda::cupti_counts(), None::<gpuspan::cuda::resolve::Counts>);
    assert_eq!(gpuspan::cuda::cupti_clock_offset(), None);
    gpuspan::cuda::dump_note("off");
    assert_eq!(gpuspan::cuda::timing(), None);
    let _ = gpuspan::cuda::attach;
    let _: Option<gpuspan::cuda::CudaError> = None;
    fn takes_stream<S: gpuspan::cuda::AsStream>(_: S) {}
    let _ = takes_stream::<&cudarc::driver::CudaStream>;
}

/// Calls the OTLP API: the configuration is real, the pipeline exports nothing.
#[cfg(feature = "backends")]
pub fn call_otlp() {
    use gpuspan::otlp::{OtlpConfig, Protocol};
    let config = OtlpConfig::new()
        .endpoint("http://127.0.0.1:1")
        .protocol(Protocol::Grpc)
        .header("k", "v")
        .timeout(Duration::from_millis(10))
        .ca_certificate("/nonexistent.pem")
        .service_name("off-check")
        .resource_attribute("k", "v")
        .max_queue_size(8)
        .max_export_batch_size(4)
        .schedule_delay(Duration::from_millis(1))
        .metric_interval(Duration::from_millis(1))
        .shutdown_timeout(Duration::from_millis(1))
        .traces(true)
        .metrics(true);
    assert!(config.traces_url().starts_with("http://127.0.0.1:1"));
    let _ = config.metrics_url();
    let _ = (OtlpConfig::from_env(), OtlpConfig::env_requests_export());
    let guard = gpuspan::Config::from_env().summary(false).otlp(config.clone()).no_otlp().init();
    assert!(guard.otlp().is_none() && guard.otlp_layer::<tracing_subscriber::Registry>().is_none());
    let otlp: gpuspan::otlp::Otlp = config.start().expect("a pipeline that exports nothing");
    assert!(otlp.tracer().is_none() && otlp.layer::<tracing_subscriber::Registry>().is_none());
    assert!(otlp.flush(Duration::ZERO) && otlp.stats().spans_lost() == 0);
    assert!(otlp.destination().contains("grpc") && otlp.config().traces_url() == otlp.config().traces_url());
    let report: gpuspan::otlp::ShutdownReport = otlp.shutdown();
    assert!(report.complete && report.stats == gpuspan::otlp::ExportStats::default());
    let _: Option<gpuspan::otlp::OtlpError> = None;
    let _ = gpuspan::otlp::AppSpans;
}

/// Calls the wgpu API. Needs a device, so tests only compile it; both calls are empty bodies.
#[cfg(feature = "backends")]
pub fn call_wgpu(adapter: &wgpu::Adapter, device: &wgpu::Device, queue: &wgpu::Queue) -> wgpu::Features {
    gpuspan::wgpu::register(adapter, device, queue);
    fn takes_recorder<R: gpuspan::wgpu::AsRecorder>(_: R) {}
    fn takes_queue<Q: gpuspan::wgpu::AsHandle<wgpu::Queue>>(_: Q) {}
    let _ = (takes_recorder::<&mut wgpu::CommandEncoder>, takes_queue::<&wgpu::Queue>);
    let mut encoder = device.create_command_encoder(&Default::default());
    drop(gpuspan::wgpu::attach(&mut encoder).begin_compute_pass(&Default::default()));
    gpuspan::wgpu::timestamp_features(adapter)
}
