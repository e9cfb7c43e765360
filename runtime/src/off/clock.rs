//! The clock records are on, in Unix-epoch nanoseconds. Without the `enabled` feature it reads
//! the system clock directly: the same scale, with no TSC calibration to pay for (nothing is
//! measured).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix-epoch nanoseconds (the wall clock without `enabled`).
#[inline]
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Without `enabled` nothing reads raw ticks; the per-thread ring, compiled either way, converts
/// none (it stays empty).
#[allow(dead_code)]
#[inline]
pub(crate) fn ticks_to_ns(ticks: u64) -> u64 {
    ticks
}

/// [`ticks_to_ns`] for many conversions in a row.
#[allow(dead_code)]
#[inline]
pub(crate) fn ticks_converter() -> impl Fn(u64) -> u64 + Copy {
    ticks_to_ns
}
