//! A resolved CUPTI record placed on the host clock from its facts (decision 38).
//!
//! CUPTI gives kernels, copies and sets on its own clock: GPU timestamps it normalised to its
//! CPU clock itself. The offset to gpuspan's host clock is therefore unknown twice over: CUPTI's
//! CPU clock against ours (measured each second with `cuptiGetTimestamp`, `clock.rs`: the
//! calibration) and whatever CUPTI's normalisation gets wrong, which no CPU measurement sees (a
//! kernel was once placed 35 µs before its scope with a stated 49 ns). Each piece of work brings
//! facts about that offset: it cannot start before its call's scope began nor before the API
//! call that enqueued it began (CUPTI's CPU clock, mapped as early as the calibration allows),
//! and it cannot end after the host was handed the buffer holding its record, nor, for a copy
//! that CUDA completes before its call returns (`RawMemcpy::ends_before_return`), after that
//! call's end: the fact that keeps a synchronous read-back's bound near the call even when the
//! calibration is contradicted (issue 28). The shared
//! placement (`crate::placement`) keeps them per device and places every record inside them.

use crate::placement::{drift, Bounds, ClockMap, Facts};
use crate::record::{Activity, Interval};
use std::collections::HashMap;

/// A piece of work as CUPTI timed it (its interval still on CUPTI's clock), with the host
/// instant the buffer holding its record was handed over (0 if unknown): it ended before.
#[derive(Debug, Clone)]
pub(crate) struct Piece {
    pub activity: Activity,
    pub delivered_ns: u64,
    /// A copy that had completed when the API call that made it returned.
    pub ends_by_return: bool,
}

/// The facts and placements of every device, and the calibration.
#[derive(Debug, Default)]
pub(crate) struct Placer {
    /// `host = cupti + offset`: CUPTI's CPU clock against gpuspan's. `None` in replays of a
    /// dump, whose CUPTI clock is taken as the host's.
    clock: Option<ClockMap>,
    devices: HashMap<u32, Bounds>,
    /// A placement's facts contradicted the calibration since [`Placer::take_contradicted`].
    contradicted: bool,
}

impl Placer {
    pub(crate) fn set_clock(&mut self, clock: ClockMap) {
        self.clock = Some(clock);
    }

    /// Whether the calibration was contradicted since the last call (then it is taken again).
    pub(crate) fn take_contradicted(&mut self) -> bool {
        std::mem::take(&mut self.contradicted)
    }

    fn calibration(&self, at_ns: u64) -> ClockMap {
        self.clock.unwrap_or(ClockMap { offset_ns: 0, error_ns: 0, taken_at_ns: at_ns })
    }

    /// A CUPTI CPU-clock instant on the host clock, by the calibration's middle.
    pub(crate) fn host_ns(&self, cupti_ns: u64) -> u64 {
        let c = self.calibration(cupti_ns);
        u64::try_from(i128::from(cupti_ns) + c.offset_ns).unwrap_or(0)
    }

    /// A CUPTI CPU-clock instant on the host clock, as early as the calibration allows: a lower
    /// bound however the mapping errs within its stated error and drift.
    fn earliest_host_ns(&self, cupti_ns: u64) -> u64 {
        let (mid, widen) = self.mapped(cupti_ns);
        u64::try_from(mid - widen).unwrap_or(0)
    }

    /// The same instant as late as the calibration allows: an upper bound.
    fn latest_host_ns(&self, cupti_ns: u64) -> u64 {
        let (mid, widen) = self.mapped(cupti_ns);
        u64::try_from(mid + widen).unwrap_or(0)
    }

    /// A CUPTI CPU-clock instant mapped by the calibration's middle, and how far either way the
    /// truth may lie (its error and the drift since it was taken).
    fn mapped(&self, cupti_ns: u64) -> (i128, i128) {
        let c = self.calibration(cupti_ns);
        let mid = i128::from(cupti_ns) + c.offset_ns;
        let age = u64::try_from(mid).unwrap_or(0).abs_diff(c.taken_at_ns);
        (mid, i128::from(c.error_ns) + drift(age))
    }

