//! Profiler frames: the queries of one outermost scope (and the scopes nested in it) on one
//! thread, from recording to delivery.
//!
//! wgpu-profiler maps a frame's read-back buffers in `end_frame`, which must come after the
//! commands holding the queries were submitted: mapping earlier would make the user's submit
//! fail. The user submits their own encoders, so gpuspan learns it from the encoder itself
//! (`on_submitted_work_done`) and ends the frame only then. Each frame gets its own
//! `GpuProfiler` (recycled with its query pools), so frames on different threads, or waiting on
//! different submissions, never block one another.
//!
//! Queue brackets are not frames: their timestamps are pooled per device (`pool.rs`).
//!
//! Life of a frame: Recording → AwaitingExecution → Mapping → Finished → delivered, or
//! Poisoned (a query could not be closed, commands never submitted) → delivered with host
//! timing only, the loss counted.

use super::{wgpu, wgpu_profiler};
use super::device::DeviceState;
use crate::diagnostics::{note_once, Losses, losses};
use crate::collector;
use crate::record::{GpuTiming, Record};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use wgpu_profiler::{GpuProfiler, GpuProfilerQuery, GpuProfilerSettings, GpuTimerQueryResult};

/// Frames a device may have between opening and delivery; past this, scopes fall back to host
/// timing and the fallback is counted.
pub(crate) const MAX_IN_FLIGHT: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Recording,
    /// Queries closed; waiting for the commands holding them to execute. When they were
    /// recorded in a pass, gpuspan resolves them in its own encoder afterwards.
    AwaitingExecution {
        resolve_ourselves: bool,
    },
    Mapping,
    Finished,
    Poisoned,
}

pub(crate) struct Frame {
    pub device: Arc<DeviceState>,
    profiler: Mutex<Option<GpuProfiler>>,
    state: Mutex<State>,
    executed: AtomicBool,
    abandoned: AtomicBool,
    /// Scopes begun in this frame whose record has not been attached yet.
    open_scopes: AtomicUsize,
    records: Mutex<Vec<Record>>,
    results: Mutex<HashMap<u64, Range<f64>>>,
    /// When the host first saw the frame's timestamps: no GPU work of it ended later.
    observed_ns: AtomicU64,
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame").field("device", &self.device.label).field("state", &self.state).finish_non_exhaustive()
    }
}

