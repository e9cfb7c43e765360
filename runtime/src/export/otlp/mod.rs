//! OpenTelemetry export over OTLP (feature `otlp`): sampled calls as spans with GPU
//! timestamps, every call as metrics, to any collector, over gRPC or HTTP/protobuf.
//!
//! [`crate::init`] starts it when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; [`OtlpConfig::start`]
//! starts it from code. To export the application's own spans too (and have gpuspan's spans
//! nest under them), add [`Otlp::layer`] to the `tracing` subscriber:
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! let guard = gpuspan::init(); // OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318
//! tracing_subscriber::registry().with(guard.otlp_layer()).init();
//! ```
//!
//! Failures never reach the program: an unreachable collector, a full queue or a slow export
//! are counted, said once, and shown in the summary; shutdown ends within its bound (5 s).
//! docs/otlp.md explains the design.
//!
//! Without the `enabled` feature the configuration is the same (plain data) and the pipeline
//! exports nothing: [`OtlpConfig::start`] connects to nothing and each method of [`Otlp`] says
//! what it returns then.

mod config;
#[cfg(feature = "enabled")]
mod layer;
#[cfg(feature = "enabled")]
mod memory;
#[cfg(feature = "enabled")]
mod metrics;
#[cfg(feature = "enabled")]
pub(crate) mod parent;
#[cfg(feature = "enabled")]
mod queue;
mod report;
#[cfg(feature = "enabled")]
mod resource;
#[cfg(feature = "enabled")]
mod spans;
#[cfg(feature = "enabled")]
mod transport;

pub use config::{OtlpConfig, Protocol};
#[cfg(feature = "enabled")]
use parent::{active, capture_parent, PROCESS};
pub use report::{ExportStats, OtlpError};
use tracing_subscriber::Layer;

use opentelemetry_sdk::trace::SdkTracer;
use std::fmt;
use std::time::Duration;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
// What only the instrumented build uses.
#[cfg(feature = "enabled")]
use {
    crate::pipeline::Sink,
    opentelemetry::trace::TracerProvider as _,
    opentelemetry::Context,
    opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider},
    opentelemetry_sdk::trace::SdkTracerProvider,
    queue::{Queue, QueueProcessor, Worker},
    std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
    std::sync::{mpsc, Arc},
    std::time::Instant,
};

/// A running export pipeline. Dropping it shuts it down (bounded by the shutdown timeout).
///
/// Without the `enabled` feature it holds only its configuration and exports nothing.
pub struct Otlp {
    config: OtlpConfig,
    #[cfg(feature = "enabled")]
    io: Arc<transport::Io>,
    #[cfg(feature = "enabled")]
    tracer_provider: Option<SdkTracerProvider>,
    #[cfg(feature = "enabled")]
    meter_provider: Option<SdkMeterProvider>,
    #[cfg(feature = "enabled")]
    queue: Option<Arc<Queue>>,
    #[cfg(feature = "enabled")]
    spans_sink: Option<Arc<spans::SpansSink>>,
    #[cfg(feature = "enabled")]
    sinks: Vec<Arc<dyn Sink>>,
    #[cfg(feature = "enabled")]
    metric_exported: Arc<AtomicU64>,
    #[cfg(feature = "enabled")]
    metric_failed: Arc<AtomicU64>,
    /// Shut down already (by [`Otlp::shutdown`], `gpuspan::shutdown()` or a drop).
    #[cfg(feature = "enabled")]
    done: AtomicBool,
    /// Shutdown ran out of time (reported in [`ExportStats::shutdown_timed_out`]).
    #[cfg(feature = "enabled")]
    timed_out: AtomicBool,
}

impl fmt::Debug for Otlp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Otlp").field("config", &self.config).field("stats", &self.stats()).finish()
    }
}

/// The W3C `traceparent` of the span this thread is in, to hand to a process this one starts
/// (as its `TRACEPARENT`) so that the child's spans join this trace under that span, as
/// torchrun-style launchers do for their ranks. The span is the innermost one the application
/// has entered and exported (through [`Otlp::layer`] or the OpenTelemetry API), else this
/// process's own `TRACEPARENT` parent. `None` when no export runs or there is neither (always
/// without the `enabled` feature).
pub fn traceparent() -> Option<String> {
    #[cfg(feature = "enabled")]
    {
        let cx = capture_parent().or_else(|| PROCESS.parent.read().ok().and_then(|p| p.clone().flatten()))?;
        resource::traceparent_of(&cx)
    }
    #[cfg(not(feature = "enabled"))]
    {
        None
    }
}

