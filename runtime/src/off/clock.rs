//! The host clock, in Unix-epoch nanoseconds. Without the `enabled` feature it reads the system
//! clock directly: the same scale, with no TSC calibration to pay for (nothing here is on a hot
//! path when nothing is measured).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A reading of the host clock; without `enabled` it is already Unix-epoch nanoseconds.
#[inline]
pub fn raw() -> u64 {
    now_ns()
}

/// A raw reading as Unix-epoch nanoseconds (the identity without `enabled`).
#[inline]
pub fn raw_to_ns(raw: u64) -> u64 {
    raw
}

/// Nanoseconds between two raw readings.
#[inline]
pub fn raw_delta_ns(start: u64, end: u64) -> u64 {
    end.saturating_sub(start)
}

/// Now, in Unix-epoch nanoseconds (the wall clock without `enabled`).
#[inline]
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Converts an `Instant` taken by the caller into the same scale as [`now_ns`].
pub fn instant_ns(at: Instant) -> u64 {
    let (now, ns) = (Instant::now(), now_ns());
    (ns + at.saturating_duration_since(now).as_nanos() as u64)
        .saturating_sub(now.saturating_duration_since(at).as_nanos() as u64)
}
