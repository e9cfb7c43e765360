//! Pass-level timing: a device with `TIMESTAMP_QUERY` but not `TIMESTAMP_QUERY_INSIDE_ENCODERS`
//! (Metal, WebGPU in browsers) writes timestamps only at the start and end of a pass, through
//! the pass descriptor's `timestamp_writes` (as wgpu-profiler's `scoped_compute_pass` does).
//!
//! A scope that times an encoder (an encoder parameter, or an `attach` guard) on such a device
//! takes one slot pair from the device's bracket batches (`pool.rs`) and offers it to the passes
//! its body begins: the macro rewrites `RECV.begin_compute_pass(ARG)` and
//! `RECV.begin_render_pass(ARG)` in the body so that the descriptor goes through
//! [`crate::__private::wgpu_pass`], which finds the innermost scope's [`Target`] on this
//! thread's `attach` stack (`attach.rs`). The first pass writes the start, every pass the end, so
//! the record is the union of the passes: the first one's start to the last one's end, labelled
//! `gpu_passes`. A pass whose descriptor already has the user's `timestamp_writes` keeps them, and
//! the call is then timed on the host, with that reason.
//!
//! The user submits the encoder, so the record waits for its commands to have executed
//! (`on_submitted_work_done`) before it joins its batch: a batch is resolved only after every
//! write it reads, and recycled only once no pass can still write into it.

use super::device::DeviceState;
use super::pool::{self, Slots, Timed};
use super::{wgpu, Recorder};
use crate::diagnostics::{losses, Losses};
use crate::collector;
use crate::record::Record;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Why a call on a pass-level device was timed on the host although it timed an encoder.
const OWN_WRITES: &str = "a pass it began has its own timestamp_writes, which gpuspan leaves as they are";
const NO_PASS: &str = "pass-level device (no TIMESTAMP_QUERY_INSIDE_ENCODERS): the call began no pass";

/// The pass part of an open scope.
pub(crate) struct PassScope {
    device: Arc<DeviceState>,
    target: Target,
    /// The recorder's execution is being watched (`end_in_recorder` ran).
    watched: bool,
}

impl std::fmt::Debug for PassScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassScope")
            .field("device", &self.device.label)
            .field("passes", &self.target.shared.passes.load(Ordering::Relaxed))
            .finish()
    }
}

/// Where the passes of a scope get their timestamp writes: its slot pair.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    slots: Slots,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Passes given gpuspan's writes.
    passes: AtomicU32,
    /// A pass had the user's own writes.
    own_writes: AtomicBool,
    /// No pass gets writes any more: the scope (or its guard) ended.
    closed: AtomicBool,
    meet: Mutex<Meet>,
}

/// The two events a record waits for, in either order: the scope finished (with its record, or
/// without one: forgotten), and the recorder's commands executed (or were dropped unsubmitted).
#[derive(Debug, Default)]
struct Meet {
    executed: Option<bool>,
    finished: Option<Option<Record>>,
}

// Passed once by value to `meet`, never stored: boxing the record would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Event {
    Executed(bool),
    Finished(Option<Record>),
}

impl Target {
    /// The writes for a pass being begun: `(query set, start slot for the first pass, end
    /// slot)`; `None` when the pass keeps its descriptor as it is (the scope ended, or the user
    /// wrote their own, which makes the call host-timed).
    pub(crate) fn writes(&self, user_has_writes: bool) -> Option<(wgpu::QuerySet, Option<u32>, u32)> {
        if self.shared.closed.load(Ordering::Acquire) {
            return None;
        }
        if user_has_writes {
            self.shared.own_writes.store(true, Ordering::Release);
            return None;
        }
        let n = self.shared.passes.fetch_add(1, Ordering::AcqRel);
        let (set, start, end) = self.slots.pass_writes();
        Some((set.clone(), (n == 0).then_some(start), end))
    }
}

impl PassScope {
    /// A scope on a pass-level device: a slot pair for its passes. `None` when the device has
    /// too many brackets waiting (counted).
    pub(super) fn open(device: Arc<DeviceState>, queue: &wgpu::Queue) -> Option<PassScope> {
        let slots = pool::take(&device, queue)?;
        Some(PassScope { device, target: Target { slots, shared: Arc::default() }, watched: false })
    }

    pub(crate) fn target(&self) -> Target {
        self.target.clone()
    }

    /// The scope (or its guard) leaves the recorder: no later pass is timed, and the record
    /// will wait for the recorder's commands to execute.
    pub(super) fn end_in_recorder<R: Recorder>(&mut self, recorder: &mut R) {
        self.target.shared.closed.store(true, Ordering::Release);
        if self.watched || self.target.shared.passes.load(Ordering::Acquire) == 0 {
            return;
        }
        self.watched = true;
        let signal = Executed { device: self.device.clone(), target: self.target.clone(), fired: false };
        recorder.when_executed(move || signal.fire());
    }

    /// The call ended with `record`: it joins the batch once the passes executed, or goes on
    /// with host timing (and the reason).
    pub(super) fn finish(self, record: Record) {
        self.close(Some(record));
    }

    /// A measurement no scope will collect: its slot pair is released once its passes executed.
    pub(super) fn forget(self) {
        self.close(None);
    }

    fn close(self, record: Option<Record>) {
        self.target.shared.closed.store(true, Ordering::Release);
        if !self.watched {
            // No pass got writes, or the scope unwound before leaving its recorder (its passes'
            // writes, if ever submitted, are not waited for: counted as lost).
            let none = self.target.shared.passes.load(Ordering::Acquire) == 0;
            meet(&self.device, &self.target, Event::Executed(none));
        }
        meet(&self.device, &self.target, Event::Finished(record));
    }
}

/// One of the two events happened: once both have, the record is delivered and the slot pair
/// released.
fn meet(device: &DeviceState, target: &Target, event: Event) {
    let shared = &target.shared;
    let (executed, record) = {
        let Ok(mut m) = shared.meet.lock() else { return };
        match event {
            Event::Executed(e) => m.executed = Some(e),
            Event::Finished(r) => m.finished = Some(r),
        }
        match (m.executed, m.finished.is_some()) {
            (Some(e), true) => (e, m.finished.take().flatten()),
            _ => return,
        }
    };
    let passes = shared.passes.load(Ordering::Acquire);
    let own = shared.own_writes.load(Ordering::Acquire);
    let Some(record) = record else {
        // Forgotten: the slot pair leaves its batch.
        pool::finish(device, &target.slots, Timed::Passes, None, true);
        return;
    };
    match (passes, own, executed) {
        (1.., false, true) => pool::finish(device, &target.slots, Timed::Passes, Some(record), false),
        (0, _, _) | (_, true, _) => {
            record.site.timed_on_host(if own { OWN_WRITES } else { NO_PASS });
            pool::finish(device, &target.slots, Timed::Passes, None, true);
            collector::submit(record);
        }
        (_, false, false) => {
            // The encoder was dropped unsubmitted: its passes' timestamps never came.
            pool::finish(device, &target.slots, Timed::Passes, None, true);
            Losses::add(&losses().unresolved_scopes, 1);
            collector::submit(record);
        }
    }
}

/// Tells the scope that its recorder's commands executed, or (dropped unrun) never will.
struct Executed {
    device: Arc<DeviceState>,
    target: Target,
    fired: bool,
}

impl Executed {
    fn fire(mut self) {
        self.fired = true;
        meet(&self.device, &self.target, Event::Executed(true));
    }
}

impl Drop for Executed {
    fn drop(&mut self) {
        if !self.fired {
            meet(&self.device, &self.target, Event::Executed(false));
        }
    }
}
