//! Queue brackets: a timestamp submitted before the call's work, and an end carried by each of
//! the call's own submissions, so that the bracket closes with its last one rather than at the
//! function's exit.
//!
//! (The probe's traits are major-independent, in `wgpu/scope.rs`.) In a queue-bracketed body
//! the macro rewrites each `RECV.submit(ARG)` into
//! `RECV.submit((&SubmitProbe(&RECV)).gpuspan_submit().with_end(ARG, &mut ENDS))`, where `ENDS`
//! is the scope in a sync body and the scope's [`BracketHandle`] in an async one (whose scope
//! lives in the future wrapping the body). When `RECV` is a wgpu queue, autoref specialization
//! picks [`SubmitQueue`] and the submission carries one more command buffer of gpuspan's: the
//! bracket's end timestamp. Any other receiver (a thread pool's `submit`, a type parameter)
//! picks `SubmitOther`, whose `with_end` returns `ARG` unchanged. So work the function does
//! after its last submission (mapping a read-back, waiting for it, copying out) is no longer
//! inside the bracket, and nothing is submitted at exit.
//!
//! The two timestamps go into slots of a batch shared with other brackets (`pool.rs`); the
//! batch is resolved and read back once, off the caller's thread.

use super::device::DeviceState;
use super::pool::{self, Slots};
use super::wgpu;
use crate::record::Record;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Marks a bracket closed in its shared count of an async body's submissions.
const CLOSED: u32 = u32::MAX;

/// The bracket part of an open scope.
pub(crate) struct Bracket {
    device: Arc<DeviceState>,
    queue: wgpu::Queue,
    slots: Slots,
    /// Submissions on `queue` that carried the end, made by a sync body.
    submits: u32,
    /// Those made through an async body's [`BracketHandle`], when one was handed out.
    shared: Option<Arc<AtomicU32>>,
    closed: bool,
    /// The device's submission number of the start timestamp, where wgpu tells it, and
    /// gpuspan's own submissions on it counted then.
    start_index: Option<u64>,
    own_at_start: u64,
    /// The end was written already ([`Bracket::end_for_span`]).
    ended: bool,
}

impl std::fmt::Debug for Bracket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bracket").field("device", &self.device.label).field("submits", &self.submits).finish()
    }
}

impl Bracket {
    /// Opens a bracket on `queue`: its start timestamp is submitted now, before the body's work.
    /// `None` when the device has too many brackets waiting (counted).
    pub(super) fn open(device: Arc<DeviceState>, queue: &wgpu::Queue) -> Option<Bracket> {
        let slots = pool::take(&device, queue)?;
        let mut encoder =
            device.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuspan begin") });
        slots.write_start(&mut encoder);
        device.own_submit(1);
        let start_index = submission_number(&queue.submit([encoder.finish()]));
        let own_at_start = device.own_submits.load(Ordering::Relaxed);
        Some(Bracket {
            device,
            queue: queue.clone(),
            slots,
            submits: 0,
            shared: None,
            closed: false,
            start_index,
            own_at_start,
            ended: false,
        })
    }

    /// A selected span's bracket as the span closes (`span_bracket`): its end is written now, at
    /// the exit, and the answer is whether the device took any other submission since the
    /// start other than gpuspan's own (anyone's: a bracket is queue-wide). `None` where wgpu
    /// does not number them. gpuspan's own are counted just before they are submitted, so one
    /// racing with the span's end may be taken for the program's or hide one of it (rare).
    pub(super) fn end_for_span(&mut self) -> Option<bool> {
        self.device.own_submit(1);
        let end = submission_number(&self.queue.submit([end_buffer(&self.device.device, &self.slots)]));
        let own = self.device.own_submits.load(Ordering::Relaxed).saturating_sub(self.own_at_start);
        self.ended = true;
        // Between the two: every submission but the end, less gpuspan's own but the end.
        let between = end?.checked_sub(self.start_index?)?.checked_sub(1)?;
        Some(between > own.saturating_sub(1))
    }

    /// The device whose queue this bracket is on.
    pub(super) fn device(&self) -> Arc<DeviceState> {
        self.device.clone()
    }

    /// The end-timestamp buffer a submission on `queue` carries, when it is the bracket's queue.
    pub(crate) fn end_at_submit(&mut self, queue: &wgpu::Queue) -> Option<wgpu::CommandBuffer> {
        if self.closed || &self.queue != queue {
            return None;
        }
        self.submits += 1;
        Some(end_buffer(&self.device.device, &self.slots))
    }

    /// A handle through which an async body's submissions carry the end.
    pub(crate) fn handle(&mut self) -> Shared {
        let submits = self.shared.get_or_insert_with(|| Arc::new(AtomicU32::new(0))).clone();
        Shared { device: self.device.device.clone(), queue: self.queue.clone(), slots: self.slots.clone(), submits }
    }

    /// The call ended: its record waits in the batch for the timestamps.
    pub(super) fn finish(mut self, record: Record) {
        self.close(Some(record), false);
    }

    /// An attached encoder times the call instead (`attach.rs`): the bracket writes its end and
    /// leaves its batch without a record, and that is no loss.
    pub(super) fn supersede(mut self) {
        self.close(None, true);
    }

    /// Ends the bracket; when no submission of the call carried the end, it is written now (at
    /// the function's exit, and labelled so).
    fn close(&mut self, record: Option<Record>, superseded: bool) {
        self.closed = true;
        let shared = self.shared.as_ref().map_or(0, |s| s.swap(CLOSED, Ordering::AcqRel));
        let at_exit = self.submits == 0 && shared == 0;
        if at_exit && !self.ended {
            self.device.own_submit(1);
            self.queue.submit([end_buffer(&self.device.device, &self.slots)]);
        }
        pool::finish(&self.device, &self.slots, pool::Timed::Bracket { at_exit }, record, superseded);
    }
}

impl Drop for Bracket {
    /// A bracket dropped without a record still writes its end: its batch resolves every slot
    /// it handed out.
    fn drop(&mut self) {
        if !self.closed {
            self.close(None, false);
        }
    }
}

/// A submission's number on its device (they count up by one per `submit`), read from its
/// `Debug` form: wgpu keeps the field private. `None` where that form says no number (a
/// backend without one, or another wgpu's wording).
fn submission_number(i: &wgpu::SubmissionIndex) -> Option<u64> {
    let text = format!("{i:?}");
    let digits = text.strip_prefix("SubmissionIndex { index: ")?.strip_suffix(" }")?;
    digits.parse().ok().filter(|n| *n > 0)
}

fn end_buffer(device: &wgpu::Device, slots: &Slots) -> wgpu::CommandBuffer {
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuspan end") });
    slots.write_end(&mut encoder);
    encoder.finish()
}

/// What an async body's handle on its bracket holds (the handle is `wgpu/scope.rs`'s
/// `BracketHandle`, of any major).
#[derive(Debug)]
pub(crate) struct Shared {
    device: wgpu::Device,
    queue: wgpu::Queue,
    slots: Slots,
    submits: Arc<AtomicU32>,
}

impl Shared {
    /// The end-timestamp buffer a submission on `queue` carries, when it is the bracket's queue
    /// and the bracket is still open (its scope was not dropped: a cancelled future).
    pub(crate) fn end_for(&self, queue: &wgpu::Queue) -> Option<wgpu::CommandBuffer> {
        if &self.queue != queue {
            return None;
        }
        self.submits.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n != CLOSED).then_some(n + 1)).ok()?;
        Some(end_buffer(&self.device, &self.slots))
    }
}
