//! `gpuspan flamegraph`: GPU time folded over the host stack: thread, the enclosing annotated
//! calls, the site, then the kernel or copy when the GPU reported them.
//!
//! A call's own GPU time is its activities' time when it has activities (CUPTI attributes each
//! kernel to the innermost scope that launched it), else its GPU busy time less what its
//! enclosed calls already account for (a wgpu scope's timestamps enclose those of the scopes
//! inside it). So each nanosecond is counted once and the folded total is the GPU time of the
//! outermost recorded calls.

use crate::analysis::Index;
use crate::load::LoadError;
use gpuspan_capture::{Capture, Record};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;

/// A frame name made safe for the folded format: `;` separates frames and a line ends the
/// stack, so neither may appear inside one.
fn frame(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// Folded stacks: `stack -> GPU nanoseconds`, sorted by stack.
pub fn folded(capture: &Capture) -> BTreeMap<String, u64> {
    let mut f = Folder::default();
    for r in &capture.records {
        f.record(r);
    }
    f.finish(&Index::new(capture))
}

/// The folded stacks of the capture at `path`, read in one streaming pass (see [`Folder`]);
/// the capture comes back without its records (for its truncation, if any).
pub fn stream(path: &Path, progress: bool) -> Result<(BTreeMap<String, u64>, Capture), LoadError> {
    let mut f = Folder::default();
    let meta = crate::load::stream(path, progress, |_, r| f.record(r))?;
    Ok((f.finish(&Index::new(&meta)), meta))
}

/// What folding needs of one record: 48 bytes, not the record.
#[derive(Debug, Clone, Copy)]
struct Call {
    start: u64,
    end: u64,
    /// GPU busy time; `None`: no GPU timing.
    busy: Option<u64>,
    thread: u32,
    site: u32,
    /// Its activities: `acts[from..from + len]`.
    from: u32,
    len: u32,
    record: u32,
}

/// The flamegraph fed one record at a time: a compact copy of each call (host interval, site,
/// GPU time, activities by interned name), nested per thread once all are in.
#[derive(Debug, Default)]
pub struct Folder {
    calls: Vec<Call>,
    /// (activity name, ns)
    acts: Vec<(u32, u64)>,
    names: HashMap<String, u32>,
}

impl Folder {
    pub fn record(&mut self, r: &Record) {
        let from = self.acts.len() as u32;
        if r.gpu.is_some() {
            for a in &r.activities {
                let n = self.names.len() as u32;
                let id = match self.names.get(&a.name) {
                    Some(&id) => id,
                    None => *self.names.entry(a.name.clone()).or_insert(n),
                };
                self.acts.push((id, a.interval.duration_ns()));
            }
        }
        self.calls.push(Call {
            start: r.host.start_ns,
            end: r.host.end_ns,
            busy: r.gpu.as_ref().map(|g| g.busy_ns),
            thread: r.thread,
            site: r.site,
            from,
            len: self.acts.len() as u32 - from,
            record: self.calls.len() as u32,
        });
    }

    pub fn finish(mut self, index: &Index<'_>) -> BTreeMap<String, u64> {
        // By thread, then start, the longer first when two start together (it encloses the
        // other): the order of `analysis::parents`, whose stack this walks.
        self.calls.sort_unstable_by_key(|c| (c.thread, c.start, std::cmp::Reverse(c.end), c.record));
        let mut act_names = vec![String::new(); self.names.len()];
        for (n, id) in std::mem::take(&mut self.names) {
            act_names[id as usize] = frame(&n);
        }
        // Stacks by id: (parent stack, site) -> id; a thread's root is (u32::MAX, thread).
        let mut ids: HashMap<(u32, u32, bool), u32> = HashMap::new();
        let mut paths: Vec<String> = Vec::new();
        // (stack id, activity or u32::MAX: the call's own time) -> ns
        let mut acc: HashMap<(u32, u32), u64> = HashMap::new();
        // (call, its stack id, GPU time of the calls it encloses)
        let mut stack: Vec<(Call, u32, u64)> = Vec::new();
        let acts = &self.acts;
        let mut emit = |(c, path, enclosed): (Call, u32, u64)| {
            let Some(busy) = c.busy else { return };
            if c.len == 0 {
                let own = busy.saturating_sub(enclosed);
                if own > 0 {
                    *acc.entry((path, u32::MAX)).or_insert(0) += own;
                }
            } else {
                for &(name, ns) in &acts[c.from as usize..(c.from + c.len) as usize] {
                    if ns > 0 {
                        *acc.entry((path, name)).or_insert(0) += ns;
                    }
                }
            }
        };
        let mut thread = None;
        let mut root = 0;
        for &c in &self.calls {
            if thread != Some(c.thread) {
                while let Some(top) = stack.pop() {
                    emit(top);
                }
                thread = Some(c.thread);
                root = *ids.entry((u32::MAX, c.thread, true)).or_insert_with(|| {
                    paths.push(frame(&index.thread_name(c.thread)));
                    paths.len() as u32 - 1
                });
            }
            while let Some(top) = stack.last() {
                if top.0.end >= c.end && top.0.start <= c.start {
                    break;
                }
                emit(stack.pop().expect("a top"));
            }
            let parent = stack.last().map_or(root, |p| p.1);
            let path = match ids.get(&(parent, c.site, false)) {
                Some(&id) => id,
                None => {
                    let p = format!("{};{}", paths[parent as usize], frame(&index.site_name(c.site)));
                    paths.push(p);
                    let id = paths.len() as u32 - 1;
                    ids.insert((parent, c.site, false), id);
                    id
                }
            };
            if let (Some(p), Some(busy)) = (stack.last_mut(), c.busy) {
                p.2 += if c.len == 0 {
                    busy
                } else {
                    acts[c.from as usize..(c.from + c.len) as usize].iter().map(|a| a.1).sum()
                };
            }
            stack.push((c, path, 0));
        }
        while let Some(top) = stack.pop() {
            emit(top);
        }
        let mut out = BTreeMap::new();
        for ((path, act), ns) in acc {
            let key = if act == u32::MAX {
                paths[path as usize].clone()
            } else {
                format!("{};{}", paths[path as usize], act_names[act as usize])
            };
            *out.entry(key).or_insert(0) += ns;
        }
        out
    }
}

/// The folded lines, as `--folded` prints them and inferno reads them.
pub fn folded_lines(folded: &BTreeMap<String, u64>) -> Vec<String> {
    folded.iter().map(|(stack, ns)| format!("{stack} {ns}")).collect()
}

/// An SVG flamegraph of the folded stacks.
pub fn svg(folded: &BTreeMap<String, u64>, title: &str, out: impl Write) -> io::Result<()> {
    let lines = folded_lines(folded);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.count_name = "ns of GPU time".to_owned();
    // Frames named after kernels and sites, not functions with addresses: colour by name.
    options.hash = true;
    if lines.is_empty() {
        // inferno refuses an empty input; an empty capture still gets a readable picture.
        return writeln!(
            { out },
            "<?xml version=\"1.0\" standalone=\"no\"?><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"60\"><text x=\"10\" y=\"30\">{}: no GPU time was recorded</text></svg>",
            escape(title)
        );
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
