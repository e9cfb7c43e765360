//! The instrumented clock behind [`now_ns`](super::now_ns): the TSC read inline where it is
//! invariant, through `quanta` otherwise, and the conversions of its raw readings.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

struct Origin {
    clock: quanta::Clock,
    raw: u64,
    epoch_ns: u64,
    /// Nanoseconds per tick × 2^`SCALE_SHIFT`: quanta's own conversion (a multiply and a shift
    /// by at most ~31 bits) restated with a wider shift, so that it gives the same nanoseconds
    /// inline, with no branch on the clock's kind.
    scale: u64,
}

/// The shift of [`Origin::scale`]; at least quanta's (the bits of its calibration's tick count).
const SCALE_SHIFT: u32 = 40;

/// The process's clock: its origin, and whether scopes may read the TSC inline.
struct ProcessClock {
    origin: OnceLock<Origin>,
    /// Set once `quanta` is known to read the TSC itself (invariant TSC): scopes then read it
    /// inline with one `rdtsc`, with no call and no branch on quanta's clock kind.
    tsc: AtomicBool,
}

// process-wide because every timestamp of the process is taken against it (two origins would
// put two collectors' records on two clocks), and whether the TSC is usable is a fact of the
// machine, read inline by every scope.
static CLOCK: ProcessClock = ProcessClock { origin: OnceLock::new(), tsc: AtomicBool::new(false) };

fn origin() -> &'static Origin {
    CLOCK.origin.get_or_init(|| {
        let clock = quanta::Clock::new();
        let origin = Origin {
            raw: clock.raw(),
            epoch_ns: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
            scale: clock.delta_as_nanos(0, 1 << SCALE_SHIFT),
            clock,
        };
        CLOCK.tsc.store(reads_the_tsc(&origin.clock), Relaxed);
        origin
    })
}

/// Whether `clock.raw()` is the TSC: its reading lies between two `rdtsc`s taken around it
/// (quanta's other sources count nanoseconds since boot, nowhere near the TSC's value).
#[cfg(target_arch = "x86_64")]
fn reads_the_tsc(clock: &quanta::Clock) -> bool {
    (0..3).any(|_| {
        // SAFETY: `rdtsc` exists on every x86-64 CPU.
        let before = unsafe { core::arch::x86_64::_rdtsc() };
        let raw = clock.raw();
        let after = unsafe { core::arch::x86_64::_rdtsc() };
        before <= raw && raw <= after
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn reads_the_tsc(_: &quanta::Clock) -> bool {
    false
}

/// A raw reading of the host clock; only differences and [`raw_to_ns`] mean anything. On an
/// invariant TSC this is one inlined `rdtsc` (a few ns, no call): the conversion to nanoseconds
/// waits until a record is built or a ring is counted.
#[inline(always)]
pub(crate) fn raw() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if CLOCK.tsc.load(Relaxed) {
        // SAFETY: `rdtsc` exists on every x86-64 CPU; `TSC` says quanta's raw reading is this.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    raw_through_quanta()
}

/// The first reading (which calibrates the clock), and every reading where the TSC is not used.
#[inline(never)]
fn raw_through_quanta() -> u64 {
    origin().clock.raw()
}

/// A raw reading as Unix-epoch nanoseconds.
#[inline]
pub(crate) fn raw_to_ns(raw: u64) -> u64 {
    let o = origin();
    o.epoch_ns + o.to_ns(raw.saturating_sub(o.raw))
}

/// Nanoseconds between two raw readings (0 if `end` is not after `start`).
#[inline]
pub(crate) fn raw_delta_ns(start: u64, end: u64) -> u64 {
    ticks_to_ns(end.saturating_sub(start))
}

impl Origin {
    #[inline(always)]
    fn to_ns(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.scale)) >> SCALE_SHIFT) as u64
    }
}

/// Nanoseconds in a difference of two raw readings.
#[inline]
pub(crate) fn ticks_to_ns(ticks: u64) -> u64 {
    origin().to_ns(ticks)
}

/// [`ticks_to_ns`] for many conversions in a row: the clock looked up once.
#[inline]
pub(crate) fn ticks_converter() -> impl Fn(u64) -> u64 + Copy {
    // The scale by value, so that a loop keeps it in a register.
    let scale = origin().scale;
    move |ticks| ((u128::from(ticks) * u128::from(scale)) >> SCALE_SHIFT) as u64
}

/// The fewest ticks that convert to `ns` nanoseconds or more: a difference below it is shorter
/// than `ns`, known without converting it.
pub(crate) fn ticks_below_ns(ns: u64) -> u64 {
    // The conversion is monotonic below 2^50 ticks (days; no overflow of its 128-bit product):
    // search for the first tick count reaching `ns`.
    let (mut lo, mut hi) = (0u64, 1u64 << 50);
    if ticks_to_ns(hi) < ns {
        return hi;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ticks_to_ns(mid) < ns {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    #[test]
    fn raw_readings_convert_to_the_epoch_and_advance() {
        let a = crate::clock::now_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = crate::clock::now_ns();
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert!(b > a && b - a >= 4_000_000, "{a} {b}");
        assert!(wall.abs_diff(b) < 50_000_000, "within 50 ms of the wall clock: {wall} vs {b}");
    }

    #[test]
    fn ticks_below_a_duration_convert_to_less_than_it() {
        for ns in [0, 1, 999, 100_000, 1_000_000_000] {
            let t = super::ticks_below_ns(ns);
            assert!(t == 0 || super::ticks_to_ns(t - 1) < ns, "{ns}: {t}");
            assert!(super::ticks_to_ns(t) >= ns, "{ns}: {t} is the first to reach it");
        }
    }

    #[test]
    fn the_inline_conversion_is_quantas() {
        let o = super::origin();
        for ticks in [0, 1, 7, 999, 123_456_789, 3_000_000_000, 1 << 40, 86_400 * 4_000_000_000] {
            assert_eq!(o.to_ns(ticks), o.clock.delta_as_nanos(0, ticks), "{ticks} ticks");
        }
    }

    #[test]
    fn inline_readings_are_quantas_raw_readings() {
        let _ = crate::clock::now_ns();
        let (a, q, b) = (super::raw(), super::origin().clock.raw(), super::raw());
        assert!(a <= q && q <= b, "{a} {q} {b}");
    }
}
