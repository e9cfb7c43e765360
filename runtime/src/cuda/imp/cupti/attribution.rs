//! Attribution: which annotated call every CUPTI record belongs to, and when a call has all of
//! its records so that it can be handed on.
//!
//! # The rule
//!
//! Kernels, copies and sets carry the correlation id of the API call that enqueued them; API
//! records carry the calling OS thread and CUPTI-clock start. A call is owned by
//!
//! - the scope whose id was pushed as CUPTI external correlation id around it (async scopes, and
//!   scopes opened inside an async poll): CUPTI writes an `EXTERNAL_CORRELATION` record (scope id
//!   → correlation id) beside its API record; a pushed id is always the innermost scope;
//! - else the innermost synchronous scope of its thread whose window (CUPTI's clock at open and
//!   close) holds its start (`thread_index.rs`: decided once no open window can hold it);
//! - else, by time (decision 55), the innermost selected span entered on some thread when the
//!   call began, when that is one span (`span_scopes/imp/open_spans.rs`): a framework's device
//!   thread launches what the caller's span asked for without entering it. When several
//!   unrelated spans were entered, nobody's: the `during several spans` site, naming them;
//! - else nobody: `unattributed`.
//!
//! A scope is resolved when all of these hold:
//!
//! 1. it has ended on the host (no more API calls can join it);
//! 2. **fence**: every activity buffer CUPTI had asked for when the scope ended has come back.
//!    Host-side records (API and external correlation) are written during the call, so they lie
//!    in those buffers: after the fence, the scope's set of correlation ids is complete;
//! 3. **expectations**: every API call of the scope that enqueues GPU work (a launch, memcpy,
//!    memset or graph launch that returned success) has at least one activity record. Device
//!    records are written when the work finishes, possibly into a later buffer.
//!
//! Waiting for a buffer never blocks the caller: CUPTI hands buffers back when they fill, and
//! gpuspan's resolver thread asks for completed ones every few milliseconds while scopes are
//! pending (`cuptiActivityFlushAll(0)`, which returns only buffers whose records are complete);
//! `gpuspan::flush()` does the same until nothing is pending or its deadline passes.
//!
//! A correlation id that no external id or window claims once every buffer up to the one
//! holding its record, and the next one if CUPTI asked for it, has come back was called outside
//! any scope: its activities become records of the
//! `unattributed` site. So do activities that arrive after their scope was resolved (which rule 3
//! makes rare: only a graph launch whose records straddle buffers). A scope whose expectations
//! are still unmet [`STALE_NS`] after its fence passed is resolved with what it has, and counted;
//! so is every ended scope at a flush's deadline ([`Resolver::force`]).

use super::callbacks::{work_of, Work};
use super::finish::{demangle, during_several, finish, unattributed};
use super::records::{self, Raw, RawApi};
use super::thread_index::{Owner, Snapshot, ThreadIndex, Window};
use crate::cuda::counts::Counts;
use crate::record::{Activity, ActivityKind, Attributed, DeviceLabel, Interval, KernelGeometry, Record};
use crate::span_scopes::ByTime;
use facts::{Piece, Placer};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

mod calibrations;
mod facts;
mod syncs;

/// How long a scope past its fence waits for missing device records before it is resolved
/// with what it has.
pub(crate) const STALE_NS: u64 = 30_000_000_000;

/// External correlation kind gpuspan pushes (`CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`).
pub const EXTERNAL_KIND: u32 =
    cudarc::cupti::sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 as u32;

#[derive(Debug)]
struct Ended {
    record: Record,
    fence: u64,
    /// Host time the fence was first seen passed, for [`STALE_NS`].
    fence_passed_ns: Option<u64>,
    /// A synchronous scope's window (its calls are found by thread and time).
    window: Option<Window>,
    /// [`Resolver::observe`]s before it ended: a selected span's scope waits for one more
    /// (`Resolver::span_window`).
    observed_at: u64,
}

