//! Timing each pass an instrumented encoder begins: a slot pair from the device's bracket
//! batches (`pool.rs`) as the pass's `timestamp_writes` (the pass-level mechanism of decision 52,
//! so `TIMESTAMP_QUERY` alone is enough), resolved with the batch once the pass's commands have
//! executed. The pass is then an activity of the scope that owns it (`wgpu/pass_sum.rs`), or a
//! record of its own, `unattributed`.
//!
//! A copy or clear the encoder records between passes is timed the same way where the device
//! has in-encoder timestamps: the slot pair written with `write_timestamp` just before and after
//! it, so its time (and the bandwidth from it) is its own. It is a copy activity with its bytes.
//!
//! The thread that encodes pays for little more than the timestamp writes (issue 41): a pass
//! keeps the facts it was begun with, the encoder keeps its ended passes (`EncoderPasses`) and
//! hands them over in one callback when its command buffer has executed, and each pass's record
//! is made where its timestamps are read, on the resolver thread (`EndedPass::record`). The
//! encoder takes its passes' slot pairs a chunk at a time (`pool::Chunk`: one lock of the
//! device's pool per chunk, not per pass) and keeps its last pass's label, so that a frame's
//! repeated labels cost no lookup (decision 67).

use super::super::device::DeviceState;
use super::super::pool::{self, Chunk, Slots, Timed, TimedPass};
use super::ended::EndedPass;
use super::super::{attach, Mode};
use super::{wgpu, Shared};
use crate::diagnostics::note_once;
use crate::record::{ActivityKind, KernelGeometry};
use crate::wgpu::pass_sum::{self, Owner};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

/// One pass being recorded.
#[derive(Debug)]
pub(crate) struct PassTimer {
    slots: Slots,
    /// The pass keeps its own timestamp writes: they are copied into `slots` (`OwnWrites`).
    own: bool,
    pass: EndedPass,
}

impl PassTimer {
    /// A pass is begun in an encoder of the instrumented device: `None` when it is not timed
    /// apart (its scope is timed by other means, the device has no timestamps, or too many
    /// batches are waiting).
    pub(crate) fn begin(
        shared: &Shared,
        encoder: &EncoderPasses,
        label: Option<&str>,
        encoder_label: Option<&Arc<str>>,
        index: u32,
        user_writes: Option<(&wgpu::QuerySet, Option<u32>, Option<u32>)>,
        reads: &Mutex<Vec<OwnWrites>>,
    ) -> Option<PassTimer> {
        let device = &shared.state;
        if device.mode == Mode::Host {
            return None;
        }
        let (owner, during) = match pass_sum::owner(attach::claim_for_pass) {
            Owner::Timed => return None,
            Owner::Scope(sum) => (Some(sum), None),
            Owner::Nobody => (None, None),
            Owner::Several(names) => (None, Some(names)),
        };
        let (slots, own, label) = match user_writes {
            None => {
                let (slots, label) = encoder.take(shared, label)?;
                (slots, false, label)
            }
            // The pass keeps its own writes, and is read from them.
            Some((set, Some(start), Some(end))) => {
                let (slots, buffer) = pool::take_foreign(device, &shared.queue)?;
                lock(reads).push(OwnWrites { set: set.clone(), start, end, buffer });
                (slots, true, label.map(|l| shared.labels.get(l)))
            }
            Some(_) => {
                note_once(format_args!(
                    "a pass on an instrumented wgpu device writes only one of its own start and end timestamps: \
                     gpuspan leaves them as they are and does not time that pass"
                ));
                return None;
            }
        };
        if let Some(sum) = &owner {
            sum.pass_begun();
        }
        let (thread, _) = crate::thread::next_scope();
        let pass = EndedPass {
            device: device.label.clone(),
            census: owner.is_none() && during.is_none() && crate::span_scopes::start_census(),
            owner,
            during,
            label,
            encoder_label: encoder_label.cloned(),
            index,
            pipeline: None,
            thread,
            begun_ns: crate::clock::now_ns(),
            ended_ns: 0,
            kind: ActivityKind::Kernel(KernelGeometry::default()),
            command: None,
        };
        Some(PassTimer { slots, own, pass })
    }

