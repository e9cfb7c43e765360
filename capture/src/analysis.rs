//! What every reader derives from a capture (the `gpuspan` command and the timeline writer
//! alike): names by id, the GPU work as intervals per device, and how calls nest on each thread.

use crate::{ActivityKind, Capture, Interval, Site, Span};
use std::collections::{HashMap, HashSet};

/// The application spans of a capture, fed as their frames are read: each instance's parent and
/// name (interned: one string per distinct name).
#[derive(Debug, Default)]
pub struct Spans {
    nodes: HashMap<u64, (Option<u64>, u32)>,
    names: Vec<String>,
    by_name: HashMap<String, u32>,
    /// Spans fed so far (for feeding a growing list).
    pub fed: usize,
}

/// Deeper than any real nesting: a bound on a chain read from a damaged file.
const MAX_DEPTH: usize = 256;

impl Spans {
    pub fn new(spans: &[Span]) -> Spans {
        let mut s = Spans::default();
        s.feed(spans);
        s
    }

    /// Adds the spans of `all` not fed yet (`all` grows as a file is read).
    pub fn feed(&mut self, all: &[Span]) {
        for s in all.get(self.fed..).unwrap_or_default() {
            let n = self.names.len() as u32;
            let name = *self.by_name.entry(s.name.clone()).or_insert(n);
            if name == n {
                self.names.push(s.name.clone());
            }
            self.nodes.insert(s.id, (s.parent, name));
        }
        self.fed = all.len();
    }

    pub fn name(&self, name: u32) -> &str {
        self.names.get(name as usize).map_or("?", String::as_str)
    }

    /// The spans from the outermost to `id`: (span id, name id). Empty for `None` or a span
    /// the file never described.
    pub fn chain(&self, id: Option<u64>) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut at = id;
        while let Some(i) = at {
            let Some(&(parent, name)) = self.nodes.get(&i) else { break };
            if out.len() >= MAX_DEPTH {
                break;
            }
            out.push((i, name));
            at = parent;
        }
        out.reverse();
        out
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Lookups by id, built once per capture.
#[derive(Debug)]
pub struct Index<'a> {
    pub capture: &'a Capture,
    sites: HashMap<u32, &'a Site>,
    threads: HashMap<u32, &'a str>,
    /// Names two sites at different places share (two types' `copy` methods): shown with
    /// their place.
    shared_names: HashSet<&'a str>,
    /// By key, the first written (as [`Capture::device`] finds it).
    devices: HashMap<u32, &'a crate::Device>,
}

impl<'a> Index<'a> {
    pub fn new(capture: &'a Capture) -> Index<'a> {
        Index {
            capture,
            sites: capture.sites.iter().map(|s| (s.id, s)).collect(),
            threads: capture.threads.iter().map(|t| (t.index, t.name.as_str())).collect(),
            shared_names: shared_names(capture.sites.iter().map(|s| (s.name.as_str(), s.file.as_str(), s.line))),
            devices: capture.devices.iter().rev().map(|d| (d.key, d)).collect(),
        }
    }

    pub fn site(&self, id: u32) -> Option<&'a Site> {
        self.sites.get(&id).copied()
    }

    /// The site's display name, with its place where another site has the same name (`copy
    /// (buffer.rs:40)`, as the runtime's summary shows it); a record naming a site the file
    /// never described (a damaged file's) still gets one.
    pub fn site_name(&self, id: u32) -> String {
        match self.site(id) {
            Some(s) if self.shared_names.contains(s.name.as_str()) => {
                let file = s.file.rsplit(['/', '\\']).next().unwrap_or(&s.file);
                format!("{} ({file}:{})", s.name, s.line)
            }
            Some(s) => s.name.clone(),
            None => format!("site #{id}"),
        }
    }

    pub fn thread_name(&self, index: u32) -> String {
        self.threads.get(&index).map_or_else(|| format!("thread {index}"), |n| (*n).to_owned())
    }

    /// `GPU <id>: <name>`, or `GPU (unnamed)` for work with no device.
    pub fn device_label(&self, key: Option<u32>) -> String {
        match key.and_then(|k| self.devices.get(&k)) {
            Some(d) => format!("GPU {}: {}", d.id, d.name),
            None => "GPU (unnamed)".to_owned(),
        }
    }
}