#[derive(Debug, Default)]
struct Pending {
    ended: Option<Ended>,
    correlation_ids: Vec<u32>,
    /// The work-enqueuing calls made in the scope: correlation id, what they enqueue, and the
    /// call's interval on CUPTI's clock (its work cannot start earlier; a synchronous copy
    /// ended before the call returned).
    expected: Vec<(u32, Work, Interval)>,
    activities: Vec<(u32, Piece)>,
}

/// Which buffers came back: all up to `prefix`, and those in `above`.
#[derive(Debug, Default)]
struct Delivered {
    prefix: u64,
    above: BTreeSet<u64>,
}

impl Delivered {
    fn mark(&mut self, seq: u64) {
        if seq <= self.prefix {
            return;
        }
        self.above.insert(seq);
        while self.above.remove(&(self.prefix + 1)) {
            self.prefix += 1;
        }
    }
}

/// The attribution state. Fed with buffers and ended scopes in any order; hands out resolved
/// records. Lent to tests by `replay` so that they can replay captured CUPTI traffic through it.
#[derive(Debug)]
pub struct Resolver {
    scopes: HashMap<u64, Pending>,
    correlation: HashMap<u32, u64>,
    /// Work-enqueuing API records without an external id, with the buffer they came in.
    api_waiting: Vec<(u64, RawApi)>,
    /// Work-enqueuing API calls made outside every scope: their interval on CUPTI's clock, and
    /// the spans they were made during, when several were entered (nobody's, by time).
    outside: HashMap<u32, (Interval, Option<Arc<str>>)>,
    /// Which selected span was entered when, at a host instant (`span_scopes::by_time`).
    by_time: fn(u64) -> ByTime,
    /// The unselected spans entered at a host instant, naming work nobody owned
    /// (`span_scopes::unselected_at`).
    unselected_at: fn(u64) -> Option<Arc<str>>,
    /// Calls given to a selected span by time, until their scope resolves.
    time_ids: HashSet<u32>,
    /// Selected spans' scopes already handed on: a call found theirs by time too late stays
    /// unattributed (counted).
    resolved_spans: HashSet<u64>,
    /// Activities whose correlation id is not known yet, with the buffer they came in.
    orphans: Vec<(u64, u32, Piece)>,
    /// Windows of ended synchronous scopes, and the calls that wait for one.
    threads: ThreadIndex,
    /// Windows of selected spans' entries, by `(fence, scope id, thread, start, end)`: in
    /// `threads` until their fence passes (every call in them is placed then).
    span_windows: BTreeSet<(u64, u64, u32, u64, u64)>,
    /// Snapshots taken in so far ([`Resolver::observe`]).
    observed: u64,
    /// Activities of calls that wait for their window, by correlation id.
    held: HashMap<u32, Vec<Piece>>,
    /// Scopes ended and not resolved, by `(fence, id)`: a poll looks only at those whose fence
    /// has passed.
    ended: BTreeSet<(u64, u64)>,
    delivered: Delivered,
    /// Buffers CUPTI has asked for so far.
    requested: u64,
    names: HashMap<u64, &'static str>,
    devices: Vec<DeviceLabel>,
    counts: Counts,
    /// CUPTI's clock onto the host's: per device, from facts and the calibration.
    placer: Placer,
}

impl Resolver {
    /// `devices[i]` labels CUPTI device id `i`.
    pub fn new(devices: Vec<DeviceLabel>) -> Self {
        Resolver {
            scopes: HashMap::new(),
            correlation: HashMap::new(),
            api_waiting: Vec::new(),
            outside: HashMap::new(),
            by_time: crate::span_scopes::by_time,
            unselected_at: crate::span_scopes::unselected_at,
            time_ids: HashSet::new(),
            resolved_spans: HashSet::new(),
            orphans: Vec::new(),
            threads: ThreadIndex::default(),
            span_windows: BTreeSet::new(),
            observed: 0,
            held: HashMap::new(),
            ended: BTreeSet::new(),
            delivered: Delivered::default(),
            requested: 0,
            names: HashMap::new(),
            devices,
            counts: Counts::default(),
            placer: Placer::default(),
        }
    }

