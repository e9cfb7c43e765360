//! The clock records are on, in Unix-epoch nanoseconds. Without the `enabled` feature it reads
//! the system clock directly: the same scale, with no TSC calibration to pay for (nothing is
//! measured).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix-epoch nanoseconds (the wall clock without `enabled`).
#[inline]
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
