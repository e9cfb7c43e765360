//! Where sampled records leave the process: the Perfetto timeline file and the summary table.
//! (OpenTelemetry export lives beside them when its feature is on.)

pub(crate) mod format;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod summary;
pub(crate) mod timeline;