    /// Takes the calibration of CUPTI's CPU clock against the host's (`host = cupti + offset`)
    /// from `measure`, asked to measure again when a record's facts contradicted the last one.
    /// Replays of captured traffic set none: their CUPTI clock is taken as the host's.
    pub(crate) fn calibrate(
        &mut self,
        measure: impl FnOnce(bool) -> crate::placement::ClockMap,
    ) -> crate::placement::ClockMap {
        let again = self.placer.take_contradicted();
        let clock = measure(again);
        self.placer.add_calibration(clock);
        clock
    }

    /// Replays: the live run's calibration from a dump's `Clock` frame (`host = cupti +
    /// offset_ns`, good to `error_ns`, taken at host instant `taken_ns`).
    pub fn calibrated(&mut self, offset_ns: i64, error_ns: u64, taken_ns: u64) {
        let clock = crate::placement::ClockMap { offset_ns: offset_ns.into(), error_ns, taken_at_ns: taken_ns };
        self.placer.add_calibration(clock);
    }

    /// The trust report's lines: how well each device's offset is known.
    pub(crate) fn clock_lines(&self) -> Vec<String> {
        let name =
            |id: u32| self.devices.get(id as usize).map_or_else(|| format!("device {id}"), |d| d.name.to_string());
        self.placer.lines(name)
    }

    /// The record of work no call claimed, placed from its own facts; `api` is the interval of
    /// the call that enqueued it on CUPTI's clock, when CUPTI reported it.
    fn unattributed(&mut self, piece: Piece, api: Option<Interval>) -> Record {
        self.counts.unattributed_activities += 1;
        let (mut placed, error) = self.placer.place(None, |_| api, vec![(0, piece)]);
        let a = placed.remove(0);
        let host = match api {
            Some(i) => Interval { start_ns: self.placer.host_ns(i.start_ns), end_ns: self.placer.host_ns(i.end_ns) },
            None => a.interval,
        };
        let open_span = api.and_then(|_| (self.unselected_at)(host.start_ns));
        unattributed(a, host, error, open_span)
    }

    /// The record of work launched outside every scope while several unrelated selected spans
    /// were entered (named in `spans`): not guessed between.
    fn during_several(&mut self, piece: Piece, api: Interval, spans: Arc<str>) -> Record {
        self.counts.during_several_activities += 1;
        let (mut placed, error) = self.placer.place(None, |_| Some(api), vec![(0, piece)]);
        let a = placed.remove(0);
        let host = Interval { start_ns: self.placer.host_ns(api.start_ns), end_ns: self.placer.host_ns(api.end_ns) };
        during_several(a, host, error, spans)
    }

    /// Outside work: its own record, unattributed or during several spans.
    fn outside_record(&mut self, piece: Piece, outside: Option<(Interval, Option<Arc<str>>)>) -> Record {
        match outside {
            Some((api, Some(spans))) => self.during_several(piece, api, spans),
            Some((api, None)) => self.unattributed(piece, Some(api)),
            None => self.unattributed(piece, None),
        }
    }

    /// What it has done so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Scopes that ended and are not resolved yet, plus activities and calls not yet attributed
    /// (calls that a still open scope may own are not counted).
    pub fn pending(&self) -> usize {
        self.ended.len() + self.orphans.len() + self.api_waiting.len() + self.threads.waiting()
    }

    /// Replays and tests: a scope that pushed its id ended (the live side calls `ended_in`); `fence` = number of buffers CUPTI had requested by then.
    pub fn ended(&mut self, record: Record, fence: u64) {
        self.ended_in(record, fence, None);
    }