thread_local! {
    /// The frame each device is recording on this thread, and how deeply scopes are nested in it.
    static CURRENT: RefCell<Vec<(Arc<Frame>, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Sets `executed` when the user's commands ran, or `abandoned` when they were dropped unsubmitted.
struct ExecutedSignal {
    frame: Arc<Frame>,
    fired: bool,
}

impl ExecutedSignal {
    fn fire(mut self) {
        self.fired = true;
        self.frame.executed.store(true, Ordering::Release);
        crate::resolver::wake();
    }
}

impl Drop for ExecutedSignal {
    fn drop(&mut self) {
        if !self.fired {
            self.frame.abandoned.store(true, Ordering::Release);
            crate::resolver::wake();
        }
    }
}

impl Frame {
    /// The frame this thread is recording for `device`, or a new one; `None` when too many are
    /// in flight (counted), or in a thread-local destructor, where this thread's frames are gone
    /// (the scope is then timed on the host).
    pub(super) fn enter(device: &Arc<DeviceState>) -> Option<Arc<Frame>> {
        let current = CURRENT
            .try_with(|c| {
                let mut c = c.borrow_mut();
                c.iter_mut().find(|(f, _)| Arc::ptr_eq(&f.device, device)).map(|(f, depth)| {
                    *depth += 1;
                    f.clone()
                })
            })
            .ok()?;
        if current.is_some() {
            return current;
        }
        let frame = Self::open(device)?;
        if CURRENT.try_with(|c| c.borrow_mut().push((frame.clone(), 1))).is_err() {
            frame.abandon_unused();
            return None;
        }
        Some(frame)
    }

    /// A frame opened for a thread that can no longer record it: taken out of flight.
    fn abandon_unused(self: &Arc<Self>) {
        if let Ok(mut in_flight) = self.device.in_flight.lock() {
            in_flight.retain(|f| !Arc::ptr_eq(f, self));
        }
    }

    /// A new frame, on no thread's stack yet.
    fn open(device: &Arc<DeviceState>) -> Option<Arc<Frame>> {
        let mut in_flight = device.in_flight.lock().ok()?;
        if in_flight.len() >= MAX_IN_FLIGHT {
            Losses::add(&losses().pending_frames, 1);
            note_once(format_args!(
                "more than {MAX_IN_FLIGHT} wgpu query frames were waiting for their commands to be submitted; \
                 later scopes fall back to host timing (are encoders with annotated scopes being dropped unsubmitted?)"
            ));
            return None;
        }
        let reused = device.idle.lock().ok().and_then(|mut idle| idle.pop());
        let profiler = match reused {
            Some(p) => p,
            None => {
                // Debug groups off: gpuspan's queries add no markers to the user's commands.
                let settings = GpuProfilerSettings {
                    max_num_pending_frames: 1,
                    enable_debug_groups: false,
                    ..GpuProfilerSettings::default()
                };
                match GpuProfiler::new(&device.device, settings) {
                    Ok(p) => p,
                    Err(e) => {
                        note_once(format_args!("wgpu-profiler could not be created ({e}); timing wgpu on the host"));
                        return None;
                    }
                }
            }
        };
        let frame = Arc::new(Frame {
            device: device.clone(),
            profiler: Mutex::new(Some(profiler)),
            state: Mutex::new(State::Recording),
            executed: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            open_scopes: AtomicUsize::new(0),
            records: Mutex::new(Vec::new()),
            results: Mutex::new(HashMap::new()),
            observed_ns: AtomicU64::new(0),
        });
        in_flight.push(frame.clone());
        Some(frame)
    }

    /// An async scope's frame must not stay this thread's current frame while the scope is
    /// suspended: other scopes on this thread would join it, and the scope may resume on another
    /// thread. Returns `true` when the scope owns the frame (it was the outermost), and then the
    /// frame is no longer any thread's; `false` when the scope was nested in another's frame.
    pub(super) fn detach_from_thread(self: &Arc<Self>) -> bool {
        // Leaving the last nesting level takes the frame off this thread's stack.
        self.leave()
    }

    /// Leaves one nesting level on this thread; `true` when it was the outermost scope.
    fn leave(self: &Arc<Self>) -> bool {
        CURRENT
            .try_with(|c| {
                let mut c = c.borrow_mut();
                let Some(i) = c.iter().position(|(f, _)| Arc::ptr_eq(f, self)) else { return false };
                c[i].1 -= 1;
                if c[i].1 == 0 {
                    c.remove(i);
                    true
                } else {
                    false
                }
            })
            // In a thread-local destructor the thread's frame stack is gone: nothing nests this
            // frame any more.
            .unwrap_or(true)
    }

    /// Opens a query in `recorder` for the scope `scope_id`.
    pub(super) fn begin<R: super::Recorder>(&self, scope_id: u64, recorder: &mut R) -> Option<GpuProfilerQuery> {
        let profiler = self.profiler.lock().ok()?;
        let q = profiler.as_ref()?.begin_query(scope_id.to_string(), recorder);
        self.open_scopes.fetch_add(1, Ordering::AcqRel);
        Some(q)
    }

    /// Closes a query in the recorder it was opened in. At the outermost scope, arranges for
    /// the frame to be resolved once the recorder's commands have executed. `detached`: the
    /// frame already left its thread (`detach_from_thread`), `Some(true)` when this query owned it.
    pub(super) fn end_in_recorder<R: super::Recorder>(
        self: &Arc<Self>,
        query: GpuProfilerQuery,
        recorder: &mut R,
        detached: Option<bool>,
    ) {
        let Ok(mut profiler) = self.profiler.lock() else { return };
        let Some(p) = profiler.as_mut() else { return };
        p.end_query(recorder, query);
        let outermost = match detached {
            Some(owner) => owner,
            None => self.leave(),
        };
        if !outermost {
            return;
        }
        let resolve_ourselves = match recorder.as_encoder() {
            Some(encoder) => {
                p.resolve_queries(encoder);
                false
            }
            None => true,
        };
        drop(profiler);
        self.set_state_unless_poisoned(State::AwaitingExecution { resolve_ourselves });
        let signal = ExecutedSignal { frame: self.clone(), fired: false };
        recorder.when_executed(move || signal.fire());
    }

    /// A query that can no longer be closed (the function unwound, or left by an exit gpuspan
    /// could not see): the whole frame's timings are unusable.
    pub(super) fn abandon(self: &Arc<Self>, query: GpuProfilerQuery, detached: Option<bool>) {
        drop(query);
        if detached.is_none() {
            self.leave();
        }
        if let Ok(mut s) = self.state.lock() {
            *s = State::Poisoned;
        }
    }

    fn set_state_unless_poisoned(&self, next: State) {
        if let Ok(mut s) = self.state.lock() {
            if *s != State::Poisoned {
                *s = next;
            }
        }
    }

    /// Hands the record of a finished scope to the frame; it is delivered with the frame.
    pub(super) fn attach(&self, record: Record) {
        if let Ok(mut r) = self.records.lock() {
            r.push(record);
        }
        self.open_scopes.fetch_sub(1, Ordering::AcqRel);
        crate::resolver::wake();
    }

    /// A scope begun in this frame will never hand over its record.
    pub(super) fn forget_scope(&self) {
        self.open_scopes.fetch_sub(1, Ordering::AcqRel);
        crate::resolver::wake();
    }

    /// Moves the frame one step on, if it can. Returns `true` once delivered.
    pub(super) fn advance(self: &Arc<Self>) -> bool {
        let Ok(mut state) = self.state.lock() else { return false };
        if let State::AwaitingExecution { resolve_ourselves } = *state {
            if self.abandoned.load(Ordering::Acquire) && !self.executed.load(Ordering::Acquire) {
                *state = State::Poisoned;
            } else if self.executed.load(Ordering::Acquire) {
                *state = self.end_frame(resolve_ourselves);
            }
        }
        if *state == State::Mapping {
            let finished = self.profiler.lock().ok().and_then(|mut p| {
                let period = self.device.timestamp_period()?;
                p.as_mut()?.process_finished_frame(period)
            });
            if let Some(results) = finished {
                self.observed_ns.store(crate::clock::now_ns(), Ordering::Release);
                if let Ok(mut map) = self.results.lock() {
                    flatten(&results, &mut map);
                }
                *state = State::Finished;
            }
        }
        let deliverable = matches!(*state, State::Finished | State::Poisoned);
        if !deliverable || self.open_scopes.load(Ordering::Acquire) > 0 {
            return false;
        }
        let poisoned = *state == State::Poisoned;
        // Without a clock mapping the GPU intervals cannot be placed on the host's timeline:
        // those records keep their host timing and count as unresolved.
        let unplaceable = !poisoned && self.device.clock().is_none() && !self.device.calibrate();
        self.deliver(poisoned || unplaceable);
        true
    }

    fn end_frame(&self, resolve_ourselves: bool) -> State {
        let Ok(mut profiler) = self.profiler.lock() else { return State::Poisoned };
        let Some(p) = profiler.as_mut() else { return State::Poisoned };
        if resolve_ourselves {
            let Some(queue) = self.device.queue.get() else {
                note_once("wgpu queries recorded in a pass need the queue to resolve them: call gpuspan::wgpu::register(&adapter, &device, &queue)");
                return State::Poisoned;
            };
            let mut encoder = self
                .device
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuspan resolve") });
            p.resolve_queries(&mut encoder);
            self.device.own_submit(1);
            queue.submit([encoder.finish()]);
        }
        match p.end_frame() {
            Ok(()) => State::Mapping,
            Err(e) => {
                note_once(format_args!("a wgpu query frame could not be ended: {e}"));
                State::Poisoned
            }
        }
    }

    fn deliver(self: &Arc<Self>, poisoned: bool) {
        let records = self.records.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
        let results = self.results.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
        let clock = self.device.clock();
        let observed = self.observed_ns.load(Ordering::Acquire);
        for mut record in records {
            match (results.get(&record.scope_id), clock) {
                (Some(range), Some(clock)) if !poisoned => {
                    let placed = super::bounds::place(&self.device, range, &record, observed, clock);
                    record.gpu = Some(GpuTiming { device: Some(self.device.label.clone()), ..placed });
                }
                _ => Losses::add(&losses().unresolved_scopes, 1),
            }
            collector::submit(record);
        }
        let profiler = self.profiler.lock().ok().and_then(|mut p| p.take());
        if let (Some(p), false) = (profiler, poisoned) {
            if let Ok(mut idle) = self.device.idle.lock() {
                idle.push(p);
            }
        }
        if let Ok(mut in_flight) = self.device.in_flight.lock() {
            in_flight.retain(|f| !Arc::ptr_eq(f, self));
        }
    }

    /// Still waiting on the GPU (not on an open scope).
    pub(super) fn is_pending(&self) -> bool {
        self.state.lock().is_ok_and(|s| *s != State::Recording)
    }
}

/// Query results by scope id (wgpu-profiler labels are the scope ids). Should an id label
/// several queries, its interval spans them all.
fn flatten(results: &[GpuTimerQueryResult], out: &mut HashMap<u64, Range<f64>>) {
    for r in results {
        if let (Ok(id), Some(time)) = (r.label.parse::<u64>(), &r.time) {
            let merged = match out.get(&id) {
                Some(seen) => seen.start.min(time.start)..seen.end.max(time.end),
                None => time.clone(),
            };
            out.insert(id, merged);
        }
        flatten(&r.nested_queries, out);
    }
}