    /// Places one record's pieces, mapping them onto the host clock; returns them with the
    /// stated error. `call_start_ns` is the host start of the scope that owns them (`None` for
    /// work outside every scope), `launch_of` the CUPTI-clock interval of the API call that
    /// enqueued a piece, by correlation id.
    pub(crate) fn place(
        &mut self,
        call_start_ns: Option<u64>,
        launch_of: impl Fn(u32) -> Option<Interval>,
        pieces: Vec<(u32, Piece)>,
    ) -> (Vec<Activity>, u64) {
        if pieces.is_empty() {
            // A call that launched nothing: host-timed, nothing to place (it used to be counted
            // as placed on a device numbered u32::MAX in the trust report).
            return (Vec::new(), 0);
        }
        let mut facts = Facts::default();
        for (c, p) in &pieces {
            let gpu = (i128::from(p.activity.interval.start_ns), i128::from(p.activity.interval.end_ns));
            let api = launch_of(*c);
            let launch = api.map(|i| self.earliest_host_ns(i.start_ns));
            let lower = call_start_ns.max(launch).filter(|l| *l > 0);
            let delivered = (p.delivered_ns > 0).then_some(p.delivered_ns);
            let returned = api.filter(|_| p.ends_by_return).map(|i| self.latest_host_ns(i.end_ns));
            let upper = match (delivered, returned) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            facts = facts.and(Facts {
                lower: lower.map(|l| (i128::from(l) - gpu.0, l)),
                upper: upper.map(|u| (i128::from(u) - gpu.1, u)),
            });
        }
        let at = facts.upper.or(facts.lower).map_or(0, |(_, t)| t);
        let calibration = self.calibration(at);
        let device = pieces.first().and_then(|(_, p)| p.activity.device.as_ref()).map_or(u32::MAX, |d| d.id);
        let placement = self.devices.entry(device).or_default().place(facts, 0, calibration);
        self.contradicted |= placement.calibration_contradicted;
        let map = |t: u64| u64::try_from(i128::from(t) + placement.offset_ns).unwrap_or(0);
        let activities = pieces
            .into_iter()
            .map(|(_, p)| {
                let mut a = p.activity;
                a.interval = Interval { start_ns: map(a.interval.start_ns), end_ns: map(a.interval.end_ns) };
                a
            })
            .collect();
        (activities, placement.error_ns)
    }

    /// The trust report's lines: per device, how well the offset is known.
    pub(crate) fn lines(&self, name: impl Fn(u32) -> String) -> Vec<String> {
        let mut ids: Vec<_> = self.devices.iter().filter(|(_, b)| b.placed > 0).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.into_iter().map(|id| self.devices[&id].line(id, &format!("{} (CUPTI)", name(id)))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ActivityKind, DeviceLabel, KernelGeometry};

    fn kernel(start: u64, end: u64) -> Piece {
        Piece {
            activity: Activity {
                name: "k".into(),
                interval: Interval { start_ns: start, end_ns: end },
                kind: ActivityKind::Kernel(KernelGeometry::default()),
                stream: Some(1),
                device: Some(DeviceLabel::new(0, "GPU")),
                src_device: None,
                dst_device: None,
            },
            delivered_ns: end + 2_000_000,
            ends_by_return: false,
        }
    }

    fn api(start: u64, end: u64) -> Option<Interval> {
        Some(Interval { start_ns: start, end_ns: end })
    }

    const T: u64 = 1_700_000_000_000_000_000;

    /// CUPTI's clock reads 700 ns ahead of ours (the calibration knows it to ±25 ns), and its
    /// kernel times are right: records are placed at the calibration, with its error.
    #[test]
    fn a_true_calibration_places_records_with_its_error() {
        let mut p = Placer::default();
        p.set_clock(ClockMap { offset_ns: -700, error_ns: 25, taken_at_ns: T });
        // Call at host T+1000 (CUPTI T+1700), kernel 8 µs later on CUPTI's clock.
        let (a, err) = p.place(Some(T + 900), |_| api(T + 1_700, T + 2_000), vec![(1, kernel(T + 9_700, T + 19_700))]);
        assert_eq!(a[0].interval, Interval { start_ns: T + 9_000, end_ns: T + 19_000 });
        assert!(err <= 25 + 50, "the calibration's error and its drift since: {err}");
        assert!(!p.take_contradicted());
    }

    /// CUPTI's normalisation puts kernels 35 µs early, which the CPU calibration cannot see:
    /// the launch facts contradict it, the calibration is flagged, and the record is placed no
    /// earlier than its launch, with an error that covers where the truth lies.
    #[test]
    fn kernels_normalised_before_their_launch_are_placed_after_it_within_their_error() {
        let mut p = Placer::default();
        p.set_clock(ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: T });
        let truth = 35_000i128; // host = cupti + 35 µs for kernel times
        for i in 0..20u64 {
            let launch = T + i * 1_000_000; // CUPTI CPU clock = host clock here
            let kernel_host = launch + 6_000; // 6 µs launch latency
            let k = kernel((kernel_host as i128 - truth) as u64, (kernel_host as i128 - truth) as u64 + 10_000);
            let (a, err) = p.place(Some(launch - 500), |_| api(launch, launch + 4_000), vec![(7, k)]);
            assert!(a[0].interval.start_ns >= launch - 500, "not before its call: {:?} {launch}", a[0].interval);
            assert!(a[0].interval.start_ns.abs_diff(kernel_host) <= err, "{:?} {kernel_host} ±{err}", a[0].interval);
        }
        assert!(p.take_contradicted());
        assert!(!p.take_contradicted(), "taken once");
        let lines = p.lines(|_| "H200".into());
        assert!(lines[0].starts_with("GPU clock of GPU 0: H200 (CUPTI): 20 records placed"), "{lines:?}");
        assert!(lines[0].contains("20 contradicted the calibration"), "{lines:?}");
    }