    /// A scope ended, with its window if it was synchronous.
    pub fn ended_in(&mut self, record: Record, fence: u64, window: Option<Window>) {
        let id = record.scope_id;
        if let Some(w) = window {
            self.threads.add(id, w);
        }
        let p = self.scopes.entry(id).or_default();
        if let Some(before) = &p.ended {
            self.ended.remove(&(before.fence, id));
        }
        self.ended.insert((fence, id));
        p.ended = Some(Ended { record, fence, fence_passed_ns: None, window, observed_at: self.observed });
    }

    /// One entry of a selected span on one thread ended (decision 71): the calls of that thread
    /// inside `w` are the span's (`scope_id`), as a synchronous scope's are its own, until its
    /// `fence` passes. The span's scope ends later, at its close, maybe on another thread, whose
    /// queue the resolver may drain before this one's: it resolves only after a snapshot taken
    /// after its end was seen, by which every entry that ended before it was drained. A window
    /// of a span already handed on (a thread torn down late) adds nothing: its calls go by time.
    pub fn span_window(&mut self, scope_id: u64, fence: u64, w: Window) {
        if self.resolved_spans.contains(&scope_id) {
            self.counts.late_span_windows += 1;
            return;
        }
        self.threads.add(scope_id, w);
        self.span_windows.insert((fence, scope_id, w.thread, w.start, w.end));
    }

    /// CUPTI asked for buffer `seq`.
    pub fn requested(&mut self, seq: u64) {
        self.requested = self.requested.max(seq);
    }

    /// Which threads had a window open before the messages just taken were sent.
    pub fn observe(&mut self, threads: &Snapshot) {
        self.threads.observe(threads);
        self.observed += 1;
    }

    /// Calls held for their window (including those a still open scope may own).
    pub fn held_calls(&self) -> usize {
        self.threads.held()
    }

    /// The deadline of a flush: every ended scope is resolved with what it has; those still
    /// waiting for records are counted and said.
    pub fn force(&mut self) -> Vec<Record> {
        let ids: Vec<u64> = self.ended.iter().map(|(_, id)| *id).collect();
        if !ids.is_empty() {
            self.counts.deadline_scopes += ids.len() as u64;
            crate::diagnostics::Losses::add(&crate::diagnostics::losses().unresolved_scopes, ids.len() as u64);
            crate::diagnostics::note_once(
                "CUDA calls were handed on at a flush deadline before CUPTI delivered all their records: their \
                 missing GPU work appears under `unattributed` if it comes later (see the `lost` line)",
            );
        }
        ids.into_iter().filter_map(|id| self.resolve(id)).collect()
    }

    /// Hands a call to its owner, or keeps it until its window decides.
    fn place(&mut self, a: RawApi, out: &mut Vec<Record>) {
        match self.threads.owner(a.thread_id, a.start) {
            Owner::Undecided => self.threads.hold(a),
            owner => self.settle(a, owner, out),
        }
    }

    fn settle(&mut self, a: RawApi, owner: Owner, out: &mut Vec<Record>) {
        let c = a.correlation_id;
        let api = Interval { start_ns: a.start, end_ns: a.end };
        let held = self.held.remove(&c).unwrap_or_default();
        // No scope on its thread: whose by time (only calls that enqueue work are asked).
        let mut several = None;
        let owner = match owner {
            Owner::Scope(_) => owner,
            Owner::Outside | Owner::Undecided if work_of(a.domain, a.cbid).is_none() => owner,
            Owner::Outside | Owner::Undecided => match (self.by_time)(self.placer.host_ns(a.start)) {
                ByTime::One(scope) if scope != 0 && !self.resolved_spans.contains(&scope) => {
                    self.time_ids.insert(c);
                    self.counts.calls_by_time += 1;
                    Owner::Scope(scope)
                }
                ByTime::One(scope) if scope != 0 => {
                    self.counts.late_by_time += 1;
                    owner
                }
                ByTime::Several(spans) => {
                    several = Some(spans);
                    owner
                }
                _ => owner,
            },
        };
        match owner {
            Owner::Scope(scope) => {
                self.correlation.insert(c, scope);
                let p = self.scopes.entry(scope).or_default();
                p.correlation_ids.push(c);
                if let Some(work) = work_of(a.domain, a.cbid) {
                    p.expected.push((c, work, api));
                }
                p.activities.extend(held.into_iter().map(|h| (c, h)));
            }
            Owner::Outside | Owner::Undecided => {
                self.outside.insert(c, (api, several.clone()));
                for h in held {
                    out.push(self.outside_record(h, Some((api, several.clone()))));
                }
            }
        }
    }

