//! Where sampled records leave the process: the Perfetto timeline file and the summary table.
//! (OpenTelemetry export lives beside them when its feature is on.)

pub(crate) mod format;
#[cfg(feature = "otlp")]
#[cfg_attr(not(feature = "enabled"), path = "../off/otlp.rs")]
pub mod otlp;
pub(crate) mod summary;
#[cfg(feature = "enabled")]
pub(crate) mod timeline;
