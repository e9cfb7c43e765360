//! CUPTI's clock against gpuspan's host clock: both count Unix-epoch nanoseconds, from different
//! sources, so the offset between them is measured: the calibration that the facts of every
//! record are intersected with (`attribution/facts.rs`).

use crate::placement::ClockMap;
use cudarc::cupti::sys::{self as sys, CUptiResult};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Once;

/// CUPTI's CPU clock minus gpuspan's host clock, the bound on that measurement, and when it
/// was taken (host clock).
static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
static CLOCK_ERROR: AtomicU64 = AtomicU64::new(0);
static CLOCK_TAKEN: AtomicU64 = AtomicU64::new(0);
/// The trust report's CUPTI lines join the summary at the first measurement.
static LINES: Once = Once::new();

/// Compares CUPTI's clock (which its records use) with gpuspan's host clock: both count
/// Unix-epoch nanoseconds, but from different clocks that drift apart (wall clock versus
/// monotonic), so the offset is measured at start and every second after.
pub(super) fn measure() {
    LINES.call_once(|| crate::hooks::add_summary_section(lines));
    let mut best: Option<(u64, i64, u64)> = None;
    for _ in 0..5 {
        let mut c = 0u64;
        let h0 = crate::clock::now_ns();
        // SAFETY: plain out-parameter.
        let ok = unsafe { sys::cuptiGetTimestamp(&mut c) } == CUptiResult::CUPTI_SUCCESS;
        let h1 = crate::clock::now_ns();
        if !ok {
            return;
        }
        let width = h1 - h0;
        let offset = c as i64 - (h0 + width / 2) as i64;
        if best.is_none_or(|(w, ..)| width < w) {
            best = Some((width, offset, h1));
        }
    }
    if let Some((width, offset, taken)) = best {
        CLOCK_OFFSET.store(offset, Ordering::Relaxed);
        CLOCK_ERROR.store(width.div_ceil(2), Ordering::Relaxed);
        CLOCK_TAKEN.store(taken, Ordering::Relaxed);
    }
}

/// How old the calibration may be when records are placed with it: it is widened by 20 ppm of
/// its age (`crate::placement`), so a second-old one would cost 20 µs; a measurement costs
/// ~0.3 µs of the resolver's time.
const FRESH_NS: u64 = 10_000_000;

/// The calibration as the placement takes it (`host = cupti + offset_ns`), measured again
/// first when `again` (a record's facts contradicted the last one) or when it is not fresh.
pub(super) fn mapping(again: bool) -> ClockMap {
    if again || crate::clock::now_ns().saturating_sub(CLOCK_TAKEN.load(Ordering::Relaxed)) > FRESH_NS {
        measure();
    }
    let (offset, error) = offset();
    ClockMap { offset_ns: -i128::from(offset), error_ns: error, taken_at_ns: CLOCK_TAKEN.load(Ordering::Relaxed) }
}

/// The trust report's per-device lines for CUPTI.
fn lines(_: &[crate::export::summary::SiteSummary]) -> Vec<String> {
    super::LIVE.get().and_then(|l| l.lock().ok()).map(|l| l.resolver.clock_lines()).unwrap_or_default()
}

/// The last measured CUPTI-minus-host clock offset and its error bound, in ns.
pub(crate) fn offset() -> (i64, u64) {
    (CLOCK_OFFSET.load(Ordering::Relaxed), CLOCK_ERROR.load(Ordering::Relaxed))
}