    /// Hands on an ended scope with what it has.
    fn resolve(&mut self, id: u64) -> Option<Record> {
        let p = self.scopes.remove(&id)?;
        for c in &p.correlation_ids {
            self.correlation.remove(c);
        }
        let mut e = p.ended?;
        self.ended.remove(&(e.fence, id));
        let by_time = p.activities.iter().filter(|(c, _)| self.time_ids.contains(c)).count();
        for c in &p.correlation_ids {
            self.time_ids.remove(c);
        }
        e.record.attributed = match (by_time, p.activities.len()) {
            (_, 0) => None,
            (0, _) => Some(Attributed::Thread),
            (t, n) if t == n => Some(Attributed::Time),
            _ => Some(Attributed::ThreadAndTime),
        };
        if e.record.site.is_span() {
            if self.resolved_spans.len() > 100_000 {
                self.resolved_spans.clear();
            }
            self.resolved_spans.insert(id);
        }
        if let Some(w) = &e.window {
            self.threads.remove(id, w);
            self.counts.window_scopes += 1;
        }
        self.counts.scopes_resolved += 1;
        let launch_of = |c: u32| p.expected.iter().find(|(e, ..)| *e == c).map(|(_, _, api)| *api);
        // A window scope's start is its window's, mapped by the calibration itself: not a fact
        // beside it. Its work is placed after the API calls that launched it.
        let call_start = e.window.is_none().then_some(e.record.host.start_ns);
        if e.record.only_if_gpu && p.activities.is_empty() {
            return None; // another backend timed the span (`backends.rs`)
        }
        let (activities, clock_error_ns) = self.placer.place(call_start, launch_of, p.activities);
        Some(finish(e.record, activities, clock_error_ns))
    }

    /// Buffer `seq` came back with these records, handed to the host at `delivered_ns` (host
    /// clock; its work ended before: 0 if unknown); `name` reads the kernel name behind a pointer.
    pub fn buffer(
        &mut self,
        seq: u64,
        delivered_ns: u64,
        records: &[Raw],
        name: &mut dyn FnMut(u64) -> Option<String>,
    ) {
        // External correlation records first: within a buffer they precede their API records,
        // but nothing below depends on that order.
        for r in records {
            if let Raw::External(e) = r {
                if e.external_kind == EXTERNAL_KIND {
                    self.correlation.insert(e.correlation_id, e.external_id);
                    self.scopes.entry(e.external_id).or_default().correlation_ids.push(e.correlation_id);
                }
            }
        }
        for r in records {
            match r {
                Raw::Api(a) => {
                    let Some(work) = work_of(a.domain, a.cbid) else { continue };
                    if a.return_value != 0 {
                        continue; // a failed call enqueues nothing
                    }
                    match self.correlation.get(&a.correlation_id) {
                        Some(scope) => {
                            let api = Interval { start_ns: a.start, end_ns: a.end };
                            self.scopes.entry(*scope).or_default().expected.push((a.correlation_id, work, api));
                        }
                        None => self.api_waiting.push((seq, a.clone())),
                    }
                }
                Raw::Kernel(_) | Raw::Memcpy(_) | Raw::Memset(_) => {
                    let Some(c) = r.correlation_id() else { continue };
                    let Some(activity) = self.activity(r, name) else {
                        self.counts.invalid_activities += 1;
                        continue;
                    };
                    let ends_by_return = matches!(r, Raw::Memcpy(m) if m.ends_before_return());
                    let queue = match r {
                        Raw::Kernel(k) => (k.context, k.stream),
                        Raw::Memcpy(m) => (m.context, m.stream),
                        Raw::Memset(m) => (m.context, m.stream),
                        _ => (u32::MAX, u32::MAX),
                    };
                    let activity = Piece { activity, delivered_ns, ends_by_return, queue };
                    match self.correlation.get(&c) {
                        Some(scope) => self.scopes.entry(*scope).or_default().activities.push((c, activity)),
                        None => self.orphans.push((seq, c, activity)),
                    }
                }
                Raw::Sync(sync) => {
                    if let Some(what) = sync.synchronized() {
                        self.placer.synchronized(what, Interval { start_ns: sync.start, end_ns: sync.end });
                    }
                }
                Raw::External(_) | Raw::Other { .. } => {}
            }
        }
        self.delivered.mark(seq);
    }

