//! A resolved CUPTI record placed on the host clock from its facts (decisions 38, 56).
//!
//! CUPTI gives kernels, copies and sets on its own clock: GPU timestamps it normalised to its
//! CPU clock itself. The offset to gpuspan's host clock is therefore unknown twice over: CUPTI's
//! CPU clock against ours (measured with `cuptiGetTimestamp`, `clock.rs`, and interpolated
//! between measurements, `calibrations.rs`) and whatever CUPTI's normalisation gets wrong, which
//! no CPU measurement sees (a kernel was once placed 35 µs before its scope with a stated
//! 49 ns). The second is weighed on CUPTI's CPU clock, where its API and synchronization records
//! are exact. Each piece of work brings facts: it cannot start before the API call that enqueued
//! it began, nor before its call's scope began (the host clock, brought over as early as the
//! calibrations allow); it cannot end after a synchronize on its stream or context, begun after
//! it was enqueued, returned (`syncs.rs`), nor, for a copy that CUDA completes before its call
//! returns (`RawMemcpy::ends_before_return`), after that call's end (issue 28), nor after the
//! host was handed the buffer holding its record. The shared placement (`crate::placement`)
//! keeps them per device and places every record inside them; the summary counts the records
//! each fact moved away from CUPTI's own times.

use super::calibrations::{Calibrations, On};
use super::syncs::Syncs;
use crate::cuda::cupti::records::Synchronized;
use crate::placement::{Bounds, ClockMap, Facts};
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
    /// CUPTI's context and stream ids of the queue it ran on.
    pub queue: (u32, u32),
}

/// A host fact that bounds a piece of work: the summary says how many records each moved
/// away from where CUPTI's own timestamps put them, and by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fact {
    /// It cannot start before its call's scope began.
    ScopeStart,
    /// It cannot start before the API call that enqueued it began.
    Launch,
    /// It cannot end after a synchronizing call on its stream or context, begun after it was
    /// enqueued, returned.
    Synchronize,
    /// A copy CUDA completes before its call returns cannot end after that.
    Return,
    /// It cannot end after the host was handed the buffer holding its record.
    Delivery,
    /// Earlier records' facts (kept a second, aged by the drift allowance).
    EarlierRecords,
}

impl Fact {
    const ALL: [Fact; 6] =
        [Fact::ScopeStart, Fact::Launch, Fact::Synchronize, Fact::Return, Fact::Delivery, Fact::EarlierRecords];

    fn says(self) -> &'static str {
        match self {
            Fact::ScopeStart => "later by their scope's start",
            Fact::Launch => "later by the start of the call that enqueued them",
            Fact::Synchronize => "earlier by a synchronize that had returned",
            Fact::Return => "earlier by their copy call's return",
            Fact::Delivery => "earlier by their buffer's delivery",
            Fact::EarlierRecords => "by earlier records' facts",
        }
    }
}

/// Per [`Fact`], records it moved and the largest move, in ns.
#[derive(Debug, Default)]
struct Moves([(u64, u64); Fact::ALL.len()]);

impl Moves {
    fn add(&mut self, fact: Fact, by_ns: u64) {
        let m = &mut self.0[fact as usize];
        m.0 += 1;
        m.1 = m.1.max(by_ns);
    }

    /// "CUPTI's GPU times held to program order: 3 records moved later by the start of the call
    /// that enqueued them (up to 35.0 µs), 1 earlier by a synchronize that had returned (up to
    /// 4.2 µs)", or nothing when no fact moved a record.
    fn line(&self) -> Option<String> {
        let d = crate::export::format::duration;
        let parts: Vec<String> = Fact::ALL
            .iter()
            .filter(|f| self.0[**f as usize].0 > 0)
            .map(|f| {
                let (n, worst) = self.0[*f as usize];
                format!("{n} moved {} (up to {})", f.says(), d(worst))
            })
            .collect();
        (!parts.is_empty()).then(|| format!("CUPTI's GPU times held to host facts: records {}", parts.join(", ")))
    }
}

/// The facts and placements of every device, and the calibrations.
#[derive(Debug, Default)]
pub(crate) struct Placer {
    /// `host = cupti + offset`: CUPTI's CPU clock against gpuspan's, as a function of time.
    /// Empty in replays of a dump without calibrations, whose CUPTI clock is taken as the
    /// host's.
    clock: Calibrations,
    /// Per device, the facts about CUPTI's GPU timestamps against its own CPU clock.
    devices: HashMap<u32, Bounds>,
    /// A placement's facts contradicted the calibration since [`Placer::take_contradicted`].
    contradicted: bool,
    /// Synchronizing calls that returned: work they waited for had ended.
    syncs: Syncs,
    moves: Moves,
}

impl Placer {
    pub(crate) fn add_calibration(&mut self, clock: ClockMap) {
        self.clock.add(clock);
    }

