//! GPU idle time, and what the host was doing meanwhile.
//!
//! Per device, the GPU is busy over the union of its exact work (a bracket, an upper bound, is
//! not work: it is left out); between its first and last work, the
//! rest is idle. Each idle gap ends when some work starts, and that work was launched by a call
//! on some thread: the *launching thread*. Every nanosecond of the gap is charged to the
//! innermost annotated call that thread was inside at that moment (its host interval), or to
//! "no annotated call" when it was in none: the GPU waited while the host ran that code (or
//! code gpuspan does not see). The shares of a device add up to its idle time exactly.

use crate::analysis::Index;
use gpuspan_capture::{Capture, Interval, Record};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

/// Busy and idle time of one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceIdle {
    pub device: String,
    /// From the first work's start to the last one's end.
    pub window_ns: u64,
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub busy_percent: f64,
    /// Sorted by time, largest first.
    pub shares: Vec<IdleShare>,
}

/// Idle time charged to one thing the launching thread was doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleShare {
    /// The thread whose next launch ended the gaps.
    pub thread: String,
    /// The innermost annotated call on it, or `None`: no annotated call was running.
    pub site: Option<String>,
    pub idle_ns: u64,
    /// Gaps this share has time in.
    pub gaps: u64,
}

impl IdleShare {
    pub fn holder(&self) -> &str {
        self.site.as_deref().unwrap_or("(no annotated call)")
    }
}

/// A call: (host start, host end, record number, site).
type Call = (u64, u64, u32, u32);

/// GPU work waiting to be taken: (start, record number, end, launching thread).
type Work = (u64, u32, u64, u32);

/// The busy/idle breakdown of every device in the capture, by device label.
pub fn analyse(capture: &Capture) -> Vec<DeviceIdle> {
    let mut b = Builder::exact();
    for r in &capture.records {
        b.record(r);
    }
    b.finish(&Index::new(capture)).expect("an unbounded builder takes records in any order")
}

/// A device's earliest pending work: ((start, record), device).
type Next = ((u64, u32), Option<u32>);

/// Pieces of GPU work a bounded [`Builder`] holds back per device before it takes the earliest.
pub const WINDOW: usize = 1 << 16;

/// One device: its work not yet taken (earliest first), and the union and gaps of the work taken.
#[derive(Debug, Default)]
struct Lane {
    pending: BinaryHeap<Reverse<Work>>,
    last: Option<(u64, u32)>,
    /// (start, thread) of the first work taken at the latest start.
    first_at: Option<(u64, u32)>,
    /// The piece of the union being extended.
    piece: Option<(u64, u64)>,
    window_start: u64,
    busy_ns: u64,
    shares: BTreeMap<(u32, Option<u32>), (u64, u64)>,
}

/// One thread's calls that may still overlap a gap, by start and by end.
#[derive(Debug, Default)]
struct Calls {
    /// (start, end, record) -> site
    open: BTreeMap<(u64, u64, u32), u32>,
    /// (end, start, record)
    by_end: BTreeSet<(u64, u64, u32)>,
}

/// The idle analysis fed one record at a time. GPU work is taken per device in start order
/// through a window of [`WINDOW`] pieces (records arrive in about completion order); a call is
/// kept until no gap still to come can overlap it. Memory is the window and the calls around it,
/// not the records. Work or a call that arrives too late for what was already taken makes
/// [`Builder::finish`] answer `None`: read again with [`Builder::exact`], which holds everything.
#[derive(Debug)]
pub struct Builder {
    window: usize,
    threads: HashMap<u32, Calls>,
    devices: BTreeMap<Option<u32>, Lane>,
    records: u32,
    /// Calls that ended at or before this were dropped.
    pruned: u64,
    /// Per thread, the latest end of a gap charged to it.
    charged: HashMap<u32, u64>,
    out_of_order: bool,
    scratch: Scratch,
    /// Calls and work taken since the last [`Builder::prune`].
    since_prune: usize,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            window: WINDOW,
            threads: HashMap::new(),
            devices: BTreeMap::new(),
            records: 0,
            pruned: 0,
            charged: HashMap::new(),
            out_of_order: false,
            scratch: Scratch::default(),
            since_prune: 0,
        }
    }
}

/// Takes the device's next work in start order: extends the union or closes a gap and charges it.
fn take(
    lane: &mut Lane,
    w: Work,
    threads: &HashMap<u32, Calls>,
    scratch: &mut Scratch,
    charged: &mut HashMap<u32, u64>,
) {
    let (start, _, end, thread) = w;
    lane.last = Some((w.0, w.1));
    if lane.first_at.is_none_or(|f| f.0 != start) {
        lane.first_at = Some((start, thread));
    }
    if end <= start {
        // Empty: not in the union (but it may be the work that ends a gap, above).
        return;
    }
    match &mut lane.piece {
        Some(p) if start <= p.1 => p.1 = p.1.max(end),
        Some(p) => {
            let (a, b) = (p.1, start);
            lane.busy_ns += p.1 - p.0;
            lane.piece = Some((start, end));
            // The work that ends the gap: the first to start at its end.
            let thread = lane.first_at.map_or(thread, |f| f.1);
            let shares = &mut lane.shares;
            charge(threads.get(&thread), a, b, scratch, |site, ns| {
                let e = shares.entry((thread, site)).or_insert((0, 0));
                e.0 += ns;
                e.1 += 1;
            });
            let c = charged.entry(thread).or_insert(0);
            *c = (*c).max(b);
        }
        None => {
            lane.piece = Some((start, end));
            lane.window_start = start;
        }
    }
}