    /// Resolves everything that can be; `now_ns` is the host clock (for `STALE_NS`).
    pub fn poll(&mut self, now_ns: u64) -> Vec<Record> {
        let mut out = Vec::new();
        let prefix = self.delivered.prefix;

        // API calls without an external id, once their buffer and all before it are in.
        let mut i = 0;
        while i < self.api_waiting.len() {
            let (seq, a) = &self.api_waiting[i];
            if let Some(scope) = self.correlation.get(&a.correlation_id) {
                if let Some(work) = work_of(a.domain, a.cbid) {
                    let api = Interval { start_ns: a.start, end_ns: a.end };
                    self.scopes.entry(*scope).or_default().expected.push((a.correlation_id, work, api));
                }
                self.api_waiting.swap_remove(i);
            } else if *seq <= prefix {
                // No external id will come (it precedes its API record): a window decides.
                let (_, a) = self.api_waiting.swap_remove(i);
                self.place(a, &mut out);
            } else {
                i += 1;
            }
        }
        for (a, owner) in self.threads.decidable() {
            self.settle(a, owner, &mut out);
        }

        // Activities whose correlation id was unknown when they arrived.
        let mut i = 0;
        while i < self.orphans.len() {
            let (seq, c, _) = &self.orphans[i];
            let c = *c;
            if let Some(scope) = self.correlation.get(&c).copied() {
                let (_, _, a) = self.orphans.swap_remove(i);
                self.scopes.entry(scope).or_default().activities.push((c, a));
            } else if *seq <= prefix && self.threads.is_undecided(c) {
                let (_, _, a) = self.orphans.swap_remove(i);
                self.held.entry(c).or_default().push(a);
            } else if *seq < prefix || (*seq == prefix && *seq >= self.requested) {
                // Its API record is in the same buffer or the next: CUPTI reserves a kernel's
                // record at launch but writes the API record when the call returns, possibly
                // into the next buffer. Once that one is in too (or none was asked for), no
                // call will claim it.
                let (_, _, a) = self.orphans.swap_remove(i);
                let outside = self.outside.get(&c).cloned();
                out.push(self.outside_record(a, outside));
            } else {
                i += 1;
            }
        }
        if self.outside.len() > 100_000 {
            self.outside.clear(); // calls whose activities never came (kinds gpuspan does not record)
        }

        // Span windows whose fence passed: every call in them was placed above.
        while let Some(&(fence, scope, thread, start, end)) = self.span_windows.first() {
            if fence > prefix {
                break;
            }
            self.span_windows.pop_first();
            self.threads.remove(scope, &Window { thread, start, end });
        }

        // Scopes whose fence has passed.
        let due: Vec<u64> = self.ended.range(..=(prefix, u64::MAX)).map(|(_, id)| *id).collect();
        let mut ready = Vec::new();
        for id in due {
            let Some(p) = self.scopes.get_mut(&id) else { continue };
            let Some(e) = p.ended.as_mut() else { continue };
            // Its end was seen in the drain before snapshot `observed_at + 1`; the drain before
            // the next one has every entry's window that ended before it, on any thread.
            if e.record.site.is_span() && self.observed < e.observed_at + 2 {
                continue;
            }
            let passed = *e.fence_passed_ns.get_or_insert(now_ns);
            let complete = p.expected.iter().all(|(c, ..)| p.activities.iter().any(|(ac, _)| ac == c));
            if complete {
                ready.push(id);
            } else if now_ns.saturating_sub(passed) >= STALE_NS {
                self.counts.stale_scopes += 1;
                ready.push(id);
            }
        }
        out.extend(ready.into_iter().filter_map(|id| self.resolve(id)));
        out
    }

