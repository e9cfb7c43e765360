//! Where sampled records leave the process: the capture file, the Perfetto timeline file and the
//! summary table; and the live feed, which serves the aggregates to `gpuspan top` while the
//! program runs. (OpenTelemetry export lives beside them, in `otlp/`, declared by `lib.rs` with
//! its feature.)

pub(crate) mod format;
pub(crate) mod summary;
// The capture file, the timeline file and the live feed: the instrumented build's.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::*;