    /// A copy or clear (`command`, of `kind`: its bytes) is recorded in an encoder of the
    /// instrumented device: timed by `write_timestamp`s around it, so only where the device has
    /// in-encoder timestamps. `None`: not timed apart (no such timestamps, its scope is timed by
    /// other means, or too many batches are waiting); the caller counts its bytes.
    pub(crate) fn begin_copy(
        shared: &Shared,
        encoder: &EncoderPasses,
        command: &'static str,
        kind: ActivityKind,
    ) -> Option<PassTimer> {
        let device = &shared.state;
        if device.mode != Mode::InEncoders {
            return None;
        }
        let (owner, during) = match pass_sum::owner(attach::claim_for_pass) {
            Owner::Timed => return None,
            Owner::Scope(sum) => (Some(sum), None),
            Owner::Nobody => (None, None),
            Owner::Several(names) => (None, Some(names)),
        };
        let (slots, _) = encoder.take(shared, None)?;
        if let Some(sum) = &owner {
            sum.pass_begun();
        }
        let (thread, _) = crate::thread::next_scope();
        let pass = EndedPass {
            device: device.label.clone(),
            census: owner.is_none() && during.is_none() && crate::span_scopes::start_census(),
            owner,
            during,
            label: None,
            encoder_label: None,
            index: 0,
            pipeline: None,
            thread,
            begun_ns: crate::clock::now_ns(),
            ended_ns: 0,
            kind,
            command: Some(command),
        };
        Some(PassTimer { slots, own: false, pass })
    }

    /// Records `copy` between the copy's two timestamps, then ends it (into `ended`, the
    /// encoder's).
    pub(crate) fn time_copy(
        self,
        encoder: &mut wgpu::CommandEncoder,
        ended: &EncoderPasses,
        copy: impl FnOnce(&mut wgpu::CommandEncoder),
    ) {
        self.slots.write_start(encoder);
        copy(encoder);
        self.slots.write_end(encoder);
        if let Some(not_kept) = ended.keep(self) {
            not_kept.end_alone(ended.device.clone(), |f| encoder.on_submitted_work_done(f));
        }
    }

    /// What waits in its batch for its timestamps.
    pub(crate) fn into_timed(self) -> TimedPass {
        TimedPass { slots: self.slots, pass: self.pass }
    }

    /// gpuspan's writes for the pass: the query set, its start and end slots.
    pub(crate) fn writes(&self) -> Option<(wgpu::QuerySet, u32, u32)> {
        if self.own {
            return None;
        }
        let (set, start, end) = self.slots.pass_writes();
        Some((set.clone(), start, end))
    }

    /// The pass ended after its encoder was finished (wgpu reports that misuse itself): it
    /// waits for its commands on its own (`when_executed` runs its callback then, or drops it
    /// unrun if they never are).
    fn end_alone(self, device: Arc<DeviceState>, when_executed: impl FnOnce(Box<dyn FnOnce() + Send>)) {
        let pending = Pending { device, passes: vec![self] };
        when_executed(Box::new(move || pending.executed()));
    }
}

/// The passes and copies an encoder recorded and ended, until it is finished: then they wait
/// for its command buffer to execute, all in one callback (`take_pending`), not one each. It
/// also holds what the encoder's passes take per pass without the device's locks: slot pairs
/// (a chunk) and the last label.
#[derive(Debug)]
pub(crate) struct EncoderPasses {
    device: Arc<DeviceState>,
    kept: Mutex<Kept>,
}

