//! The GPU→host clock offset of one device, bounded by host facts.
//!
//! A calibration says `offset ∈ [c − e, c + e]`, but only for the instant it was taken and only
//! if the device's timestamps behave as the calibration assumed; under load and on real drivers
//! that assumption was seen to fail (decision 24). Every resolved record brings two facts that
//! hold whatever the calibration says: its GPU work cannot start before its call began
//! (`offset ≥ host_lower − gpu_start`), and cannot end after the host saw its timestamps
//! (`offset ≤ host_upper − gpu_end`). The tightest facts of the last second, aged by a drift
//! allowance, are intersected with the calibration's interval; a record is mapped with the
//! midpoint of the intersection, and its stated error is the distance to the far edge: a bound
//! by construction, as long as the facts are true. An empty intersection means the calibration
//! is wrong: the caller re-calibrates, and the record is mapped from the facts alone.

use super::calibration::ClockMap;
use super::device::DeviceState;
use crate::record::{GpuTiming, Interval, Record, TimingSource};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// How fast the GPU clock may drift from the host's, in parts per million: an old fact or
/// calibration is widened by this much per nanosecond of age (decision 24).
const DRIFT_PPM: i128 = 20;
/// The window of facts: `BUCKETS` buckets of `BUCKET_NS` each (about one second).
const BUCKETS: usize = 16;
const BUCKET_NS: u64 = 64_000_000;
const MILLION: i128 = 1_000_000;

/// The tightest facts that arrived within one bucket of host time. Facts are kept as keys that
/// make their ageing exact: a lower bound `l` taken at `t` is worth `l − ρ·(now − t)` at `now`,
/// so the bucket keeps the largest `l·10⁶ + DRIFT_PPM·t` (and the smallest `u·10⁶ − DRIFT_PPM·t`
/// for upper bounds), scaled by 10⁶ so that no rounding creeps in.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The bucket's index (`host instant / BUCKET_NS`); facts of other indices are stale.
    index: u64,
    lower_key: Option<i128>,
    upper_key: Option<i128>,
    /// The latest instant of a fact in the bucket: facts later than the instant they are
    /// evaluated at age the other way, which the keys widen for.
    latest_ns: u64,
}

/// Facts, calibration checks and placements of one device.
#[derive(Debug, Default)]
pub(crate) struct Bounds {
    buckets: [Bucket; BUCKETS],
    /// Records placed.
    pub placed: u64,
    /// Placements whose facts contradicted the calibration (mapped from the facts alone).
    pub contradicted: u64,
    /// Times the facts contradicted one another (drift past the allowance, a clock jump): the
    /// window was restarted.
    pub restarts: u64,
    /// The width of the last placement's interval, and the widest seen, in ns.
    pub last_width_ns: u64,
    pub widest_ns: u64,
}

/// Where one record goes on the host clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    /// `host = gpu + offset_ns` for this record's timestamps.
    pub offset_ns: i128,
    /// Bound on the error of any of the record's mapped instants.
    pub error_ns: u64,
    /// The calibration disagreed with the facts: it should be taken again.
    pub calibration_contradicted: bool,
}

/// An interval of offsets, `lo ≤ hi` when not empty.
#[derive(Debug, Clone, Copy)]
struct Span {
    lo: i128,
    hi: i128,
}

impl Span {
    fn intersect(self, other: Span) -> Option<Span> {
        let s = Span { lo: self.lo.max(other.lo), hi: self.hi.min(other.hi) };
        (s.lo <= s.hi).then_some(s)
    }
}

/// The drift allowance for `age_ns` of host time, rounded up.
fn drift(age_ns: u64) -> i128 {
    (i128::from(age_ns) * DRIFT_PPM).div_euclid(1_000_000) + 1
}

/// The rounding of a GPU instant that reached us as f64 seconds (wgpu-profiler's results): on
/// a Unix-epoch GPU clock (NVIDIA) about a quarter of a microsecond.
pub(crate) fn rounding_ns(seconds: f64) -> i128 {
    (seconds.abs() * f64::EPSILON * 1e9).ceil() as i128 + 1
}

