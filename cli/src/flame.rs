//! `gpuspan flamegraph`: GPU time folded over the host stack: thread, the application `tracing`
//! spans the outermost call was made in (a request, a batch), the enclosing annotated calls, the
//! site, then the kernel or copy when the GPU reported them.
//!
//! A call's own GPU time is its activities' time when it has activities (CUPTI attributes each
//! kernel to the innermost scope that launched it), else its GPU busy time less what its
//! enclosed calls already account for (a wgpu scope's timestamps enclose those of the scopes
//! inside it). So each nanosecond is counted once and the folded total is the GPU time of the
//! outermost recorded calls.
//!
//! A call encloses another on its thread when its host interval contains the other's, it was
//! made in the same application span or an enclosing one, and, where its own time is what its
//! GPU interval leaves, that interval holds the other's GPU work: async calls of two tasks
//! interleave on one worker thread, and an interval alone would nest one request's call in
//! another's (decision 48).

use crate::analysis::{Index, Spans};
use crate::load::LoadError;
use gpuspan_capture::{Capture, Interval, Record, SiteKind};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io::{self, Write};
use std::path::Path;

/// A frame name made safe for the folded format: `;` separates frames and a line ends the
/// stack, so neither may appear inside one; control characters are escaped
/// ([`crate::table::shown`]), for the terminal the folded lines are printed on and the SVG
/// (XML forbids them).
fn frame(name: &str) -> String {
    crate::table::shown(&name.replace(';', ":")).into_owned()
}

/// Folded stacks: `stack -> GPU nanoseconds`, sorted by stack, and how many calls were nested
/// too deep to keep their own frames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    pub stacks: BTreeMap<String, u64>,
    /// Calls nested deeper than [`MAX_DEPTH`], whose time is under [`CUT_FRAME`].
    pub cut: u64,
    /// Calls that found no enclosing call among the 4 096 innermost open calls of their thread
    /// (more being open: async calls interleaved that deep) and were folded as outermost.
    pub unsearched: u64,
}