/// Slot pairs in an encoder's first chunk; each later chunk takes twice the last, up to
/// [`MAX_CHUNK`]: an encoder of one pass takes one pair (one lock, as before chunks), a frame of
/// a hundred passes seven chunks.
const FIRST_CHUNK: u32 = 1;
/// Passes an encoder makes room for at its first, at most (the last finished encoder's count).
const MAX_RESERVED: u32 = 1024;
/// Pairs in the largest chunk: at most this many less one are left unused in a batch by an
/// encoder that finishes (given back, or holes where another encoder took pairs after them).
const MAX_CHUNK: u32 = 32;

/// An encoder's own state, behind its (uncontended) lock.
#[derive(Debug)]
struct Kept {
    /// The encoder finished: passes ending later wait on their own.
    finished: bool,
    /// Its passes that ended before it finished.
    passes: Vec<PassTimer>,
    /// Slot pairs taken for its next passes.
    chunk: Option<Chunk>,
    /// Pairs the next chunk takes.
    next_chunk: u32,
    /// Its last pass's label, as the device's labels hold it.
    last_label: Option<Arc<str>>,
}

impl EncoderPasses {
    pub(crate) fn new(device: Arc<DeviceState>) -> EncoderPasses {
        let kept = Kept { finished: false, passes: Vec::new(), chunk: None, next_chunk: FIRST_CHUNK, last_label: None };
        EncoderPasses { device, kept: Mutex::new(kept) }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        lock(&self.kept)
    }

    /// A slot pair for a pass or copy beginning in the encoder, from its chunk (a new chunk
    /// when it is used up; `None` as `pool::take`), and the pass's `label` as the device's
    /// labels hold it (the last one again without a lookup).
    fn take(&self, shared: &Shared, label: Option<&str>) -> Option<(Slots, Option<Arc<str>>)> {
        let mut kept = self.lock();
        let slots = match kept.chunk.as_mut().and_then(Chunk::next) {
            Some(slots) => slots,
            None => {
                if kept.chunk.is_none() {
                    // The encoder's first pass: room for as many as the last encoder finished
                    // had, so that a frame's passes are not moved as its list grows.
                    let hint = shared.passes_per_encoder.load(Ordering::Relaxed).min(MAX_RESERVED);
                    kept.passes.reserve(hint as usize);
                }
                // The encoder's lock, then the pool's: nothing takes them the other way round.
                let mut chunk = pool::take_chunk(&shared.state, &shared.queue, kept.next_chunk)?;
                kept.next_chunk = (kept.next_chunk * 2).min(MAX_CHUNK);
                let slots = chunk.next()?;
                // The chunk it replaces is used up: nothing to give back.
                kept.chunk = Some(chunk);
                slots
            }
        };
        let label = label.map(|l| match &kept.last_label {
            Some(last) if **last == *l => last.clone(),
            _ => {
                let shared_label = shared.labels.get(l);
                kept.last_label = Some(shared_label.clone());
                shared_label
            }
        });
        Some((slots, label))
    }

    /// `timer`'s pass ended: kept until the encoder finishes, or given back if it already did.
    fn keep(&self, mut timer: PassTimer) -> Option<PassTimer> {
        timer.pass.ended_ns = crate::clock::now_ns();
        let mut kept = self.lock();
        if kept.finished {
            return Some(timer);
        }
        kept.passes.push(timer);
        None
    }

    /// The encoder finishes: what its passes wait for, to be run once its command buffer has
    /// executed (or dropped unrun if it never is). Its unused slot pairs go back to the pool.
    pub(crate) fn take_pending(&self, shared: &Shared) -> Option<Pending> {
        let (passes, chunk) = {
            let mut kept = self.lock();
            kept.finished = true;
            (std::mem::take(&mut kept.passes), kept.chunk.take())
        };
        if !passes.is_empty() {
            shared.passes_per_encoder.store(passes.len() as u32, Ordering::Relaxed);
        }
        if let Some(chunk) = chunk {
            pool::give_back(&self.device, chunk);
        }
        (!passes.is_empty()).then(|| Pending { device: self.device.clone(), passes })
    }
}

