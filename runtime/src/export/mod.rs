//! Where sampled records leave the process: the capture file, the Perfetto timeline file and the
//! summary table.
//! (OpenTelemetry export lives beside them when its feature is on.)

#[cfg(feature = "enabled")]
pub(crate) mod capture_file;
#[cfg(feature = "enabled")]
pub(crate) mod file;
pub(crate) mod format;
#[cfg(feature = "otlp")]
#[cfg_attr(not(feature = "enabled"), path = "../off/otlp.rs")]
pub mod otlp;
pub mod summary;
#[cfg(feature = "enabled")]
pub(crate) mod timeline;