impl Folded {
    /// What the cut did, in one line; `None` when nothing was cut.
    pub fn cut_note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.cut > 0 {
            parts.push(format!(
                "{} calls nested deeper than {MAX_DEPTH} annotated calls were folded into the frame \"{CUT_FRAME}\" at that depth",
                self.cut
            ));
        }
        if self.unsearched > 0 {
            parts.push(format!(
                "{} calls found no enclosing call among the {SEARCH} innermost open calls of their thread and were folded as outermost",
                self.unsearched
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Folded stacks: `stack -> GPU nanoseconds`, sorted by stack.
pub fn folded(capture: &Capture) -> BTreeMap<String, u64> {
    let mut f = Folder::exact();
    f.spans(&capture.spans);
    for r in &capture.records {
        f.record(r);
    }
    f.finish(&Index::new(capture)).expect("an unbounded folder takes records in any order")
}

/// The folded stacks of the capture at `path`, read in one streaming pass with a bounded
/// [`Folder`]; when the file's records are too far out of order for it, a second pass with an
/// unbounded one. The capture comes back without its records (for its truncation, if any).
pub fn stream(path: &Path, progress: bool) -> Result<(Folded, Capture), LoadError> {
    let mut f = Folder::default();
    let meta = crate::load::stream(path, progress, |c, r| {
        f.spans(&c.spans);
        f.record(r)
    })?;
    if let Some(folded) = f.finish_folded(&Index::new(&meta)) {
        return Ok((folded, meta));
    }
    let mut f = Folder::exact();
    let meta = crate::load::stream(path, progress, |c, r| {
        f.spans(&c.spans);
        f.record(r)
    })?;
    let folded = f.finish_folded(&Index::new(&meta)).expect("an unbounded folder takes records in any order");
    Ok((folded, meta))
}

/// The most frames of annotated calls a stack holds below its thread and spans: a call nested
/// deeper is folded into one frame [`CUT_FRAME`] under its ancestor at this depth, so the output
/// grows with the cap, not with the depth (a folded line is as long as its stack).
pub const MAX_DEPTH: usize = 256;

/// The frame that holds the calls nested deeper than [`MAX_DEPTH`].
pub const CUT_FRAME: &str = "[deeper calls cut]";

/// Calls a bounded [`Folder`] holds per thread before it nests the earliest.
pub const WINDOW: usize = 1 << 16;

/// What folding needs of one record: its host interval, site, GPU time and activities (by
/// interned name), not the record.
#[derive(Debug)]
struct Call {
    start: u64,
    end: u64,
    /// GPU busy time; `None`: no GPU timing.
    busy: Option<u64>,
    /// GPU interval and its clock error, when GPU-timed.
    gpu: Option<(Interval, u64)>,
    site: u32,
    record: u32,
    /// The innermost application span it was made in.
    span: Option<u64>,
    /// (activity name, ns); `None`: no activities.
    acts: Option<Box<[(u32, u64)]>>,
}

/// The order calls nest in: start, the longer first when two start together (it encloses the
/// other), then file order.
type Key = (u64, Reverse<u64>, u32);

impl Call {
    fn key(&self) -> Key {
        (self.start, Reverse(self.end), self.record)
    }
}

impl PartialEq for Call {
    fn eq(&self, o: &Call) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Call {}
impl PartialOrd for Call {
    fn partial_cmp(&self, o: &Call) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Call {
    fn cmp(&self, o: &Call) -> std::cmp::Ordering {
        self.key().cmp(&o.key())
    }
}

/// One thread's calls: those not yet nested (earliest first), the last nested, and the calls
/// that may still enclose later ones (in start order) with their stack id and the GPU time of
/// the calls they enclose. Sync calls keep it a stack; interleaved async calls overlap in it.
///
/// A call that ends leaves a hole (`None`) in `open`, found through `ends` (earliest end
/// first) rather than by scanning `open`: holes at the top are dropped at once, those under a
/// call still open when they are more than half of `open`. So nesting `n` calls costs
/// O(n log n) whatever their depth.
#[derive(Debug, Default)]
struct Lane {
    pending: BinaryHeap<Reverse<Call>>,
    last: Option<Key>,
    open: Vec<Option<(Call, u32, u64)>>,
    /// (end, index in `open`) of every open call.
    ends: BinaryHeap<Reverse<(u64, usize)>>,
    holes: usize,
}

impl Lane {
    /// Closes the calls that ended before `start`, handing each to `done`.
    fn close_before(&mut self, start: u64, mut done: impl FnMut((Call, u32, u64))) {
        while let Some(&Reverse((end, at))) = self.ends.peek() {
            if end >= start {
                break;
            }
            self.ends.pop();
            if let Some(c) = self.open[at].take() {
                self.holes += 1;
                done(c);
            }
        }
        while self.open.last().is_some_and(Option::is_none) {
            self.open.pop();
            self.holes -= 1;
        }
        if self.holes > 64 && self.holes * 2 > self.open.len() {
            self.open.retain(Option::is_some);
            self.holes = 0;
            self.ends =
                self.open.iter().enumerate().filter_map(|(i, c)| c.as_ref().map(|c| Reverse((c.0.end, i)))).collect();
        }
    }

    fn push(&mut self, c: (Call, u32, u64)) {
        self.ends.push(Reverse((c.0.end, self.open.len())));
        self.open.push(Some(c));
    }
}

/// One frame of a stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Node {
    Thread(u32),
    /// An application span's name (interned in [`Spans`]).
    Span(u32),
    Site(u32),
    /// [`CUT_FRAME`]: every call nested below [`MAX_DEPTH`] calls.
    Cut,
}

/// Stacks by id and the GPU time folded onto them.
#[derive(Debug, Default)]
struct Fold {
    /// (parent stack id, frame) -> id; a thread's root has parent u32::MAX.
    ids: HashMap<(u32, Node), u32>,
    /// Each stack's parent, last frame and number of call frames.
    paths: Vec<(u32, Node, u32)>,
    /// (stack id, activity or u32::MAX: the call's own time) -> ns
    acc: HashMap<(u32, u32), u64>,
    /// Calls folded into [`Node::Cut`].
    cut: u64,
    /// Calls that found no enclosing call among the top [`SEARCH`] open ones, with more open.
    unsearched: u64,
}

/// The most open calls of a thread searched for the one enclosing the next call: the search is
/// O(1) for sync calls however deep (the encloser is on top) and bounded for any interleaving.
const SEARCH: usize = 4096;

impl Fold {
    fn intern(&mut self, parent: u32, x: Node) -> u32 {
        let n = self.paths.len() as u32;
        let id = *self.ids.entry((parent, x)).or_insert(n);
        if id == n {
            let above = self.paths.get(parent as usize).map_or(0, |p| p.2);
            let calls = above + u32::from(matches!(x, Node::Site(_) | Node::Cut));
            self.paths.push((parent, x, calls));
        }
        id
    }

    /// The stack of a call of `site` under `parent`: its own frame, or, below [`MAX_DEPTH`]
    /// calls, the cut frame (one for every call deeper).
    fn call(&mut self, parent: u32, site: u32) -> u32 {
        match self.paths[parent as usize] {
            (_, Node::Cut, _) => {
                self.cut += 1;
                parent
            }
            (_, _, calls) if calls as usize >= MAX_DEPTH => {
                self.cut += 1;
                self.intern(parent, Node::Cut)
            }
            _ => self.intern(parent, Node::Site(site)),
        }
    }

    fn emit(&mut self, (c, path, enclosed): (Call, u32, u64)) {
        let Some(busy) = c.busy else { return };
        match &c.acts {
            None => {
                let own = busy.saturating_sub(enclosed);
                if own > 0 {
                    *self.acc.entry((path, u32::MAX)).or_insert(0) += own;
                }
            }
            Some(acts) => {
                for &(name, ns) in acts.iter() {
                    if ns > 0 {
                        *self.acc.entry((path, name)).or_insert(0) += ns;
                    }
                }
            }
        }
    }

    /// Nests the thread's next call in key order under the innermost open call that encloses
    /// it (see the module's docs), or, for an outermost call, under the application spans it was
    /// made in. Calls that ended before this one began enclose nothing more: they are emitted.
    fn step(&mut self, lane: &mut Lane, thread: u32, c: Call, spans: &Spans) {
        lane.last = Some(c.key());
        lane.close_before(c.start, |done| self.emit(done));
        let mut chain: Option<Vec<(u64, u32)>> = None;
        // The innermost enclosing call is on top for sync calls; interleaved async calls put
        // others above it. Past SEARCH open calls it is taken as outermost (and counted).
        let from = lane.open.len().saturating_sub(SEARCH);
        let parent = lane.open[from..].iter().rposition(|open| {
            let Some((p, _, _)) = open else { return false };
            p.start <= c.start && p.end >= c.end && gpu_encloses(p, &c) && {
                match p.span {
                    None => true,
                    Some(s) if c.span == Some(s) => true,
                    Some(s) => chain.get_or_insert_with(|| spans.chain(c.span)).iter().any(|&(id, _)| id == s),
                }
            }
        });
        let parent = parent.map(|k| k + from);
        if parent.is_none() && from > 0 {
            self.unsearched += 1;
        }
        let parent_path = match parent {
            Some(i) => lane.open[i].as_ref().expect("an open call").1,
            None => {
                let root = self.intern(u32::MAX, Node::Thread(thread));
                let chain = chain.unwrap_or_else(|| spans.chain(c.span));
                chain.into_iter().fold(root, |at, (_, name)| self.intern(at, Node::Span(name)))
            }
        };
        let path = self.call(parent_path, c.site);
        if let (Some(Some(p)), Some(busy)) = (parent.map(|i| lane.open[i].as_mut()), c.busy) {
            p.2 += c.acts.as_ref().map_or(busy, |a| a.iter().map(|x| x.1).sum());
        }
        lane.push((c, path, 0));
    }
}

/// Whether `p`'s GPU interval can hold `c`'s GPU time, where `p`'s own time would be what is left
/// of its busy time after `c`'s (timestamps enclose the scopes inside): a call whose GPU work
/// lies outside `p`'s (another task's, another device's) was not made inside it.
fn gpu_encloses(p: &Call, c: &Call) -> bool {
    match (&p.gpu, &c.gpu, &p.acts) {
        (Some((outer, e1)), Some((inner, e2)), None) => {
            let slack = (*e1).max(*e2);
            outer.start_ns <= inner.start_ns.saturating_add(slack) && inner.end_ns <= outer.end_ns.saturating_add(slack)
        }
        _ => true,
    }
}

/// The flamegraph fed one record at a time. Calls are nested per thread in start order; records
/// arrive in about completion order, so each thread's calls wait in a window of [`WINDOW`] calls
/// and the earliest is nested when it overflows: memory is the window, the open calls and the
/// distinct stacks, not the records. A call that arrives after a later-starting one was nested
/// (an enclosing call written more than a window after its inner calls) makes
/// [`Folder::finish`] answer `None`: read again with [`Folder::exact`], which keeps every call.
#[derive(Debug)]
pub struct Folder {
    window: usize,
    lanes: HashMap<u32, Lane>,
    fold: Fold,
    names: HashMap<String, u32>,
    spans: Spans,
    records: u32,
    out_of_order: bool,
}

impl Default for Folder {
    fn default() -> Folder {
        Folder {
            window: WINDOW,
            lanes: HashMap::new(),
            fold: Fold::default(),
            names: HashMap::new(),
            spans: Spans::default(),
            records: 0,
            out_of_order: false,
        }
    }
}

impl Folder {
    /// A folder that keeps every call until [`Folder::finish`]: records in any order.
    pub fn exact() -> Folder {
        Folder { window: usize::MAX, ..Folder::default() }
    }

    /// A folder whose window holds `window` calls per thread (at least one).
    pub fn with_window(window: usize) -> Folder {
        Folder { window: window.max(1), ..Folder::default() }
    }

    /// The application spans the records name; `all` may grow between calls (spans not seen
    /// before are added), and must hold each record's spans before the record.
    pub fn spans(&mut self, all: &[gpuspan_capture::Span]) {
        if all.len() > self.spans.fed {
            self.spans.feed(all);
        }
    }

    pub fn record(&mut self, r: &Record) {
        let record = self.records;
        self.records = self.records.wrapping_add(1);
        if self.out_of_order {
            return;
        }
        let acts = match &r.gpu {
            Some(_) if !r.activities.is_empty() => Some(
                r.activities
                    .iter()
                    .map(|a| {
                        let n = self.names.len() as u32;
                        let id = match self.names.get(&a.name) {
                            Some(&id) => id,
                            None => *self.names.entry(a.name.clone()).or_insert(n),
                        };
                        (id, a.interval.duration_ns())
                    })
                    .collect(),
            ),
            _ => None,
        };
        let c = Call {
            start: r.host.start_ns,
            end: r.host.end_ns,
            busy: r.gpu.as_ref().map(|g| g.busy_ns),
            gpu: r.gpu.as_ref().map(|g| (g.interval, g.clock_error_ns)),
            site: r.site,
            record,
            span: r.span,
            acts,
        };
        let lane = self.lanes.entry(r.thread).or_default();
        if lane.last.is_some_and(|l| c.key() < l) {
            self.out_of_order = true;
            return;
        }
        lane.pending.push(Reverse(c));
        if lane.pending.len() > self.window {
            let Reverse(c) = lane.pending.pop().expect("a pending call");
            self.fold.step(lane, r.thread, c, &self.spans);
        }
    }

    /// The folded stacks; `None` when the records came too far out of order for the window.
    pub fn finish(self, index: &Index<'_>) -> Option<BTreeMap<String, u64>> {
        self.finish_folded(index).map(|f| f.stacks)
    }

    /// The folded stacks and what was cut ([`Folded`]); `None` as [`Folder::finish`].
    pub fn finish_folded(mut self, index: &Index<'_>) -> Option<Folded> {
        if self.out_of_order {
            return None;
        }
        for (&thread, lane) in self.lanes.iter_mut() {
            while let Some(Reverse(c)) = lane.pending.pop() {
                self.fold.step(lane, thread, c, &self.spans);
            }
            for open in lane.open.drain(..).flatten() {
                self.fold.emit(open);
            }
        }
        let mut act_names = vec![String::new(); self.names.len()];
        for (n, id) in std::mem::take(&mut self.names) {
            act_names[id as usize] = frame(&n);
        }
        // Each stack's text is built only where time was folded onto it, from its frames'
        // names: the work is the output's size (bounded by the cap), never the depth squared.
        let names: Vec<String> = self
            .fold
            .paths
            .iter()
            .map(|&(_, x, _)| match x {
                Node::Thread(t) => frame(&index.thread_name(t)),
                Node::Span(n) => frame(self.spans.name(n)),
                Node::Site(s) => frame(&index.site_name(s)),
                Node::Cut => CUT_FRAME.to_owned(),
            })
            .collect();
        // A selected span's record (site kind `span`) names its own instance as its innermost
        // span: its site frame would repeat the span's frame right above it, so it is left out.
        let repeated: Vec<bool> = self
            .fold
            .paths
            .iter()
            .map(|&(parent, x, _)| match (x, self.fold.paths.get(parent as usize)) {
                (Node::Site(s), Some(&(_, Node::Span(n), _))) => {
                    index.site(s).is_some_and(|site| site.kind == SiteKind::Span && site.name == self.spans.name(n))
                }
                _ => false,
            })
            .collect();
        let mut out = BTreeMap::new();
        let mut frames: Vec<&str> = Vec::new();
        for ((path, act), ns) in self.fold.acc {
            frames.clear();
            let mut at = path;
            while at != u32::MAX {
                if !repeated[at as usize] {
                    frames.push(&names[at as usize]);
                }
                at = self.fold.paths[at as usize].0;
            }
            frames.reverse();
            if act != u32::MAX {
                frames.push(&act_names[act as usize]);
            }
            *out.entry(frames.join(";")).or_insert(0) += ns;
        }
        Some(Folded { stacks: out, cut: self.fold.cut, unsearched: self.fold.unsearched })
    }
}

/// The folded lines, as `--folded` prints them and inferno reads them.
pub fn folded_lines(folded: &BTreeMap<String, u64>) -> Vec<String> {
    folded.iter().map(|(stack, ns)| format!("{stack} {ns}")).collect()
}

/// An SVG flamegraph of the folded stacks.
pub fn svg(folded: &BTreeMap<String, u64>, title: &str, out: impl Write) -> io::Result<()> {
    svg_noted(folded, title, None, out)
}

/// An SVG flamegraph of the folded stacks, with `note` (what was cut) under its title.
pub fn svg_noted(folded: &BTreeMap<String, u64>, title: &str, note: Option<&str>, out: impl Write) -> io::Result<()> {
    let lines = folded_lines(folded);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = note.map(str::to_owned);
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