    /// A call that waited for `what` over `call` (CUPTI's CPU clock) returned.
    pub(crate) fn synchronized(&mut self, what: Synchronized, call: Interval) {
        self.syncs.add(what, call);
    }

    /// Whether the calibration was contradicted since the last call (then it is taken again).
    pub(crate) fn take_contradicted(&mut self) -> bool {
        std::mem::take(&mut self.contradicted)
    }

    /// `host = cupti + offset` at instant `t` of clock `on`, and its error.
    fn offset(&self, t: u64, on: On) -> (i128, u64) {
        self.clock.offset(i128::from(t), on).unwrap_or((0, 0))
    }

    /// A CUPTI CPU-clock instant on the host clock.
    pub(crate) fn host_ns(&self, cupti_ns: u64) -> u64 {
        u64::try_from(i128::from(cupti_ns) + self.offset(cupti_ns, On::Cupti).0).unwrap_or(0)
    }

    /// A host instant on CUPTI's CPU clock, as early (`-1`) or as late (`+1`) as the
    /// calibrations allow.
    fn cupti_ns(&self, host_ns: u64, side: i128) -> u64 {
        let (offset, error) = self.offset(host_ns, On::Host);
        u64::try_from(i128::from(host_ns) - offset + side * i128::from(error)).unwrap_or(0)
    }