impl Builder {
    /// A builder that holds every piece of work until [`Builder::finish`]: records in any order.
    pub fn exact() -> Builder {
        Builder { window: usize::MAX, ..Builder::default() }
    }

    /// A builder whose window holds `window` pieces of work per device (at least one).
    pub fn with_window(window: usize) -> Builder {
        Builder { window: window.max(1), ..Builder::default() }
    }

    pub fn record(&mut self, r: &Record) {
        let i = self.records;
        self.records = self.records.wrapping_add(1);
        if self.out_of_order {
            return;
        }
        let (s, e) = (r.host.start_ns, r.host.end_ns);
        if s < self.charged.get(&r.thread).copied().unwrap_or(0) {
            // It may overlap a gap already charged to its thread.
            self.out_of_order = true;
            return;
        }
        let calls = self.threads.entry(r.thread).or_default();
        calls.open.insert((s, e, i), r.site);
        calls.by_end.insert((e, s, i));
        let Some(g) = &r.gpu else { return };
        if r.activities.is_empty() && g.bracketed() {
            // A bracket bounds the call's work from above (queue or stream time, host gaps
            // included): counting it as busy would call an idle GPU busy.
            return;
        }
        let one = [(g.device, g.interval)];
        let many = r.activities.iter().map(|a| (a.device.or(g.device), a.interval));
        let work: Box<dyn Iterator<Item = (Option<u32>, Interval)>> =
            if r.activities.is_empty() { Box::new(one.into_iter()) } else { Box::new(many) };
        for (device, w) in work {
            let lane = self.devices.entry(device).or_default();
            if w.start_ns < self.pruned || lane.last.is_some_and(|l| (w.start_ns, i) < l) {
                self.out_of_order = true;
                return;
            }
            lane.pending.push(Reverse((w.start_ns, i, w.end_ns, r.thread)));
            if lane.pending.len() > self.window {
                let Reverse(w) = lane.pending.pop().expect("pending work");
                take(lane, w, &self.threads, &mut self.scratch, &mut self.charged);
            }
        }
        if self.window != usize::MAX {
            // (An unbounded builder takes nothing before the end: nothing to drop yet.)
            self.prune_now_and_then();
        }
    }

    /// [`Builder::prune`] once every as many calls as there are devices (it looks at each): the
    /// calls kept a little longer change no answer, and pruning costs O(1) a call however many
    /// devices the capture names.
    fn prune_now_and_then(&mut self) {
        self.since_prune += 1;
        if self.since_prune >= self.devices.len().max(16) {
            self.since_prune = 0;
            self.prune();
        }
    }

    /// Drops the calls no gap still to come can overlap: those that ended before the piece each
    /// device is extending.
    fn prune(&mut self) {
        // A device with no work taken yet holds every call (its first gap is still unknown).
        let horizon: Option<Option<u64>> = self.devices.values().map(|l| l.piece.map(|p| p.0)).min_by_key(|h| *h);
        let Some(Some(h)) = horizon else { return };
        if h <= self.pruned {
            return;
        }
        self.pruned = h;
        for c in self.threads.values_mut() {
            while let Some(&(e, s, i)) = c.by_end.first() {
                if e > h {
                    break;
                }
                c.by_end.pop_first();
                c.open.remove(&(s, e, i));
            }
        }
    }

    /// The breakdown; `None` when the records came too far out of order for the window.
    pub fn finish(mut self, index: &Index<'_>) -> Option<Vec<DeviceIdle>> {
        if self.out_of_order {
            return None;
        }
        // Every device's remaining work in one start order, so that calls can still be dropped:
        // each device's earliest in one heap, refilled from the device taken from.
        let mut next: BinaryHeap<Reverse<Next>> = self
            .devices
            .iter()
            .filter_map(|(d, l)| l.pending.peek().map(|w| Reverse(((w.0 .0, w.0 .1), *d))))
            .collect();
        while let Some(Reverse((_, device))) = next.pop() {
            let lane = self.devices.get_mut(&device).expect("a device");
            let Reverse(w) = lane.pending.pop().expect("pending work");
            take(lane, w, &self.threads, &mut self.scratch, &mut self.charged);
            if let Some(w) = lane.pending.peek() {
                next.push(Reverse(((w.0 .0, w.0 .1), device)));
            }
            self.prune_now_and_then();
        }
        let mut out = Vec::new();
        for (device, lane) in std::mem::take(&mut self.devices) {
            let Some(last) = lane.piece else { continue };
            let busy_ns = lane.busy_ns + (last.1 - last.0);
            let window = Interval::new(lane.window_start, last.1);
            let idle_ns = window.duration_ns() - busy_ns;
            let mut shares: Vec<IdleShare> = lane
                .shares
                .into_iter()
                .map(|((thread, site), (ns, gaps))| IdleShare {
                    thread: index.thread_name(thread),
                    site: site.map(|s| index.site_name(s)),
                    idle_ns: ns,
                    gaps,
                })
                .collect();
            shares.sort_by(|x, y| y.idle_ns.cmp(&x.idle_ns).then_with(|| x.holder().cmp(y.holder())));
            out.push(DeviceIdle {
                device: index.device_label(device),
                window_ns: window.duration_ns(),
                busy_ns,
                idle_ns,
                busy_percent: percent(busy_ns, window.duration_ns()),
                shares,
            });
        }
        Some(out)
    }
}

pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Buffers [`charge`] reuses from gap to gap (millions of gaps: no allocation per gap).
#[derive(Debug, Default)]
struct Scratch {
    /// (clipped start, clipped end, call)
    over: Vec<(u64, u64, Call)>,
    cuts: Vec<u64>,
    /// Indices into `over`, by clipped start and by clipped end.
    by_start: Vec<usize>,
    by_end: Vec<usize>,
    /// The calls running at the cut being swept, innermost (latest start, shortest) last.
    running: BTreeSet<(u64, Reverse<u64>, u32, u32)>,
    pieces: HashMap<Option<u32>, u64>,
}

/// Splits `[a, b)` by the innermost call of the thread running at each moment and hands each
/// holder's total to `add` once (`None`: no call); the totals add up to `b - a`. One sweep over
/// the cuts with the running calls in an ordered set: O(k log k) for k calls in the gap, however
/// deep they nest.
fn charge(calls: Option<&Calls>, a: u64, b: u64, s: &mut Scratch, mut add: impl FnMut(Option<u32>, u64)) {
    s.over.clear();
    if let Some(calls) = calls {
        // The calls that can hold a moment of the gap: those starting in it, those started
        // before it that end in it, and of those that span it only the innermost (the latest
        // started; of those started together the shortest, then the last written). The calls
        // enclosing it are not each looked at: a gap costs the calls in it, not the depth.
        let clip = |(x, y, i): (u64, u64, u32), site: u32| (x.max(a), y.min(b), (x, y, i, site));
        s.over.extend(calls.open.range((a, 0, 0)..(b, 0, 0)).filter(|c| c.0 .1 > a).map(|(&k, &site)| clip(k, site)));
        s.over.extend(
            calls
                .by_end
                .range((a.saturating_add(1), 0, 0)..(b, 0, 0))
                .filter(|&&(_, x, _)| x < a)
                .map(|&(y, x, i)| clip((x, y, i), calls.open[&(x, y, i)])),
        );
        let mut spanning: Option<((u64, u64, u32), u32)> = None;
        for (&(x, y, i), &site) in calls.open.range(..(a, 0, 0)).rev() {
            if spanning.is_some_and(|((sx, _, _), _)| sx != x) {
                break;
            }
            if y >= b && spanning.is_none_or(|((_, sy, si), _)| (Reverse(y), i) > (Reverse(sy), si)) {
                spanning = Some(((x, y, i), site));
            }
        }
        s.over.extend(spanning.map(|(k, site)| clip(k, site)));
    }
    if s.over.is_empty() {
        add(None, b - a);
        return;
    }
    s.cuts.clear();
    s.cuts.extend(s.over.iter().flat_map(|c| [c.0, c.1]).chain([a, b]));
    s.cuts.sort_unstable();
    s.cuts.dedup();
    s.by_start.clear();
    s.by_start.extend(0..s.over.len());
    s.by_start.sort_unstable_by_key(|&k| s.over[k].0);
    s.by_end.clear();
    s.by_end.extend(0..s.over.len());
    s.by_end.sort_unstable_by_key(|&k| s.over[k].1);
    s.running.clear();
    s.pieces.clear();
    let key = |c: &(u64, u64, Call)| (c.2 .0, Reverse(c.2 .1), c.2 .2, c.2 .3);
    let (mut started, mut ended) = (0, 0);
    for seg in s.cuts.windows(2) {
        let (p, q) = (seg[0], seg[1]);
        // A call covers the piece [p, q) when it starts at or before p and ends after p (cuts
        // hold every call's ends, so it then ends at or after q).
        while started < s.by_start.len() && s.over[s.by_start[started]].0 <= p {
            s.running.insert(key(&s.over[s.by_start[started]]));
            started += 1;
        }
        while ended < s.by_end.len() && s.over[s.by_end[ended]].1 <= p {
            s.running.remove(&key(&s.over[s.by_end[ended]]));
            ended += 1;
        }
        // Calls nest, so the innermost one covering the piece is the one that started last.
        let holder = s.running.last().map(|c| c.3);
        // One gap counts once per holder, however many pieces it was cut into.
        *s.pieces.entry(holder).or_insert(0) += q - p;
    }
    for (&h, &ns) in &s.pieces {
        add(h, ns);
    }
}
