//! GPU idle time, and what the host was doing meanwhile.
//!
//! Per device, the GPU is busy over the union of its work; between its first and last work, the
//! rest is idle. Each idle gap ends when some work starts, and that work was launched by a call
//! on some thread: the *launching thread*. Every nanosecond of the gap is charged to the
//! innermost annotated call that thread was inside at that moment (its host interval), or to
//! "no annotated call" when it was in none: the GPU waited while the host ran that code (or
//! code gpuspan does not see). The shares of a device add up to its idle time exactly.

use crate::analysis::{self, Index, Work};
use gpuspan_capture::{Capture, Interval};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

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

/// Host intervals of one thread's calls, sorted by start, with the running maximum of their
/// ends so a search can stop at the first call that ended before a gap.
struct ThreadCalls {
    /// (start, end, record index)
    calls: Vec<(u64, u64, usize)>,
    max_end: Vec<u64>,
}

impl ThreadCalls {
    /// Calls overlapping `[a, b)`.
    fn overlapping(&self, a: u64, b: u64) -> impl Iterator<Item = &(u64, u64, usize)> {
        let upto = self.calls.partition_point(|c| c.0 < b);
        let mut from = upto;
        while from > 0 && self.max_end[from - 1] > a {
            from -= 1;
        }
        self.calls[from..upto].iter().filter(move |c| c.1 > a)
    }
}

/// The busy/idle breakdown of every device in the capture, by device label.
pub fn analyse(capture: &Capture) -> Vec<DeviceIdle> {
    let index = Index::new(capture);
    let mut by_thread: HashMap<u32, ThreadCalls> = HashMap::new();
    for (i, r) in capture.records.iter().enumerate() {
        by_thread
            .entry(r.thread)
            .or_insert_with(|| ThreadCalls { calls: Vec::new(), max_end: Vec::new() })
            .calls
            .push((r.host.start_ns, r.host.end_ns, i));
    }
    for t in by_thread.values_mut() {
        t.calls.sort_unstable();
        let mut m = 0;
        t.max_end = t
            .calls
            .iter()
            .map(|c| {
                m = m.max(c.1);
                m
            })
            .collect();
    }
    let mut devices: BTreeMap<Option<u32>, Vec<Work>> = BTreeMap::new();
    for w in analysis::work(capture) {
        devices.entry(w.device).or_default().push(w);
    }
    let mut out = Vec::new();
    for (device, mut work) in devices {
        work.sort_by_key(|w| (w.interval.start_ns, w.record));
        let busy = analysis::union(work.iter().map(|w| w.interval).collect());
        let (Some(first), Some(last)) = (busy.first(), busy.last()) else { continue };
        let window = Interval::new(first.start_ns, last.end_ns);
        let busy_ns: u64 = busy.iter().map(Interval::duration_ns).sum();
        let mut shares: BTreeMap<(u32, Option<u32>), (u64, u64)> = BTreeMap::new();
        let mut scratch = Scratch::default();
        for pair in busy.windows(2) {
            let (a, b) = (pair[0].end_ns, pair[1].start_ns);
            // The work that ends the gap: the first to start at its end.
            let k = work.partition_point(|w| w.interval.start_ns < b);
            let Some(next) = work.get(k) else { continue };
            let thread = capture.records[next.record].thread;
            charge(by_thread.get(&thread), capture, a, b, &mut scratch, |site, ns| {
                let e = shares.entry((thread, site)).or_insert((0, 0));
                e.0 += ns;
                e.1 += 1;
            });
        }
        let idle_ns = window.duration_ns() - busy_ns;
        let mut shares: Vec<IdleShare> = shares
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
    out
}

pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Buffers [`charge`] reuses from gap to gap (millions of gaps: no allocation per gap).
#[derive(Default)]
struct Scratch {
    over: Vec<(u64, u64, usize)>,
    cuts: Vec<u64>,
    pieces: Vec<(Option<u32>, u64)>,
}

/// Splits `[a, b)` by the innermost call of the thread running at each moment and hands each
/// holder's total to `add` once (`None`: no call); the totals add up to `b - a`.
fn charge(
    calls: Option<&ThreadCalls>,
    capture: &Capture,
    a: u64,
    b: u64,
    s: &mut Scratch,
    mut add: impl FnMut(Option<u32>, u64),
) {
    s.over.clear();
    if let Some(calls) = calls {
        s.over.extend(calls.overlapping(a, b).map(|&(x, y, i)| (x.max(a), y.min(b), i)));
    }
    if s.over.is_empty() {
        add(None, b - a);
        return;
    }
    s.cuts.clear();
    s.cuts.extend(s.over.iter().flat_map(|c| [c.0, c.1]).chain([a, b]));
    s.cuts.sort_unstable();
    s.cuts.dedup();
    s.pieces.clear();
    for seg in s.cuts.windows(2) {
        let (p, q) = (seg[0], seg[1]);
        // Calls nest, so the innermost one covering the piece is the one that started last.
        let holder = s
            .over
            .iter()
            .filter(|c| c.0 <= p && c.1 >= q)
            .max_by_key(|c| (capture.records[c.2].host.start_ns, std::cmp::Reverse(capture.records[c.2].host.end_ns)))
            .map(|c| capture.records[c.2].site);
        // One gap counts once per holder, however many pieces it was cut into.
        match s.pieces.iter_mut().find(|m| m.0 == holder) {
            Some(m) => m.1 += q - p,
            None => s.pieces.push((holder, q - p)),
        }
    }
    for &(h, ns) in &s.pieces {
        add(h, ns);
    }
}