impl Drop for EncoderPasses {
    /// The encoder was dropped without finishing: its passes never execute (their slot pairs
    /// leave their batches, their owners stop waiting, as for a command buffer never submitted),
    /// and its unused slot pairs go back.
    fn drop(&mut self) {
        let kept = self.kept.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(chunk) = kept.chunk.take() {
            pool::give_back(&self.device, chunk);
        }
        let passes = std::mem::take(&mut kept.passes);
        drop(Pending { device: self.device.clone(), passes });
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Per-device labels of passes, shared, so that a frame's passes do not each copy theirs.
#[derive(Debug, Default)]
pub(crate) struct Labels(Mutex<HashSet<Arc<str>>>);

/// Distinct labels kept; past this, each pass copies its own.
const MAX_LABELS: usize = 4096;

impl Labels {
    fn get(&self, label: &str) -> Arc<str> {
        let mut known = lock(&self.0);
        if let Some(l) = known.get(label) {
            return l.clone();
        }
        let l: Arc<str> = Arc::from(label);
        if known.len() < MAX_LABELS {
            known.insert(l.clone());
        }
        l
    }
}

/// A pass that keeps its own timestamp writes: its encoder resolves them into `buffer` when it
/// is finished, and the batch reads them from there (`pool::take_foreign`).
#[derive(Debug)]
pub(crate) struct OwnWrites {
    set: wgpu::QuerySet,
    start: u32,
    end: u32,
    buffer: wgpu::Buffer,
}

impl OwnWrites {
    /// Encoded as the encoder finishes, after the pass.
    pub(crate) fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.set, self.start..self.start + 1, &self.buffer, 0);
        encoder.resolve_query_set(&self.set, self.end..self.end + 1, &self.buffer, pool::FOREIGN_END);
    }
}

/// Passes of one device whose commands are waiting to execute.
#[derive(Debug)]
pub(crate) struct Pending {
    device: Arc<DeviceState>,
    passes: Vec<PassTimer>,
}

impl Pending {
    /// Their commands executed: each waits in its batch for its timestamps.
    pub(crate) fn executed(mut self) {
        pool::finish_passes(&self.device, std::mem::take(&mut self.passes).into_iter().map(PassTimer::into_timed).collect());
    }
}

impl Drop for Pending {
    /// Never executed (the encoder was dropped, or its command buffer never submitted): the
    /// slot pairs leave their batches, the owners stop waiting.
    fn drop(&mut self) {
        for t in self.passes.drain(..) {
            pool::finish(&self.device, &t.slots, Timed::Passes, None, false);
            if let Some(o) = t.pass.owner {
                let _nothing_given_back = o.pass_done(None);
            }
        }
    }
}

/// The recording of one pass, as its pass object holds it.
#[derive(Debug)]
pub(crate) struct Recording(Option<PassTimer>);

impl Recording {
    pub(crate) fn new(timer: Option<PassTimer>) -> Recording {
        Recording(timer)
    }

    /// A pipeline was set in the pass: the first one names a pass without a label.
    pub(crate) fn pipeline(&mut self, label: Option<&Arc<str>>) {
        if let Some(t) = &mut self.0 {
            if t.pass.pipeline.is_none() {
                t.pass.pipeline = label.cloned();
            }
        }
    }

    /// The pass ends: it waits with its encoder's other passes (`ended`), or on its own where
    /// the encoder was already finished (`when_executed`).
    pub(crate) fn end(&mut self, ended: &EncoderPasses, when_executed: impl FnOnce(Box<dyn FnOnce() + Send>)) {
        if let Some(not_kept) = self.0.take().and_then(|t| ended.keep(t)) {
            not_kept.end_alone(ended.device.clone(), when_executed);
        }
    }
}
