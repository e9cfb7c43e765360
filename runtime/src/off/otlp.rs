//! OTLP export without the `enabled` feature: the configuration is real (it is plain data and
//! the same file), the pipeline exports nothing.

#[allow(dead_code)]
#[path = "../export/otlp/config.rs"]
mod config;
#[path = "../export/otlp/report.rs"]
mod report;

pub use config::{OtlpConfig, Protocol};
pub use report::{ExportStats, OtlpError};

use opentelemetry_sdk::trace::SdkTracer;
use std::time::Duration;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

/// An export pipeline that exports nothing: gpuspan was built without its `enabled` feature.
#[derive(Debug)]
pub struct Otlp {
    config: OtlpConfig,
}

/// Always `None` without the `enabled` feature: no span is exported to hand on.
pub fn traceparent() -> Option<String> {
    None
}

impl OtlpConfig {
    /// Connects to nothing without the `enabled` feature: returns a pipeline that exports
    /// nothing.
    pub fn start(self) -> Result<Otlp, OtlpError> {
        Ok(Otlp { config: self })
    }
}

impl Otlp {
    /// Always `None` without the `enabled` feature.
    pub fn tracer(&self) -> Option<SdkTracer> {
        None
    }

    /// Always `None` without the `enabled` feature (a `None` layer does nothing).
    pub fn layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S>>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        None::<tracing_subscriber::layer::Identity>
    }

    /// Does nothing without the `enabled` feature.
    #[cfg(feature = "testing")]
    pub fn export(&self, _record: &crate::Record) {}

    /// The configuration it was started with.
    pub fn config(&self) -> &OtlpConfig {
        &self.config
    }

    /// Where spans would go, for messages.
    pub fn destination(&self) -> String {
        format!("{} ({})", self.config.traces_url(), self.config.protocol.as_str())
    }

    /// All zero without the `enabled` feature.
    pub fn stats(&self) -> ExportStats {
        ExportStats::default()
    }

    /// Always `true` without the `enabled` feature: nothing is queued.
    pub fn flush(&self, _timeout: Duration) -> bool {
        true
    }

    /// Returns at once without the `enabled` feature, having exported nothing.
    pub fn shutdown(self) -> ExportStats {
        ExportStats::default()
    }
}
