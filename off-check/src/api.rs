//! Every public item of gpuspan, called with the `enabled` feature off: a program written against
//! the instrumented API must compile unchanged without it (no `#[cfg]` around gpuspan calls), and
//! each call must do nothing. `tests/api.rs` runs these; with the `backends` feature the
//! backends' API is called too (still without `enabled`).

use std::time::Duration;

/// Calls the core API and checks that each call did nothing.
pub fn call_core() {
    let guard = gpuspan::Config::from_env()
        .summary(false)
        .trace_file("/nonexistent/gpuspan-off-check.trace.json")
        .trace_format(gpuspan::TraceFormat::Perfetto)
        .no_trace_file()
        .capture("/nonexistent/gpuspan-off-check.gpuspan")
        .no_capture()
        .threshold_us(100)
        .trace_all(true)
        .timeline_capacity(16)
        .flush_on_signal(true)
        .live(true)
        .spans("my_app=info,[request]")
        .init();
    assert!(guard.trace_file().is_none() && guard.capture_file().is_none());
    // No socket is served: the live feed is instrumentation too.
    assert!(guard.live_socket().is_none());
    drop(gpuspan::init());
    // Ends nothing (nothing runs); the guard's drop after it does nothing either (it has no
    // `Drop` without `enabled`: dropping it must still compile, as a program's would).
    gpuspan::shutdown();
    #[allow(clippy::drop_non_drop)]
    drop(guard);

    // The span layer: installs, selects nothing, does nothing.
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let layer: gpuspan::SpanLayer<_> = gpuspan::layer();
        let _default =
            tracing_subscriber::registry().with(layer).with(gpuspan::layer_with("my_app=info")).set_default();
    }

    gpuspan::set_enabled(true);
    assert!(gpuspan::flush());
    assert!(gpuspan::init().flush(Duration::from_millis(1)));

    let summary: gpuspan::Summary = gpuspan::summary();
    assert!(summary.reached.is_empty() && summary.never_reached.is_empty());
    assert!(summary.site("k").is_none());
    assert!(summary.to_string().contains("no annotated function was called"));
    let rows: Vec<&gpuspan::SiteSummary> = summary.reached.iter().collect();
    assert!(rows.iter().all(|r| r.bandwidth_bytes_per_s().is_none() || r.calls > 0));

    // The data types stay, so code that reads records compiles.
    let _: fn(&gpuspan_testing::Record) -> gpuspan::TimingSource = gpuspan_testing::Record::source;
    let kinds =
        [gpuspan::SiteKind::Kernel.as_str(), gpuspan::Backend::Host.as_str(), gpuspan::Direction::CpuToGpu.as_str()];
    assert_eq!(kinds, ["kernel", "host", "cpu_to_gpu"]);
    assert_eq!(gpuspan::TimingSource::ALL.len(), 5);
    assert_eq!(gpuspan::TimingSource::GpuPasses.as_str(), "gpu_passes");
    let _: Option<&gpuspan::Site> = None;
    let _: Option<gpuspan::SiteDesc> = None;
    let _: Option<gpuspan::DeviceLabel> = None;
}

/// Calls the test API (`gpuspan-testing`): records can be built and read, nothing is captured.
pub fn call_testing() {
    let capture = gpuspan_testing::Capture::start();
    assert!(capture.records().is_empty() && capture.of("k").is_empty());
    assert!(gpuspan_testing::Capture::start_all_threads().records().is_empty());
    static SITE: gpuspan::Site = gpuspan::Site::new(gpuspan::SiteDesc {
        name: "k",
        function: "k",
        kind: gpuspan::SiteKind::Kernel,
        backend: gpuspan::Backend::Host,
        module_path: "off_check",
        file: file!(),
        line: line!(),
        direction: None,
        threshold_us: None,
        trace_all: false,
        track_memory: false,
    });
    use gpuspan_testing::record::{Activity, ActivityKind, GpuTiming, Interval, KernelGeometry, Value};
    let a = gpuspan_testing::clock::now_ns();
    let interval = Interval { start_ns: a, end_ns: a + 10 };
    let mut record = gpuspan_testing::Record::new(&SITE, 1, 0, interval);
    record.gpu = Some(GpuTiming::new(interval, gpuspan::TimingSource::Cupti));
    record.activities.push(Activity::new("k", interval, ActivityKind::Kernel(KernelGeometry::default())));
    let _: Option<gpuspan_testing::memory::MemoryMark> = record.memory.map(|m| m.0);
    assert_eq!(record.duration_ns(), 10);
    assert!(record.attributes().contains(&("gpu.timing.source", Value::Str("cupti".into()))));
    assert!(gpuspan_testing::clock::now_ns() >= a);
}