    fn device(&self, id: u32) -> Option<DeviceLabel> {
        self.devices.get(id as usize).cloned()
    }

    fn kernel_name(&mut self, ptr: u64, name: &mut dyn FnMut(u64) -> Option<String>) -> &'static str {
        if let Some(n) = self.names.get(&ptr) {
            return n;
        }
        let n: &'static str = match name(ptr) {
            Some(mangled) => Box::leak(demangle(&mangled).into_boxed_str()),
            None => "kernel",
        };
        self.names.insert(ptr, n);
        n
    }

    /// An activity with its interval on CUPTI's clock (placed when its record is resolved).
    fn activity(&mut self, r: &Raw, name: &mut dyn FnMut(u64) -> Option<String>) -> Option<Activity> {
        let valid = |s: u64, e: u64| (s > 0 && e >= s).then_some(Interval { start_ns: s, end_ns: e });
        Some(match r {
            Raw::Kernel(k) => {
                let interval = valid(k.start, k.end)?;
                let dim = |v: [i32; 3]| v.map(|x| x.max(0) as u32);
                Activity {
                    name: Cow::Borrowed(self.kernel_name(k.name_ptr, name)),
                    interval,
                    kind: ActivityKind::Kernel(KernelGeometry {
                        grid: dim(k.grid),
                        block: dim(k.block),
                        registers_per_thread: k.registers_per_thread.into(),
                        static_shared_bytes: k.static_shared.max(0) as u32,
                        dynamic_shared_bytes: k.dynamic_shared.max(0) as u32,
                    }),
                    stream: Some(k.stream.into()),
                    device: self.device(k.device),
                    src_device: None,
                    dst_device: None,
                }
            }
            Raw::Memcpy(m) => Activity {
                name: Cow::Borrowed(records::copy_name(m.copy_kind)),
                interval: valid(m.start, m.end)?,
                kind: ActivityKind::Copy {
                    bytes: m.bytes,
                    // A MEMCPY2 record is device to device whatever its copy kind says.
                    direction: records::copy_direction(m.copy_kind)
                        .or(m.peer.map(|_| crate::site::Direction::GpuToGpu)),
                    src: records::memory_kind(m.src_kind.into()),
                    dst: records::memory_kind(m.dst_kind.into()),
                },
                stream: Some(m.stream.into()),
                device: self.device(m.device),
                src_device: m.peer.and_then(|p| self.device(p.src_device)),
                dst_device: m.peer.and_then(|p| self.device(p.dst_device)),
            },
            Raw::Memset(m) => Activity {
                name: Cow::Borrowed("memset"),
                interval: valid(m.start, m.end)?,
                kind: ActivityKind::Set { bytes: m.bytes },
                stream: Some(m.stream.into()),
                device: self.device(m.device),
                src_device: None,
                dst_device: None,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