#[cfg(feature = "enabled")]
fn process_parent(report: &mut dyn FnMut(String)) -> Option<Context> {
    if let Some(p) = PROCESS.parent.read().ok().and_then(|p| p.clone()) {
        return p;
    }
    let parent = resource::traceparent(report);
    if let Some(cx) = &parent {
        // The application's own root spans opened on this thread (usually `main`) become
        // children of the remote parent too. The guard is never dropped on purpose: the
        // context stays attached for the life of the thread, like the process's own root.
        std::mem::forget(cx.clone().attach());
    }
    if let Ok(mut p) = PROCESS.parent.write() {
        *p = Some(parent.clone());
    }
    parent
}

impl OtlpConfig {
    /// Starts exporting. Only one pipeline runs at a time in a process.
    ///
    /// Without the `enabled` feature it connects to nothing and returns a pipeline that exports
    /// nothing.
    pub fn start(self) -> Result<Otlp, OtlpError> {
        #[cfg(feature = "enabled")]
        {
            if active().compare_exchange(false, true, Relaxed, Relaxed).is_err() {
                return Err(OtlpError::AlreadyRunning);
            }
            let started = Otlp::build(self);
            if started.is_err() {
                active().store(false, Relaxed);
            }
            started
        }
        #[cfg(not(feature = "enabled"))]
        {
            Ok(Otlp { config: self })
        }
    }
}