/// The GPU timing of `record`, whose timestamps wgpu-profiler gave as `range` (seconds on the
/// GPU clock) and which the host first saw at `observed_ns`: placed with the device's facts
/// and `calibration`. Flags the calibration for renewal when the facts contradict it.
pub(super) fn place(
    device: &DeviceState,
    range: &Range<f64>,
    record: &Record,
    observed_ns: u64,
    calibration: ClockMap,
) -> GpuTiming {
    let gpu = ((range.start * 1e9).round() as i128, (range.end * 1e9).round() as i128);
    let rounding = rounding_ns(range.start).max(rounding_ns(range.end));
    let mut timing = place_ns(device, gpu, rounding, record, observed_ns, calibration);
    timing.busy_ns = ((range.end - range.start) * 1e9).round().max(0.0) as u64;
    timing
}

/// [`place`] for GPU instants already in nanoseconds, each off by up to `rounding` ns; the busy
/// time is the interval's.
pub(super) fn place_ns(
    device: &DeviceState,
    gpu: (i128, i128),
    rounding: i128,
    record: &Record,
    observed_ns: u64,
    calibration: ClockMap,
) -> GpuTiming {
    let observed = if observed_ns == 0 { crate::clock::now_ns() } else { observed_ns };
    let placement = device.bounds.lock().map_or_else(
        // A poisoned lock (a panic elsewhere): the calibration alone, as before facts existed.
        |_| Placement {
            offset_ns: calibration.offset_ns,
            error_ns: calibration.error_ns,
            calibration_contradicted: false,
        },
        |mut b| b.place(gpu, rounding, record.host.start_ns, observed, calibration),
    );
    if placement.calibration_contradicted {
        device.clock_contradicted.store(true, Ordering::Relaxed);
    }
    let to_host = |g: i128| u64::try_from(g + placement.offset_ns).unwrap_or(0);
    let start = to_host(gpu.0);
    let mut timing =
        GpuTiming::new(Interval { start_ns: start, end_ns: to_host(gpu.1).max(start) }, TimingSource::GpuTimestamp);
    timing.clock_error_ns = placement.error_ns;
    timing
}

impl Bounds {
    /// Places one record whose GPU work ran over `gpu_ns` (raw GPU nanoseconds, each rounded by
    /// up to `rounding` ns), issued no earlier than `host_lower` and seen finished at
    /// `host_upper` (host nanoseconds), given the device's calibration.
    pub(crate) fn place(
        &mut self,
        gpu_ns: (i128, i128),
        rounding: i128,
        host_lower: u64,
        host_upper: u64,
        calibration: ClockMap,
    ) -> Placement {
        let (gpu_start, gpu_end) = gpu_ns;
        let host_upper = host_upper.max(host_lower);
        // The record's own facts, widened by the rounding of its GPU instants and by the drift
        // possible while it ran (its work lies somewhere in [host_lower, host_upper]).
        let spread = drift(host_upper - host_lower);
        let own = Span {
            lo: i128::from(host_lower) - gpu_start - rounding - spread,
            hi: i128::from(host_upper) - gpu_end + rounding + spread,
        };
        self.add(host_lower, Some(own.lo + spread), None);
        self.add(host_upper, None, Some(own.hi - spread));
        // Evaluated at `host_upper`: later than every instant of the record's work.
        let facts = match self.facts(host_upper).intersect(own) {
            Some(f) => f,
            None => {
                // Older facts contradict this record's: the clocks moved more than the
                // allowance says. Start the window again from this record.
                self.restarts += 1;
                self.buckets = Default::default();
                self.add(host_lower, Some(own.lo + spread), None);
                self.add(host_upper, None, Some(own.hi - spread));
                own
            }
        };
        let age = host_upper.abs_diff(calibration.taken_at_ns);
        let widen = i128::from(calibration.error_ns) + drift(age) + rounding;
        let calibrated = Span { lo: calibration.offset_ns - widen, hi: calibration.offset_ns + widen };
        let (span, contradicted) = match facts.intersect(calibrated) {
            Some(s) => (s, false),
            None => (facts, true),
        };
        // An own fact can be empty on its own (a GPU interval longer than the host's window of
        // it): then only the calibration is left to trust.
        let span = if own.lo > own.hi { calibrated } else { span };
        // The midpoint, but never placing the work before its own call: the record's own fact,
        // unwidened, is a valid floor that the drift allowance would otherwise blur by a few ns.
        let floor = i128::from(host_lower) - gpu_start;
        let offset = (span.lo + (span.hi - span.lo) / 2).max(floor.min(span.hi));
        let error = (span.hi - offset).max(offset - span.lo) + rounding;
        let width = u64::try_from(span.hi - span.lo).unwrap_or(u64::MAX);
        self.placed += 1;
        self.contradicted += u64::from(contradicted);
        self.last_width_ns = width;
        self.widest_ns = self.widest_ns.max(width);
        Placement {
            offset_ns: offset,
            error_ns: u64::try_from(error).unwrap_or(u64::MAX),
            calibration_contradicted: contradicted,
        }
    }

