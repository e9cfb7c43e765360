//! The export pipeline behind [`Otlp`]: its providers, span queue and sinks, started by
//! [`start`] and shut down within the configured bound. Only the instrumented build has it.

pub(super) mod layer;
mod memory;
mod metrics;
pub(crate) mod parent;
mod queue;
mod resource;
mod spans;
mod transport;

use super::{ExportStats, Otlp, OtlpConfig, OtlpError};
use crate::pipeline::Sink;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Context;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use parent::{active, capture_parent, PROCESS};
use queue::{Queue, QueueProcessor, Worker};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What a started pipeline holds beside its configuration.
pub(super) struct Running {
    io: Arc<transport::Io>,
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
    queue: Option<Arc<Queue>>,
    spans_sink: Option<Arc<spans::SpansSink>>,
    sinks: Vec<Arc<dyn Sink>>,
    metric_exported: Arc<AtomicU64>,
    metric_failed: Arc<AtomicU64>,
    /// Shut down already (by [`Otlp::shutdown`], `gpuspan::shutdown()` or a drop).
    done: AtomicBool,
    /// Shutdown ran out of time (reported in [`ExportStats::shutdown_timed_out`]).
    timed_out: AtomicBool,
}

/// [`super::traceparent`]'s answer.
pub(super) fn traceparent() -> Option<String> {
    let cx = capture_parent().or_else(|| PROCESS.parent.read().ok().and_then(|p| p.clone().flatten()))?;
    resource::traceparent_of(&cx)
}

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

/// [`OtlpConfig::start`]: one pipeline at a time.
pub(super) fn start(config: OtlpConfig) -> Result<Otlp, OtlpError> {
    if active().compare_exchange(false, true, Relaxed, Relaxed).is_err() {
        return Err(OtlpError::AlreadyRunning);
    }
    let started = build(config);
    if started.is_err() {
        active().store(false, Relaxed);
    }
    started
}

fn build(config: OtlpConfig) -> Result<Otlp, OtlpError> {
    let mut report = |m: String| crate::diagnostics::note_once(m);
    let io = transport::Io::new()?;
    let resource = resource::build(&config, &mut report);
    let tls = transport::Tls::load(&config, &mut report);
    let mut running = Running {
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
        running.queue = Some(queue);
        running.spans_sink = Some(sink.clone());
        running.sinks.push(sink);
        running.tracer_provider = Some(provider);
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
        running.metric_exported = exporter.exported.clone();
        running.metric_failed = exporter.failed.clone();
        let reader = PeriodicReader::builder(exporter).with_interval(config.metric_interval).build();
        let provider = SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
        use opentelemetry::metrics::MeterProvider as _;
        running.sinks.push(Arc::new(metrics::MetricsSink::new(&provider.meter("gpuspan"))));
        // What the leaves offer as metrics (the monitor's hw.gpu.*, an instrumented wgpu
        // device's memory), through the same provider.
        let mut gauges = crate::hooks::leaves().devices().map(|d| d.gauges()).unwrap_or_default();
        gauges.extend(memory::gauges());
        metrics::observe_gauges(&provider.meter("gpuspan"), &gauges);
        running.meter_provider = Some(provider);
    }
    for s in &running.sinks {
        crate::collector::add_sink(s.clone());
    }
    Ok(Otlp { config, running })
}

impl Running {
    /// [`Otlp::tracer`].
    pub(super) fn tracer(&self) -> Option<SdkTracer> {
        self.tracer_provider.as_ref().map(|p| p.tracer("app"))
    }

    /// [`Otlp::export_record`].
    pub(super) fn export(&self, record: &crate::record::Record) {
        if let Some(s) = &self.spans_sink {
            // What the leaves add, as a submitted record has it.
            let mut record = record.clone();
            record.extra = crate::hooks::leaves().record_attributes(&record);
            s.export(&record);
        }
    }

    /// [`Otlp::stats`].
    pub(super) fn stats(&self) -> ExportStats {
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

    /// [`Otlp::flush`].
    pub(super) fn flush(&self, timeout: Duration) -> bool {
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
}

impl Otlp {
    /// [`Otlp::shutdown`] through a shared reference, for `gpuspan::shutdown()`, which ends the
    /// export the guard still refers to. The first call does the work; later ones report it done.
    /// Also returns how long it took.
    pub(crate) fn shutdown_shared(&self) -> (ExportStats, Duration) {
        let start = Instant::now();
        let running = &self.running;
        if running.done.swap(true, Relaxed) {
            return (self.stats(), Duration::ZERO);
        }
        for s in &running.sinks {
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
        running.io.set_deadline(start + bound - grace, bound);
        // Both signals shut down at once, each on its own thread, so one stuck signal cannot
        // eat the other's time and neither can hold the caller past the deadline.
        let (tx, rx) = mpsc::channel();
        let budget = self.config.shutdown_timeout;
        if let Some(p) = running.tracer_provider.clone() {
            let tx = tx.clone();
            spawn_detached("gpuspan-otlp-stop", move || {
                let _ = p.shutdown_with_timeout(budget);
                let _ = tx.send(());
            });
        }
        if let Some(p) = running.meter_provider.clone() {
            let tx = tx.clone();
            spawn_detached("gpuspan-otlp-stop", move || {
                let _ = p.shutdown_with_timeout(budget);
                let _ = tx.send(());
            });
        }
        drop(tx);
        let expected = usize::from(running.tracer_provider.is_some()) + usize::from(running.meter_provider.is_some());
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
        running.timed_out.store(!complete, Relaxed);
        (self.stats(), start.elapsed())
    }
}

/// The export's end at `gpuspan::shutdown()`. The pipeline never gives `Otlp` itself a record
/// (its span and metric sinks, which [`OtlpConfig::start`] registered, take them): `init` hands
/// it to [`collector::finish_sinks`](crate::collector::finish_sinks) with the sinks it started, so that every output ends in one place
/// and one order.
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

impl Drop for Otlp {
    fn drop(&mut self) {
        self.shutdown_shared();
    }
}

fn spawn_detached(name: &str, f: impl FnOnce() + Send + 'static) {
    if std::thread::Builder::new().name(name.into()).spawn(f).is_err() {
        crate::diagnostics::note_once("could not start a thread to shut OTLP export down; skipping its last export");
    }
}

/// Runs `f` on its own thread and waits for it until `deadline`.
fn within<T: Send + 'static>(deadline: Instant, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    spawn_detached("gpuspan-otlp-flush", move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()
}