impl Otlp {
    #[cfg(feature = "enabled")]
    fn build(config: OtlpConfig) -> Result<Otlp, OtlpError> {
        let mut report = |m: String| crate::diagnostics::note_once(m);
        let io = transport::Io::new()?;
        let resource = resource::build(&config, &mut report);
        let tls = transport::Tls::load(&config, &mut report);
        let mut otlp = Otlp {
            io: io.clone(),
            tracer_provider: None,
            meter_provider: None,
            queue: None,
            spans_sink: None,
            sinks: Vec::new(),
            metric_exported: Arc::default(),
            metric_failed: Arc::default(),
            done: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            config: config.clone(),
        };
        if config.traces {
            let exporter = transport::span_exporter(&config, &tls, &io)?;
            let (c, url) = (config.clone(), config.traces_url());
            let worker = Worker {
                exporter,
                io: io.clone(),
                timeout: config.timeout,
                delay: config.schedule_delay,
                describe_failure: Box::new(move |e| transport::describe_failure(&c, "span", &url, e)),
            };
            let processor = QueueProcessor::start(config.max_queue_size, config.max_export_batch_size, worker)
                .map_err(OtlpError::Runtime)?;
            let queue = processor.queue();
            let provider =
                SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource.clone()).build();
            let sink =
                Arc::new(spans::SpansSink::new(provider.tracer("gpuspan"), queue.clone(), process_parent(&mut report)));
            otlp.queue = Some(queue);
            otlp.spans_sink = Some(sink.clone());
            otlp.sinks.push(sink);
            otlp.tracer_provider = Some(provider);
        }
        if config.metrics {
            let inner = transport::metric_exporter(&config, &tls, &io)?;
            let (c, url) = (config.clone(), config.metrics_url());
            let exporter = metrics::CountingMetricExporter::new(
                inner,
                io.clone(),
                config.timeout,
                Box::new(move |e| transport::describe_failure(&c, "metric", &url, e)),
            );
            otlp.metric_exported = exporter.exported.clone();
            otlp.metric_failed = exporter.failed.clone();
            let reader = PeriodicReader::builder(exporter).with_interval(config.metric_interval).build();
            let provider = SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
            use opentelemetry::metrics::MeterProvider as _;
            otlp.sinks.push(Arc::new(metrics::MetricsSink::new(&provider.meter("gpuspan"))));
            // What the leaves offer as metrics (the monitor's hw.gpu.*, an instrumented wgpu
            // device's memory), through the same provider.
            let mut gauges = crate::collector::collector().leaves.devices().map(|d| d.gauges()).unwrap_or_default();
            gauges.extend(memory::gauges());
            metrics::observe_gauges(&provider.meter("gpuspan"), &gauges);
            otlp.meter_provider = Some(provider);
        }
        for s in &otlp.sinks {
            crate::collector::add_sink(s.clone());
        }
        Ok(otlp)
    }

    /// A tracer exporting through this pipeline, for spans made with the OpenTelemetry API.
    /// Always `None` without the `enabled` feature.
    pub fn tracer(&self) -> Option<SdkTracer> {
        #[cfg(feature = "enabled")]
        {
            self.tracer_provider.as_ref().map(|p| p.tracer("app"))
        }
        #[cfg(not(feature = "enabled"))]
        {
            None
        }
    }

    /// The `tracing` layer that exports the application's own spans through this pipeline
    /// (gpuspan's host spans excluded: gpuspan exports those itself). `None` when spans are
    /// not exported. It is tracing-opentelemetry's layer with a filter that leaves out
    /// gpuspan's own spans and those of the exporter's threads. Always `None` without the
    /// `enabled` feature (a `None` layer does nothing).
    pub fn layer<S>(&self) -> Option<impl Layer<S>>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        #[cfg(feature = "enabled")]
        {
            self.tracer().map(layer::layer)
        }
        #[cfg(not(feature = "enabled"))]
        {
            None::<tracing_subscriber::layer::Identity>
        }
    }

    /// Exports one built record now, as spans, whatever the sampling says: for
    /// `gpuspan-testing` (`crate::__testing::otlp_export`), as records are. Does nothing without
    /// the `enabled` feature.
    pub(crate) fn export_record(&self, record: &crate::record::Record) {
        #[cfg(feature = "enabled")]
        if let Some(s) = &self.spans_sink {
            // What the leaves add, as a submitted record has it.
            let mut record = record.clone();
            record.extra = crate::collector::collector().leaves.record_attributes(&record);
            s.export(&record);
        }
        #[cfg(not(feature = "enabled"))]
        let _ = record;
    }

    /// The configuration this pipeline runs with (header values redacted in its `Debug`).
    pub fn config(&self) -> &OtlpConfig {
        &self.config
    }

    /// Where spans go, for messages: `http://host:4318/v1/traces (http/protobuf)`.
    pub fn destination(&self) -> String {
        format!("{} ({})", self.config.traces_url(), self.config.protocol.as_str())
    }

    /// What this pipeline has exported, dropped and lost so far (all zero without the `enabled`
    /// feature).
    pub fn stats(&self) -> ExportStats {
        #[cfg(feature = "enabled")]
        {
            let mut s = ExportStats {
                metric_exports: self.metric_exported.load(Relaxed),
                metric_exports_failed: self.metric_failed.load(Relaxed),
                shutdown_timed_out: self.timed_out.load(Relaxed),
                ..ExportStats::default()
            };
            if let Some(q) = &self.queue {
                let c = &q.counts;
                s.spans_exported = c.exported.load(Relaxed);
                s.spans_dropped = c.dropped.load(Relaxed);
                s.spans_failed = c.failed.load(Relaxed);
                s.spans_abandoned = c.abandoned.load(Relaxed);
                s.spans_pending = c.enqueued.load(Relaxed) - s.spans_exported - s.spans_failed - s.spans_abandoned;
            }
            s
        }
        #[cfg(not(feature = "enabled"))]
        {
            ExportStats::default()
        }
    }

    /// Sends everything queued now (spans and metrics), waiting at most `timeout`. Returns
    /// whether everything was handed over (exported or failed) in time: always `true` without
    /// the `enabled` feature, nothing being queued.
    pub fn flush(&self, timeout: Duration) -> bool {
        #[cfg(feature = "enabled")]
        {
            let deadline = Instant::now() + timeout;
            let spans_done = self.queue.as_ref().is_none_or(|q| q.flush(deadline));
            let metrics_done = match &self.meter_provider {
                None => true,
                Some(p) => {
                    let p = p.clone();
                    within(deadline, move || p.force_flush().is_ok()).unwrap_or(false)
                }
            };
            spans_done && metrics_done
        }
        #[cfg(not(feature = "enabled"))]
        {
            let _ = timeout;
            true
        }
    }

    /// Stops exporting: the last spans and metrics are sent, within the shutdown timeout
    /// (5 s by default) whether or not the collector answers. Returns what the export did over
    /// its life. Returns at once without the `enabled` feature, having exported nothing.
    pub fn shutdown(self) -> ExportStats {
        #[cfg(feature = "enabled")]
        {
            self.shutdown_shared().0
        }
        #[cfg(not(feature = "enabled"))]
        {
            ExportStats::default()
        }
    }

    /// [`Otlp::shutdown`] through a shared reference, for `gpuspan::shutdown()`, which ends the
    /// export the guard still refers to. The first call does the work; later ones report it done.
    /// Also returns how long it took.
    #[cfg(feature = "enabled")]
    pub(crate) fn shutdown_shared(&self) -> (ExportStats, Duration) {
        let start = Instant::now();
        if self.done.swap(true, Relaxed) {
            return (self.stats(), Duration::ZERO);
        }
        for s in &self.sinks {
            crate::collector::remove_sink(s);
        }
        active().store(false, Relaxed);
        let bound = self.config.shutdown_timeout;
        // The waiting below ends a little before the bound, leaving room for what follows it
        // (counting, the report, waking up on a busy machine): waiting until the bound itself
        // made shutdown take 5.03–5.12 s against 5 s. Exports are cut earlier still, so that
        // the export threads can count what they could not send and exit within the waiting.
        let deadline = start + bound - (bound / 10).min(Duration::from_millis(100));
        let grace = (bound / 4).min(Duration::from_millis(250));
        self.io.set_deadline(start + bound - grace, bound);
        // Both signals shut down at once, each on its own thread, so one stuck signal cannot
        // eat the other's time and neither can hold the caller past the deadline.
        let (tx, rx) = mpsc::channel();
        let budget = self.config.shutdown_timeout;
        if let Some(p) = self.tracer_provider.clone() {
            let tx = tx.clone();
            spawn_detached("gpuspan-otlp-stop", move || {
                let _ = p.shutdown_with_timeout(budget);
                let _ = tx.send(());
            });
        }
        if let Some(p) = self.meter_provider.clone() {
            let tx = tx.clone();
            spawn_detached("gpuspan-otlp-stop", move || {
                let _ = p.shutdown_with_timeout(budget);
                let _ = tx.send(());
            });
        }
        drop(tx);
        let expected = usize::from(self.tracer_provider.is_some()) + usize::from(self.meter_provider.is_some());
        let mut complete = true;
        for _ in 0..expected {
            // A failed last export is already counted; only running out of time is incomplete.
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(()) => {}
                Err(_) => {
                    complete = false;
                    break;
                }
            }
        }
        if !complete {
            crate::diagnostics::note_once(format_args!(
                "OTLP shutdown did not finish within {:.1} s; what was still pending is counted as lost",
                budget.as_secs_f64()
            ));
        }
        self.timed_out.store(!complete, Relaxed);
        (self.stats(), start.elapsed())
    }
}

