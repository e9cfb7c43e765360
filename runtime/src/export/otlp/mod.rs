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
// Everything only the instrumented build uses: the pipeline's machinery and its parts.
#[cfg(feature = "enabled")]
pub(crate) mod imp;
mod report;

pub use config::{OtlpConfig, Protocol};
pub use report::{ExportStats, OtlpError};

use opentelemetry_sdk::trace::SdkTracer;
use std::fmt;
use std::time::Duration;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A running export pipeline. Dropping it shuts it down (bounded by the shutdown timeout).
///
/// Without the `enabled` feature it holds only its configuration and exports nothing.
pub struct Otlp {
    config: OtlpConfig,
    /// The providers, queue and sinks it started.
    #[cfg(feature = "enabled")]
    running: imp::Running,
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
    return imp::traceparent();
    #[cfg(not(feature = "enabled"))]
    None
}

impl OtlpConfig {
    /// Starts exporting. Only one pipeline runs at a time in a process.
    ///
    /// Without the `enabled` feature it connects to nothing and returns a pipeline that exports
    /// nothing.
    pub fn start(self) -> Result<Otlp, OtlpError> {
        #[cfg(feature = "enabled")]
        return imp::start(self);
        #[cfg(not(feature = "enabled"))]
        Ok(Otlp { config: self })
    }
}

impl Otlp {
    /// A tracer exporting through this pipeline, for spans made with the OpenTelemetry API.
    /// Always `None` without the `enabled` feature.
    pub fn tracer(&self) -> Option<SdkTracer> {
        #[cfg(feature = "enabled")]
        return self.running.tracer();
        #[cfg(not(feature = "enabled"))]
        None
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
        return self.tracer().map(imp::layer::layer);
        #[cfg(not(feature = "enabled"))]
        None::<tracing_subscriber::layer::Identity>
    }

    /// Exports one built record now, as spans, whatever the sampling says: for
    /// `gpuspan-testing` (`crate::__testing::otlp_export`), as records are. Does nothing without
    /// the `enabled` feature.
    pub(crate) fn export_record(&self, record: &crate::record::Record) {
        #[cfg(feature = "enabled")]
        self.running.export(record);
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
        return self.running.stats();
        #[cfg(not(feature = "enabled"))]
        ExportStats::default()
    }

    /// Sends everything queued now (spans and metrics), waiting at most `timeout`. Returns
    /// whether everything was handed over (exported or failed) in time: always `true` without
    /// the `enabled` feature, nothing being queued.
    pub fn flush(&self, timeout: Duration) -> bool {
        #[cfg(feature = "enabled")]
        return self.running.flush(timeout);
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
        return self.shutdown_shared().0;
        #[cfg(not(feature = "enabled"))]
        ExportStats::default()
    }
}