    /// Places one record's pieces, mapping them onto the host clock; returns them with the
    /// stated error. `call_start_ns` is the host start of the scope that owns them (`None` for
    /// work outside every scope), `launch_of` the CUPTI-clock interval of the API call that
    /// enqueued a piece, by correlation id.
    ///
    /// The facts are weighed on CUPTI's CPU clock, where its API records are exact: what is
    /// left to find is how far CUPTI's normalisation of its GPU timestamps errs, which drifts
    /// little. Host facts (the scope's start, the buffer's delivery) come over through the
    /// calibrations, widened by their error; the placed record goes back through them, at its
    /// own instant, with their error added.
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
        // The record's own tightest facts: each the offset it allows, the host instant it was
        // learnt at, and which fact it is.
        let mut lower: Option<(i128, u64, Fact)> = None;
        let mut upper: Option<(i128, u64, Fact)> = None;
        let call_start = call_start_ns.filter(|s| *s > 0).map(|s| self.cupti_ns(s, -1));
        for (c, p) in &pieces {
            let gpu = (i128::from(p.activity.interval.start_ns), i128::from(p.activity.interval.end_ns));
            let api = launch_of(*c);
            let (context, stream) = p.queue;
            let lowers = [(call_start, Fact::ScopeStart), (api.map(|i| i.start_ns), Fact::Launch)];
            let uppers = [
                ((p.delivered_ns > 0).then(|| self.cupti_ns(p.delivered_ns, 1)), Fact::Delivery),
                (api.filter(|_| p.ends_by_return).map(|i| i.end_ns), Fact::Return),
                (api.and_then(|i| self.syncs.ended_by(context, stream, i.end_ns)), Fact::Synchronize),
            ];
            for (at, fact) in lowers.into_iter().filter_map(|(t, f)| Some((t.filter(|t| *t > 0)?, f))) {
                let offset = i128::from(at) - gpu.0;
                if lower.is_none_or(|(l, ..)| offset > l) {
                    lower = Some((offset, at, fact));
                }
            }
            for (at, fact) in uppers.into_iter().filter_map(|(t, f)| Some((t?, f))) {
                let offset = i128::from(at) - gpu.1;
                if upper.is_none_or(|(u, ..)| offset < u) {
                    upper = Some((offset, at, fact));
                }
            }
        }
        let facts = Facts { lower: lower.map(|(l, at, _)| (l, at)), upper: upper.map(|(u, at, _)| (u, at)) };
        let first = pieces.iter().map(|(_, p)| p.activity.interval.start_ns).min().unwrap_or(0);
        let at = facts.upper.or(facts.lower).map_or(first, |(_, t)| t);
        // CUPTI's own claim: its GPU timestamps are on its CPU clock.
        let claim = ClockMap { offset_ns: 0, error_ns: 0, taken_at_ns: at };
        let device = pieces.first().and_then(|(_, p)| p.activity.device.as_ref()).map_or(u32::MAX, |d| d.id);
        let bounds = self.devices.entry(device).or_default();
        let placement = bounds.place(facts, 0, claim);
        self.contradicted |= placement.calibration_contradicted;
        // Moved from where CUPTI put it (offset 0, give or take the ns of the claim's drift):
        // by the record's own tightest fact on that side when it binds, else by earlier ones.
        let moved = placement.offset_ns;
        if moved.abs() > 1 {
            let own = if moved > 0 { lower.filter(|(l, ..)| moved <= *l) } else { upper.filter(|(u, ..)| moved >= *u) };
            self.moves.add(own.map_or(Fact::EarlierRecords, |(.., f)| f), moved.unsigned_abs() as u64);
        }
        // Back to the host clock at the record's first instant: one offset keeps its durations,
        // and the error covers how far the calibrations move by its last one.
        let last = pieces.iter().map(|(_, p)| p.activity.interval.end_ns).max().unwrap_or(first);
        let on_cupti = |t: u64| u64::try_from(i128::from(t) + placement.offset_ns).unwrap_or(0);
        let (calibration, calibration_error) = self.offset(on_cupti(first), On::Cupti);
        let (at_end, end_error) = self.offset(on_cupti(last), On::Cupti);
        let offset = placement.offset_ns + calibration;
        let moves_within = u64::try_from((at_end - calibration).abs()).unwrap_or(u64::MAX);
        let error = placement.error_ns.saturating_add(calibration_error.max(end_error)).saturating_add(moves_within);
        let bounds = self.devices.get_mut(&device).expect("placed above");
        bounds.stated(error);
        let map = |t: u64| u64::try_from(i128::from(t) + offset).unwrap_or(0);
        let activities = pieces
            .into_iter()
            .map(|(_, p)| {
                let mut a = p.activity;
                a.interval = Interval { start_ns: map(a.interval.start_ns), end_ns: map(a.interval.end_ns) };
                a
            })
            .collect();
        (activities, error)
    }

    /// The trust report's lines: per device, how well the offset is known.
    pub(crate) fn lines(&self, name: impl Fn(u32) -> String) -> Vec<String> {
        let mut ids: Vec<_> = self.devices.iter().filter(|(_, b)| b.placed > 0).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        let mut lines: Vec<String> =
            ids.into_iter().map(|id| self.devices[&id].line(id, &format!("{} (CUPTI)", name(id)))).collect();
        lines.extend(self.moves.line());
        lines
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
            queue: (1, 1),
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
        p.add_calibration(ClockMap { offset_ns: -700, error_ns: 25, taken_at_ns: T });
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
        p.add_calibration(ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: T });
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
            p.add_calibration(ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: T });
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
    /// bounds it, and the window's facts (an earlier launch that showed CUPTI's normalisation
    /// 35 µs early) place it.
    #[test]
    fn work_without_a_call_is_placed_by_the_window_and_its_delivery() {
        let mut p = Placer::default();
        p.add_calibration(ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: T });
        let early = |t: u64| t - 35_000;
        p.place(Some(T), |_| api(T + 100, T + 200), vec![(1, kernel(early(T + 5_000), early(T + 6_000)))]);
        let (a, err) = p.place(None, |_| None, vec![(2, kernel(early(T + 50_000), early(T + 51_000)))]);
        assert!(a[0].interval.start_ns.abs_diff(T + 50_000) <= err, "{:?} ±{err}", a[0].interval);
        assert!(a[0].interval.start_ns + err >= T + 100, "not before the launch the window remembers");
        assert!(err < 2_100_000, "bounded by its delivery: {err}");
    }

    /// Issue 39's second process: CUPTI's times put a kernel ending after the synchronize on its
    /// stream, begun after its launch returned, had returned. That synchronize holds it: it is
    /// moved earlier, within its stated error of the truth, and the summary says which fact
    /// moved it and by how much. A synchronize on another stream holds nothing.
    #[test]
    fn a_synchronize_that_returned_holds_the_work_it_waited_for() {
        let late = 5_000u64; // CUPTI's kernel times run 5 µs late
        let run = |stream: u32| {
            let mut p = Placer::default();
            p.add_calibration(ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: T });
            // Launch 0..4 µs, kernel 6..10 µs, synchronize from 5 µs returning at 12 µs.
            p.synchronized(Synchronized::Stream(stream), Interval { start_ns: T + 5_000, end_ns: T + 12_000 });
            let k = kernel(T + 6_000 + late, T + 10_000 + late);
            let (a, err) = p.place(Some(T), |_| api(T, T + 4_000), vec![(1, k)]);
            (a[0].interval, err, p.lines(|_| "H200".into()))
        };
        let (held, err, lines) = run(1);
        assert!(held.end_ns <= T + 12_000 + err, "{held:?} ±{err}");
        assert!(held.start_ns.abs_diff(T + 6_000) <= err, "the truth within its bound: {held:?} ±{err}");
        let moved = lines.iter().find(|l| l.starts_with("CUPTI's GPU times held to host facts")).expect("{lines:?}");
        assert!(moved.contains("1 moved earlier by a synchronize that had returned (up to 3.0 µs)"), "{moved}");
        let (free, _, lines) = run(2);
        assert_eq!(free.end_ns, T + 10_000 + late, "another stream's synchronize: CUPTI's times stand");
        assert!(!lines.iter().any(|l| l.contains("held to host facts")), "{lines:?}");
    }
}
