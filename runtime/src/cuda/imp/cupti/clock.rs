//! CUPTI's clock against gpuspan's host clock: both count Unix-epoch nanoseconds, from different
//! sources, so the offset between them is measured: the calibration that the facts of every
//! record are intersected with (`attribution/facts.rs`).

use crate::placement::ClockMap;
use cudarc::cupti::sys::{self as sys, CUptiResult};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

/// The calibration (in `Cupti`).
pub(super) struct ClockState {
    /// CUPTI's CPU clock minus gpuspan's host clock, the bound on that measurement, and when
    /// it was taken (host clock).
    offset: AtomicI64,
    error: AtomicU64,
    taken: AtomicU64,
    /// The trust report's CUPTI lines join the summary at the first measurement.
    lines: Once,
    /// Every calibration as a point (CUPTI's clock, CUPTI minus host), oldest first: the
    /// function through which CUDA windows' ends reach the host clock ([`window_to_host`]).
    points: Mutex<Vec<(u64, i64)>>,
}

impl ClockState {
    pub(super) const fn new() -> ClockState {
        ClockState {
            offset: AtomicI64::new(0),
            error: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            lines: Once::new(),
            points: Mutex::new(Vec::new()),
        }
    }
}

#[inline(always)]
fn state() -> &'static ClockState {
    &super::state().clock
}

/// Points kept: past this many (only while a window stays open for thousands of calibrations),
/// the older half is thinned to every other point, so that the scope still finds points around
/// its start and memory stays at 64 KiB.
const POINTS_KEPT: usize = 4096;

/// Compares CUPTI's clock (which its records use) with gpuspan's host clock: both count
/// Unix-epoch nanoseconds, but from different clocks that drift apart (wall clock versus
/// monotonic), so the offset is measured at start and every second after.
pub(super) fn measure() {
    state().lines.call_once(|| crate::hooks::leaves().sections.add(lines));
    let mut best: Option<(u64, i64, u64, u64)> = None;
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
            best = Some((width, offset, h1, c));
        }
    }
    if let Some((width, offset, taken, cupti_ns)) = best {
        add_point(cupti_ns, offset);
        state().offset.store(offset, Ordering::Relaxed);
        state().error.store(width.div_ceil(2), Ordering::Relaxed);
        state().taken.store(taken, Ordering::Relaxed);
    }
}

/// How old the calibration may be when records are placed with it: it is widened by 20 ppm of
/// its age (`crate::placement`), so a second-old one would cost 20 µs; a measurement costs
/// ~0.3 µs of the resolver's time.
const FRESH_NS: u64 = 10_000_000;

/// The calibration as the placement takes it (`host = cupti + offset_ns`), measured again
/// first when `again` (a record's facts contradicted the last one) or when it is not fresh.
pub(super) fn mapping(again: bool) -> ClockMap {
    if again || crate::clock::now_ns().saturating_sub(state().taken.load(Ordering::Relaxed)) > FRESH_NS {
        measure();
    }
    let (offset, error) = offset();
    ClockMap { offset_ns: -i128::from(offset), error_ns: error, taken_at_ns: state().taken.load(Ordering::Relaxed) }
}

/// The trust report's per-device lines for CUPTI.
fn lines(_: &[crate::export::summary::row::SiteSummary]) -> Vec<String> {
    super::state().live.get().and_then(|l| l.lock().ok()).map(|l| l.resolver.clock_lines()).unwrap_or_default()
}

/// The last measured CUPTI-minus-host clock offset and its error bound, in ns.
pub(crate) fn offset() -> (i64, u64) {
    (state().offset.load(Ordering::Relaxed), state().error.load(Ordering::Relaxed))
}

fn points() -> MutexGuard<'static, Vec<(u64, i64)>> {
    state().points.lock().unwrap_or_else(|e| e.into_inner())
}

fn add_point(cupti_ns: u64, offset: i64) {
    let mut points = points();
    if points.last().is_some_and(|&(c, _)| c >= cupti_ns) {
        return; // the function's points stay in increasing order
    }
    points.push((cupti_ns, offset));
    if points.len() > POINTS_KEPT {
        let older = points.len() / 2;
        let mut i = 0;
        points.retain(|_| {
            i += 1;
            i > older || i % 2 == 1
        });
    }
}

/// No window that starts before `t` (CUPTI's clock) is left to map: the points before the last
/// one at or before it are dropped, which changes nothing at or after `t`.
pub(super) fn forget_points_before(t: u64) {
    let mut points = points();
    let keep_from = points.partition_point(|&(c, _)| c <= t).saturating_sub(1);
    points.drain(..keep_from);
}

/// A CUDA window's end (CUPTI's clock) on the host clock, the offset interpolated between the
/// calibrations around it: one increasing function of the time, the same whenever it is applied
/// (points are only added after it), so windows nested on CUPTI's clock stay nested on the
/// host's however long the outer one ran while the clocks drifted apart. A time past the last
/// calibration takes a new one first (decision 46).
pub(super) fn window_to_host(t: u64) -> u64 {
    if points().last().is_none_or(|&(c, _)| c < t) {
        measure();
    }
    let points = points();
    let offset = match points.partition_point(|&(c, _)| c <= t) {
        0 => points.first().map_or(0, |&(_, o)| i128::from(o)),
        i if i == points.len() => i128::from(points[i - 1].1),
        i => {
            let ((c0, o0), (c1, o1)) = (points[i - 1], points[i]);
            let (o0, o1) = (i128::from(o0), i128::from(o1));
            o0 + (o1 - o0) * i128::from(t - c0) / i128::from(c1 - c0)
        }
    };
    u64::try_from(i128::from(t) - offset).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{add_point, forget_points_before, points, window_to_host, POINTS_KEPT};

    #[test]
    fn windows_map_through_one_increasing_function_that_later_points_do_not_change() {
        points().clear();
        // The clocks drift apart by 1 µs between two calibrations 10 ms apart.
        add_point(1_000_000_000, 5_000);
        add_point(1_010_000_000, 6_000);
        assert_eq!(window_to_host(1_000_000_000), 1_000_000_000 - 5_000);
        assert_eq!(window_to_host(1_005_000_000), 1_005_000_000 - 5_500, "halfway, half the drift");
        let before: Vec<u64> = (0..1_000).map(|i| window_to_host(1_000_000_000 + i * 9_999)).collect();
        assert!(before.windows(2).all(|w| w[0] < w[1]), "increasing");
        add_point(1_020_000_000, 9_000);
        let after: Vec<u64> = (0..1_000).map(|i| window_to_host(1_000_000_000 + i * 9_999)).collect();
        assert_eq!(before, after, "a later point changes nothing before it");
        let later = || (0..1_000).map(|i| window_to_host(1_012_000_000 + i * 7_777)).collect::<Vec<u64>>();
        let kept = later();
        forget_points_before(1_012_000_000);
        assert_eq!(points().len(), 2, "the first point goes; the one before the time stays");
        assert_eq!(later(), kept, "times after it map as before");
        // Thinned past its limit: the newest half of the points stays whole.
        for i in 0..POINTS_KEPT as u64 {
            add_point(1_030_000_000 + i * 10_000_000, 9_000);
        }
        assert!(points().len() <= POINTS_KEPT);
        points().clear();
    }
}
