//! What the export reports: why it could not start, and what it did. Plain data, shared with
//! the build without the `enabled` feature so that code reading it compiles either way.

use std::fmt;

/// Why OTLP export could not start. Every variant says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    #[error(
        "OTLP export is already running in this process; shut the running one down (drop its guard or handle) first"
    )]
    /// Another pipeline runs in this process.
    AlreadyRunning,
    #[error(
        "could not start the thread that exports to the collector ({0}); the process may be out of threads or memory"
    )]
    /// The export thread could not be started.
    Runtime(#[source] std::io::Error),
    #[error("could not set up TLS for the OTLP exporter: {0}; check OTEL_EXPORTER_OTLP_CERTIFICATE and the system's CA certificates")]
    /// The TLS configuration could not be built.
    Tls(String),
    #[error("could not create the OTLP {signal} exporter for {url}: {source}; check OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL")]
    /// The OpenTelemetry exporter for a signal could not be built.
    Exporter {
        /// `span` or `metric`.
        signal: &'static str,
        /// Where it would have exported to.
        url: String,
        /// What the exporter said.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// What happened to the spans and metric exports of one pipeline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportStats {
    /// Spans accepted by the collector.
    pub spans_exported: u64,
    /// Spans dropped because the export queue was full.
    pub spans_dropped: u64,
    /// Spans the collector did not take (unreachable, refused, timed out).
    pub spans_failed: u64,
    /// Spans still queued when shutdown's deadline passed.
    pub spans_abandoned: u64,
    /// Spans waiting in the queue or in flight.
    pub spans_pending: u64,
    /// Metric exports the collector accepted.
    pub metric_exports: u64,
    /// Metric exports that failed (the next success carries their counts).
    pub metric_exports_failed: u64,
    /// Shutdown's deadline passed before every signal was shut down; what was still pending
    /// is in the counts above.
    pub shutdown_timed_out: bool,
}

impl ExportStats {
    /// Spans that never reached the collector.
    pub fn spans_lost(&self) -> u64 {
        self.spans_dropped + self.spans_failed + self.spans_abandoned
    }
}

impl fmt::Display for ExportStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} spans exported", self.spans_exported)?;
        if self.spans_lost() > 0 {
            write!(
                f,
                ", {} lost ({} queue full, {} export failed, {} left at shutdown)",
                self.spans_lost(),
                self.spans_dropped,
                self.spans_failed,
                self.spans_abandoned
            )?;
        }
        write!(f, "; {} metric exports", self.metric_exports)?;
        if self.metric_exports_failed > 0 {
            write!(f, ", {} failed", self.metric_exports_failed)?;
        }
        if self.shutdown_timed_out {
            write!(f, "; shutdown ran out of time")?;
        }
        Ok(())
    }
}
