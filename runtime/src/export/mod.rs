//! Where sampled records leave the process: the capture file, the Perfetto timeline file and the
//! summary table; and the live feed, which serves the aggregates to `gpuspan top` while the
//! program runs. (OpenTelemetry export lives beside them, in `otlp/`, declared by `lib.rs` with
//! its feature.)

#[cfg(feature = "enabled")]
mod capture_encoder;
#[cfg(feature = "enabled")]
pub(crate) mod capture_file;
#[cfg(feature = "enabled")]
pub(crate) mod file;
pub(crate) mod format;
// A Unix socket: elsewhere `Config::live` says once that there is no live feed.
#[cfg(all(feature = "enabled", unix))]
pub(crate) mod live;
#[cfg(feature = "enabled")]
mod perfetto;
pub(crate) mod summary;
#[cfg(feature = "enabled")]
pub(crate) mod timeline;
