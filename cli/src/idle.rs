//! GPU idle time, and what the host was doing meanwhile.
//!
//! Per device, the GPU is busy over the union of its work; between its first and last work, the
//! rest is idle. Each idle gap ends when some work starts, and that work was launched by a call
//! on some thread: the *launching thread*. Every nanosecond of the gap is charged to the
//! innermost annotated call that thread was inside at that moment (its host interval), or to
//! "no annotated call" when it was in none: the GPU waited while the host ran that code (or
//! code gpuspan does not see). The shares of a device add up to its idle time exactly.

use crate::analysis::Index;
use gpuspan_capture::{Capture, Interval, Record};
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

/// A call: (host start, host end, record number, site).
type Call = (u64, u64, u32, u32);

/// A piece of GPU work: (start, end, record number, launching thread).
type Work = (u64, u64, u32, u32);

/// Host intervals of one thread's calls, sorted by start, with the running maximum of their
/// ends so a search can stop at the first call that ended before a gap.
#[derive(Debug, Default)]
struct ThreadCalls {
    /// (start, end, record number, site)
    calls: Vec<Call>,
    max_end: Vec<u64>,
}

impl ThreadCalls {
    /// Calls overlapping `[a, b)`.
    fn overlapping(&self, a: u64, b: u64) -> impl Iterator<Item = &Call> {
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
    let mut b = Builder::default();
    for r in &capture.records {
        b.record(r);
    }
    b.finish(&Index::new(capture))
}

/// The idle analysis fed one record at a time. It keeps what the analysis needs of each record
/// and nothing else: 24 bytes per call (host interval, site) and per piece of GPU work
/// (interval, launching thread), instead of the records themselves.
#[derive(Debug, Default)]
pub struct Builder {
    by_thread: HashMap<u32, ThreadCalls>,
    /// Per device: (start, end, record number, launching thread), as [`analysis::work`] gives them.
    devices: BTreeMap<Option<u32>, Vec<Work>>,
    records: u32,
}

impl Builder {
    pub fn record(&mut self, r: &Record) {
        let i = self.records;
        self.records = self.records.wrapping_add(1);
        self.by_thread.entry(r.thread).or_default().calls.push((r.host.start_ns, r.host.end_ns, i, r.site));
        let Some(g) = &r.gpu else { return };
        let mut push = |device: Option<u32>, w: Interval| {
            self.devices.entry(device).or_default().push((w.start_ns, w.end_ns, i, r.thread));
        };
        if r.activities.is_empty() {
            push(g.device, g.interval);
        } else {
            for a in &r.activities {
                push(a.device.or(g.device), a.interval);
            }
        }
    }

    pub fn finish(mut self, index: &Index<'_>) -> Vec<DeviceIdle> {
        for t in self.by_thread.values_mut() {
            t.calls.sort_unstable_by_key(|c| (c.0, c.1, c.2));
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
        let mut out = Vec::new();
        for (device, mut work) in std::mem::take(&mut self.devices) {
            work.sort_unstable_by_key(|w| (w.0, w.2));
            let mut busy_ns = 0;
            let mut window: Option<(u64, u64)> = None;
            let mut shares: BTreeMap<(u32, Option<u32>), (u64, u64)> = BTreeMap::new();
            let mut scratch = Scratch::default();
            // The union of the work, piece by piece (empty intervals dropped), and the gap before
            // each piece.
            let mut piece: Option<(u64, u64)> = None;
            let mut close = |p: (u64, u64), next_start: Option<u64>, busy_ns: &mut u64| {
                *busy_ns += p.1 - p.0;
                let Some(b) = next_start else { return };
                let a = p.1;
                // The work that ends the gap: the first to start at its end.
                let k = work.partition_point(|w| w.0 < b);
                let Some(next) = work.get(k) else { return };
                let thread = next.3;
                charge(self.by_thread.get(&thread), a, b, &mut scratch, |site, ns| {
                    let e = shares.entry((thread, site)).or_insert((0, 0));
                    e.0 += ns;
                    e.1 += 1;
                });
            };
            for &(start, end, _, _) in work.iter().filter(|w| w.1 > w.0) {
                match &mut piece {
                    Some(p) if start <= p.1 => p.1 = p.1.max(end),
                    Some(p) => {
                        let done = *p;
                        piece = Some((start, end));
                        close(done, Some(start), &mut busy_ns);
                    }
                    None => {
                        piece = Some((start, end));
                        window = Some((start, end));
                    }
                }
            }
            let Some(last) = piece else { continue };
            close(last, None, &mut busy_ns);
            let window = Interval::new(window.map_or(last.0, |w| w.0), last.1);
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
    /// (clipped start, clipped end, call)
    over: Vec<(u64, u64, Call)>,
    cuts: Vec<u64>,
    pieces: Vec<(Option<u32>, u64)>,
}

/// Splits `[a, b)` by the innermost call of the thread running at each moment and hands each
/// holder's total to `add` once (`None`: no call); the totals add up to `b - a`.
fn charge(calls: Option<&ThreadCalls>, a: u64, b: u64, s: &mut Scratch, mut add: impl FnMut(Option<u32>, u64)) {
    s.over.clear();
    if let Some(calls) = calls {
        s.over.extend(calls.overlapping(a, b).map(|&c| (c.0.max(a), c.1.min(b), c)));
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
            .max_by_key(|c| (c.2 .0, std::cmp::Reverse(c.2 .1)))
            .map(|c| c.2 .3);
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
