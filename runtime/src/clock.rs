//! The host clock every record is expressed in: Unix-epoch nanoseconds, read from a monotonic
//! source so that intervals never go backwards when the wall clock is adjusted.
//!
//! OpenTelemetry and CUPTI both speak Unix-epoch nanoseconds, so CUPTI timestamps need no
//! mapping and other GPU clocks are mapped onto this one. Scopes read raw ticks (`raw`: the
//! TSC through `quanta` where it is invariant, a few ns) and convert them only when the record is
//! built (`raw_to_ns`), which keeps two clock reads off the cost of a scope.
//!
//! Without the `enabled` feature only [`now_ns`] is here (for `gpuspan-testing`), reading the
//! system clock directly: the same scale, with no TSC calibration to pay for (nothing is
//! measured).

// Everything only the instrumented build uses: the clock's origin and its raw readings.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::{raw, raw_delta_ns, raw_to_ns, ticks_below_ns, ticks_converter, ticks_to_ns};

/// Now, in Unix-epoch nanoseconds on the monotonic clock: the scale of every record's times.
/// Without the `enabled` feature, the wall clock.
#[inline]
pub fn now_ns() -> u64 {
    #[cfg(feature = "enabled")]
    return raw_to_ns(raw());
    #[cfg(not(feature = "enabled"))]
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