    /// Issue 28's first calls: CUPTI's normalisation puts a synchronous read-back 35 µs early,
    /// the launch fact contradicts the calibration, and the buffer comes 2 ms later. The copy
    /// ended before its call returned: that bounds it from above, so the stated error stays
    /// within the call (it was the whole way to the delivery, milliseconds, without it).
    #[test]
    fn a_synchronous_read_back_is_bounded_by_its_calls_return() {
        let truth = 35_000i128;
        let run = |ends_by_return: bool| {
            let mut p = Placer::default();
            p.set_clock(ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: T });
            let call = T + 1_000_000; // the API call: 20 µs, the copy from 5 to 15 µs into it
            let copy = (call + 5_000, call + 15_000);
            let mut piece = kernel((copy.0 as i128 - truth) as u64, (copy.1 as i128 - truth) as u64);
            piece.ends_by_return = ends_by_return;
            let (a, err) = p.place(None, |_| api(call, call + 20_000), vec![(3, piece)]);
            assert!(a[0].interval.start_ns.abs_diff(copy.0) <= err, "{:?} {copy:?} ±{err}", a[0].interval);
            assert!(a[0].interval.start_ns + err >= call && a[0].interval.end_ns <= call + 20_000 + err);
            err
        };
        let loose = run(false);
        let bounded = run(true);
        assert!(loose > 1_000_000, "without the return fact the bound reaches the delivery: {loose}");
        assert!(bounded <= 20_000, "within the call: {bounded}");
    }

    /// Work outside every scope, whose API record never came: the buffer's delivery still
    /// bounds it, and the window's facts place it.
    #[test]
    fn work_without_a_call_is_placed_by_the_window_and_its_delivery() {
        let mut p = Placer::default();
        // A calibration that says little (±10 ms): the facts do the placing.
        p.set_clock(ClockMap { offset_ns: 0, error_ns: 10_000_000, taken_at_ns: T });
        p.place(Some(T), |_| api(T + 100, T + 200), vec![(1, kernel(T + 5_000, T + 6_000))]);
        let (a, err) = p.place(None, |_| None, vec![(2, kernel(T + 50_000, T + 51_000))]);
        assert!(a[0].interval.start_ns.abs_diff(T + 50_000) <= err, "{:?} ±{err}", a[0].interval);
        assert!(err < 1_100_000, "the first record's launch still bounds the offset from below: {err}");
    }
}