    /// Keeps a fact taken at host instant `at_ns` if it is the tightest of its bucket.
    fn add(&mut self, at_ns: u64, lower: Option<i128>, upper: Option<i128>) {
        let index = at_ns / BUCKET_NS;
        let b = &mut self.buckets[(index % BUCKETS as u64) as usize];
        if b.index != index || (b.lower_key.is_none() && b.upper_key.is_none()) {
            *b = Bucket { index, lower_key: None, upper_key: None, latest_ns: at_ns };
        }
        let t = i128::from(at_ns) * DRIFT_PPM;
        if let Some(l) = lower {
            let k = l * MILLION + t;
            b.lower_key = Some(b.lower_key.map_or(k, |x| x.max(k)));
        }
        if let Some(u) = upper {
            let k = u * MILLION - t;
            b.upper_key = Some(b.upper_key.map_or(k, |x| x.min(k)));
        }
        b.latest_ns = b.latest_ns.max(at_ns);
    }

    /// The offsets every fact of the window allows at host instant `at_ns`, each fact widened by
    /// the drift possible between the instant it was taken and `at_ns`.
    fn facts(&self, at_ns: u64) -> Span {
        let now = at_ns / BUCKET_NS;
        let mut span = Span { lo: i128::MIN / 4, hi: i128::MAX / 4 };
        let t = i128::from(at_ns) * DRIFT_PPM;
        for b in &self.buckets {
            if b.index + BUCKETS as u64 <= now || b.index > now + 1 {
                continue; // stale, or from a clock that jumped
            }
            // A fact later than `at_ns` by d is over-credited by 2ρd through its key.
            let ahead = 2 * i128::from(b.latest_ns.saturating_sub(at_ns)) * DRIFT_PPM;
            if let Some(k) = b.lower_key {
                span.lo = span.lo.max((k - t - ahead).div_euclid(MILLION));
            }
            if let Some(k) = b.upper_key {
                span.hi = span.hi.min(-(-(k + t + ahead)).div_euclid(MILLION));
            }
        }
        span
    }