/// The export's end at `gpuspan::shutdown()`. The pipeline never gives `Otlp` itself a record
/// (its span and metric sinks, which [`OtlpConfig::start`] registered, take them): `init` hands
/// it to [`collector::finish_sinks`](crate::collector::finish_sinks) with the sinks it started, so that every output ends in one place
/// and one order.
#[cfg(feature = "enabled")]
impl Sink for Otlp {
    fn accept(&self, _record: &crate::record::Record) {}

    /// Bounded by the export's own shutdown timeout (see [`Otlp::shutdown`]), not `deadline`.
    fn finish(&self, _deadline: Instant) -> Option<String> {
        let (stats, took) = self.shutdown_shared();
        Some(format!(
            "gpuspan: OTLP export to {}: {stats}; shutdown took {:.2} s",
            self.destination(),
            took.as_secs_f64()
        ))
    }
}

#[cfg(feature = "enabled")]
impl Drop for Otlp {
    fn drop(&mut self) {
        self.shutdown_shared();
    }
}

#[cfg(feature = "enabled")]
fn spawn_detached(name: &str, f: impl FnOnce() + Send + 'static) {
    if std::thread::Builder::new().name(name.into()).spawn(f).is_err() {
        crate::diagnostics::note_once("could not start a thread to shut OTLP export down; skipping its last export");
    }
}

/// Runs `f` on its own thread and waits for it until `deadline`.
#[cfg(feature = "enabled")]
fn within<T: Send + 'static>(deadline: Instant, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    spawn_detached("gpuspan-otlp-flush", move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()
}
