//! Where sampled records leave the process: the capture file, the Perfetto timeline file and the
//! summary table. (OpenTelemetry export lives beside them, in `otlp/`, declared by `lib.rs` with
//! its feature.)

#[cfg(feature = "enabled")]
pub(crate) mod capture_file;
#[cfg(feature = "enabled")]
pub(crate) mod file;
pub(crate) mod format;
pub(crate) mod summary;
#[cfg(feature = "enabled")]
pub(crate) mod timeline;
