//! The host clock every record is expressed in: Unix-epoch nanoseconds, read from the monotonic
//! clock so that intervals never go backwards when the wall clock is adjusted.
//!
//! OpenTelemetry and CUPTI both speak Unix-epoch nanoseconds, so using them here means CUPTI
//! timestamps need no mapping, and GPU clocks of other backends are mapped onto this one.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct Origin {
    instant: Instant,
    epoch_ns: u64,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

fn origin() -> &'static Origin {
    ORIGIN.get_or_init(|| Origin {
        instant: Instant::now(),
        epoch_ns: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
    })
}

/// Now, in Unix-epoch nanoseconds on the monotonic clock.
#[inline]
pub fn now_ns() -> u64 {
    let o = origin();
    o.epoch_ns + o.instant.elapsed().as_nanos() as u64
}

/// Converts an `Instant` taken by the caller into the same scale as [`now_ns`].
pub fn instant_ns(at: Instant) -> u64 {
    let o = origin();
    match at.checked_duration_since(o.instant) {
        Some(d) => o.epoch_ns + d.as_nanos() as u64,
        None => o.epoch_ns.saturating_sub(o.instant.duration_since(at).as_nanos() as u64),
    }
}