    /// "NVIDIA H100 (Vulkan): 1204 records placed, offset known to ±4.1 µs (widest ±37.5 µs), 3
    /// contradicted the calibration".
    pub(crate) fn line(&self, device: &str) -> String {
        let half = |w: u64| crate::export::format::duration(w.div_ceil(2));
        let mut line = format!(
            "GPU clock of {device}: {} records placed from host facts and calibration, offset known to ±{} (widest ±{})",
            self.placed,
            half(self.last_width_ns),
            half(self.widest_ns)
        );
        if self.contradicted > 0 {
            line.push_str(&format!(", {} contradicted the calibration and were placed from facts", self.contradicted));
        }
        if self.restarts > 0 {
            line.push_str(&format!(", facts restarted {} times (drift past {DRIFT_PPM} ppm)", self.restarts));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(offset_ns: i128, error_ns: u64, taken_at_ns: u64) -> ClockMap {
        ClockMap { offset_ns, error_ns, taken_at_ns }
    }

    const T: u64 = 1_000_000_000_000;

    #[test]
    fn a_true_calibration_is_narrowed_by_facts_and_the_bound_holds() {
        let mut b = Bounds::default();
        // True offset 1000: GPU instant g happens at host g + 1000.
        let truth = 1000i128;
        let cal = calibration(truth + 30, 50, T);
        // Work from host T+100 to T+300; launched at T+50, seen done at T+320.
        let g = (i128::from(T) + 100 - truth, i128::from(T) + 300 - truth);
        let p = b.place(g, 1, T + 50, T + 320, cal);
        assert!(!p.calibration_contradicted);
        assert!((p.offset_ns - truth).abs() <= i128::from(p.error_ns), "{p:?}");
        assert!(p.error_ns <= 50 + 2 + 1, "never wider than the calibration: {p:?}");
        // A tight fact from below: launched 1 ns before the work began.
        let g2 = (i128::from(T) + 1_100 - truth, i128::from(T) + 1_200 - truth);
        let p2 = b.place(g2, 1, T + 1_099, T + 5_000, cal);
        assert!((p2.offset_ns - truth).abs() <= i128::from(p2.error_ns), "{p2:?}");
        assert!(p2.error_ns < p.error_ns, "a tighter fact narrows the bound: {p:?} {p2:?}");
        assert!(g2.0 + p2.offset_ns + i128::from(p2.error_ns) >= i128::from(T) + 1_099);
    }

    #[test]
    fn a_biased_calibration_is_caught_and_records_are_placed_from_facts() {
        let mut b = Bounds::default();
        let truth = -5_000i128;
        // Says 200 ns later than the truth, ±75: wrong.
        let cal = calibration(truth + 200, 75, T);
        let g = (i128::from(T) + 100 - truth, i128::from(T) + 300 - truth);
        let p = b.place(g, 1, T + 90, T + 310, cal);
        assert!(p.calibration_contradicted, "{p:?}");
        assert!((p.offset_ns - truth).abs() <= i128::from(p.error_ns), "{p:?}");
        // The start is never placed before the call's start minus the stated error.
        assert!(g.0 + p.offset_ns + i128::from(p.error_ns) >= i128::from(T) + 90);
        assert_eq!(b.contradicted, 1);
        assert!(b.line("dev").contains("1 contradicted the calibration"), "{}", b.line("dev"));
    }

    #[test]
    fn old_facts_age_and_contradicting_ones_restart_the_window() {
        let mut b = Bounds::default();
        let cal = |at| calibration(0, 1_000_000, at);
        // A tight pair of facts at T: offset in [0, 10].
        b.place((i128::from(T), i128::from(T) + 10), 1, T, T + 20, cal(T));
        // Half a second later the widened old facts still hold the offset near 0 ± drift.
        let later = T + 500_000_000;
        let p = b.place(
            (i128::from(later) - 5_000, i128::from(later) - 4_000),
            1,
            later - 5_000,
            later + 1_000_000,
            cal(later),
        );
        assert!(p.error_ns < 20_000, "old facts, aged by 20 ppm, still bound it: {p:?}");
        // The clock jumps by 1 ms: the old facts contradict the new one, the window restarts.
        let jump = T + 600_000_000;
        let g = (i128::from(jump) - 1_000_000, i128::from(jump) - 1_000_000 + 10);
        let p = b.place(g, 1, jump, jump + 20, calibration(1_000_000, 10, jump));
        assert_eq!(b.restarts, 1);
        assert!((p.offset_ns - 1_000_000).abs() <= i128::from(p.error_ns), "{p:?}");
    }
}