/// One stretch of GPU work: a kernel, copy or memset, or, for a call with GPU timing but no
/// activities (wgpu), its GPU interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub device: Option<u32>,
    pub stream: Option<u64>,
    pub interval: Interval,
    /// Index into `capture.records`.
    pub record: usize,
}

/// Every piece of GPU work in the capture, in record order.
pub fn work(capture: &Capture) -> Vec<Work> {
    let mut out = Vec::new();
    for (i, r) in capture.records.iter().enumerate() {
        let Some(g) = &r.gpu else { continue };
        if r.activities.is_empty() {
            out.push(Work { device: g.device, stream: None, interval: g.interval, record: i });
        } else {
            for a in &r.activities {
                out.push(Work { device: a.device.or(g.device), stream: a.stream, interval: a.interval, record: i });
            }
        }
    }
    out
}

/// Merges intervals into their union, sorted; empty intervals are dropped.
pub fn union(mut intervals: Vec<Interval>) -> Vec<Interval> {
    intervals.retain(|i| i.end_ns > i.start_ns);
    intervals.sort_by_key(|i| (i.start_ns, i.end_ns));
    let mut out: Vec<Interval> = Vec::with_capacity(intervals.len());
    for i in intervals {
        match out.last_mut() {
            Some(last) if i.start_ns <= last.end_ns => last.end_ns = last.end_ns.max(i.end_ns),
            _ => out.push(i),
        }
    }
    out
}

/// Cumulative bytes moved, a step per transfer in time order: each copy at its end, or (a call
/// without copy activities) the call's bytes at its GPU end, else its host end.
pub fn bytes_moved(capture: &Capture) -> Vec<(u64, u64)> {
    let mut moved: Vec<(u64, u64)> = Vec::new();
    for r in &capture.records {
        let before = moved.len();
        moved.extend(r.activities.iter().filter_map(|a| match a.kind {
            ActivityKind::Copy { bytes, .. } => Some((a.interval.end_ns, bytes)),
            _ => None,
        }));
        if moved.len() == before {
            if let Some(b) = r.bytes {
                moved.push((r.gpu.as_ref().map_or(r.host.end_ns, |g| g.interval.end_ns), b));
            }
        }
    }
    moved.sort_unstable();
    let mut total = 0u64;
    for step in &mut moved {
        total += step.1;
        step.1 = total;
    }
    moved
}

/// The names more than one place uses: those sites are told apart by their place, in the
/// runtime's summary (`export/summary.rs`) and here alike.
pub fn shared_names<'a>(sites: impl Iterator<Item = (&'a str, &'a str, u32)>) -> HashSet<&'a str> {
    let mut places: HashMap<&str, (&str, u32)> = HashMap::new();
    let mut shared = HashSet::new();
    for (name, file, line) in sites {
        match places.get(name) {
            Some(&place) if place != (file, line) => {
                shared.insert(name);
            }
            Some(_) => {}
            None => {
                places.insert(name, (file, line));
            }
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_runs_from_the_outermost_span_and_stops_at_unknown_ones() {
        let named = |id, parent, name: &str| Span { id, parent, name: name.into() };
        let mut s = Spans::new(&[named(1, None, "request"), named(2, Some(1), "forward")]);
        s.feed(&[named(1, None, "request"), named(2, Some(1), "forward"), named(3, Some(1), "request")]);
        let names = |id| s.chain(Some(id)).iter().map(|&(_, n)| s.name(n).to_owned()).collect::<Vec<_>>();
        assert_eq!(names(2), ["request", "forward"]);
        assert_eq!(names(3), ["request", "request"]);
        assert_eq!(s.chain(Some(1))[0].1, s.chain(Some(3))[1].1, "one name, interned once");
        assert!(s.chain(Some(9)).is_empty() && s.chain(None).is_empty());
    }

    #[test]
    fn union_merges_overlaps_and_touching_intervals() {
        let u = union(vec![Interval::new(5, 10), Interval::new(0, 3), Interval::new(3, 4), Interval::new(8, 12)]);
        assert_eq!(u, vec![Interval::new(0, 4), Interval::new(5, 12)]);
    }
}