/// Calls the CUDA API (no device needed: nothing is loaded).
#[cfg(feature = "backends")]
pub fn call_cuda() {
    assert!(gpuspan::cuda::probe().is_ok_and(|d| d.is_empty()));
    assert_eq!(gpuspan::cuda::start(), gpuspan::cuda::Timing::Host);
    assert_eq!(gpuspan_testing::cuda::timing(), None);
    assert_eq!(gpuspan_testing::cuda::cupti_counts(), None::<gpuspan_testing::cuda::replay::Counts>);
    assert_eq!(gpuspan_testing::cuda::cupti_clock_offset(), None);
    assert_eq!(gpuspan_testing::cuda::cupti_queue_grown(), 0);
    assert!(!gpuspan_testing::cuda::cupti_windows_read_realtime());
    gpuspan_testing::cuda::dump_note("off");
    let _ = gpuspan::cuda::attach;
    let _: Option<gpuspan::cuda::CudaError> = None;
    fn takes_stream<S: gpuspan::cuda::AsStream>(_: S) {}
    let _ = takes_stream::<&cudarc::driver::CudaStream>;
}

/// Calls the device monitor's API: it loads no NVML and samples nothing.
#[cfg(feature = "backends")]
pub fn call_monitor() {
    use gpuspan::monitor::{MonitorConfig, MonitorError, Sample};
    use std::time::Duration;
    let config = MonitorConfig::from_env().interval(Duration::from_millis(50)).history(10).cpu_budget_percent(1.0);
    assert_eq!((config.sampling_interval(), config.history_len()), (Duration::from_millis(50), 10));
    assert!(config.cpu_budget() > 0.0);
    assert_eq!(config.start(), Ok(()));
    assert!(gpuspan::monitor::ready(Duration::ZERO).is_ok_and(|d| d.is_empty()));
    assert!(gpuspan::monitor::history(0).is_empty());
    assert_eq!(gpuspan::monitor::latest(0), None::<Sample>);
    assert!(gpuspan::monitor::stop());
    let _: Option<(gpuspan::monitor::GpuInfo, gpuspan::monitor::PcieLink, MonitorError)> = None;
    let _: Option<(gpuspan::monitor::NvLink, gpuspan::monitor::NvLinkRemote)> = None;
}

/// Calls the OTLP API: the configuration is real, the pipeline exports nothing.
#[cfg(feature = "backends")]
pub fn call_otlp() {
    use gpuspan_testing::OtlpExport;
    static SITE: gpuspan::Site = gpuspan::Site::new(gpuspan::SiteDesc {
        name: "k",
        function: "k",
        kind: gpuspan::SiteKind::Kernel,
        backend: gpuspan::Backend::Cuda,
        module_path: "off_check",
        file: file!(),
        line: line!(),
        direction: None,
        threshold_us: None,
        trace_all: false,
        track_memory: false,
    });
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
    otlp.export(&gpuspan_testing::Record::new(&SITE, 1, 0, Default::default()));
    let report: gpuspan::otlp::ExportStats = otlp.shutdown();
    assert!(!report.shutdown_timed_out && report == gpuspan::otlp::ExportStats::default());
    let _: Option<gpuspan::otlp::OtlpError> = None;
    assert_eq!(gpuspan::otlp::traceparent(), None, "no span is exported to hand on");
}

/// The wgpu calls, written once: `wgpu` is the major at the invocation.
#[cfg(feature = "backends")]
macro_rules! wgpu_calls {
    () => {
        /// Calls the wgpu API. Needs a device, so tests only compile it; the off `read_buffer` reads untimed.
        pub fn call_wgpu(adapter: &wgpu::Adapter, device: &wgpu::Device, queue: &wgpu::Queue) -> wgpu::Features {
            gpuspan::wgpu::register(adapter, device, queue);
            let (same_device, same_queue) = gpuspan::wgpu::instrument(adapter, device.clone(), queue.clone());
            assert!(&same_device == device && &same_queue == queue, "off: instrument returns its arguments");
            // Off, `instrument_instance` returns its argument (no instance here to call it on).
            let _: fn(wgpu::Instance) -> wgpu::Instance = gpuspan::wgpu::instrument_instance::<wgpu::Instance>;
            fn takes_recorder<R: gpuspan::wgpu::AsRecorder>(_: R) {}
            fn takes_queue<Q: gpuspan::wgpu::AsHandle<wgpu::Queue>>(_: Q) {}
            let _ = (takes_recorder::<&mut wgpu::CommandEncoder>, takes_queue::<&wgpu::Queue>);
            let mut encoder = device.create_command_encoder(&Default::default());
            drop(gpuspan::wgpu::attach(&mut encoder).begin_compute_pass(&Default::default()));
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 4,
                usage: wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read: Result<usize, wgpu::BufferAsyncError> =
                gpuspan::wgpu::read_buffer(device, queue, &buffer, .., <[u8]>::len);
            assert!(read.is_err() || read == Ok(4));
            gpuspan::wgpu::timestamp_features(adapter)
        }
    };
}

#[cfg(feature = "backends")]
wgpu_calls!();

/// The same calls with wgpu 29's types: the off build takes each supported major's.
#[cfg(feature = "backends")]
pub mod on_wgpu29 {
    use wgpu29 as wgpu;
    wgpu_calls!();
}
