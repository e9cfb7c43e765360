//! The host clock every record is expressed in: Unix-epoch nanoseconds, read from a monotonic
//! source so that intervals never go backwards when the wall clock is adjusted.
//!
//! OpenTelemetry and CUPTI both speak Unix-epoch nanoseconds, so CUPTI timestamps need no
//! mapping and other GPU clocks are mapped onto this one. Scopes read raw ticks (`raw`: the
//! TSC through `quanta` where it is invariant, a few ns) and convert them only when the record is
//! built (`raw_to_ns`), which keeps two clock reads off the cost of a scope.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

struct Origin {
    clock: quanta::Clock,
    raw: u64,
    epoch_ns: u64,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

fn origin() -> &'static Origin {
    ORIGIN.get_or_init(|| {
        let clock = quanta::Clock::new();
        Origin {
            raw: clock.raw(),
            epoch_ns: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
            clock,
        }
    })
}

/// A raw reading of the host clock; only differences and [`raw_to_ns`] mean anything.
#[inline(always)]
pub(crate) fn raw() -> u64 {
    origin().clock.raw()
}

/// A raw reading as Unix-epoch nanoseconds.
#[inline]
pub(crate) fn raw_to_ns(raw: u64) -> u64 {
    let o = origin();
    o.epoch_ns + o.clock.delta_as_nanos(o.raw, raw)
}

/// Nanoseconds between two raw readings.
#[inline]
pub(crate) fn raw_delta_ns(start: u64, end: u64) -> u64 {
    origin().clock.delta_as_nanos(start, end)
}

/// Now, in Unix-epoch nanoseconds on the monotonic clock: the scale of every record's times.
#[inline]
pub fn now_ns() -> u64 {
    raw_to_ns(raw())
}

#[cfg(test)]
mod tests {
    #[test]
    fn raw_readings_convert_to_the_epoch_and_advance() {
        let a = super::now_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = super::now_ns();
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert!(b > a && b - a >= 4_000_000, "{a} {b}");
        assert!(wall.abs_diff(b) < 50_000_000, "within 50 ms of the wall clock: {wall} vs {b}");
    }
}
