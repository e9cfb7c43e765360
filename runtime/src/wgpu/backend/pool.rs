//! Queue brackets' timestamps, pooled per device (issue 16).
//!
//! A bracket costs what its two timestamps cost: a slot pair taken from a batch of query slots
//! made once and reused, one `write_timestamp` in the opening command buffer and one in each end
//! its call's submissions carry (`bracket.rs`). Nothing else is per call: no label, no query
//! pool lease, no resolve and no read-back mapping. Those happen per batch, on the resolver
//! thread: once a batch is closed to new brackets (full, or older than [`SEAL_AFTER_NS`] at a
//! resolver round, or at a flush), one command buffer resolves its slots and copies them into a
//! mappable buffer, which is mapped once; each record finished by then gets its own two
//! timestamps, exactly as a bracket of its own would have. Brackets still running (a long call,
//! an async function awaiting) are not waited for: they are delivered by a later round of the
//! same batch, which is reused once none is left.
//!
//! On a device without in-encoder timestamps (`Mode::Passes`) each timestamp is the start of an
//! empty compute pass instead of a `write_timestamp`, and a scope timed by its passes
//! (`passes.rs`) takes a slot pair here too, handing its record over once the user's passes
//! executed.
//!
//! A record is only resolved after its bracket's last end was submitted (its scope finished
//! before the round took it), so queue order puts the resolve after every write it reads. The
//! slots of brackets still running are resolved too and ignored: a slot never written reads as
//! 0 (wgpu clears those), one written in an earlier use of the batch keeps that value.

use super::{mapped_range, wgpu};
use super::device::DeviceState;
use super::instrument::ended::{self, EndedPass};
use crate::diagnostics::{note_once, Losses, losses};
use crate::collector;
use crate::record::{GpuTiming, Record, TimingSource};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Brackets per batch (two query slots each).
const PAIRS: u32 = 128;
/// A batch still taking brackets is closed to new ones at the first resolver round after it is
/// this old, so that a trickle of calls does not hold records back.
const SEAL_AFTER_NS: u64 = 1_000_000;
/// Batches a device may have between their first bracket and delivery; past this, brackets fall
/// back to host timing, counted.
const MAX_BATCHES: usize = 64;

const MAP_PENDING: u8 = 0;
const MAP_DONE: u8 = 1;
const MAP_FAILED: u8 = 2;

/// A batch's GPU objects, made once per batch in flight and reused.
struct Buffers {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
}

impl Buffers {
    fn new(device: &wgpu::Device) -> Buffers {
        let bytes = u64::from(2 * PAIRS) * u64::from(wgpu::QUERY_SIZE);
        Buffers {
            query_set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("gpuspan brackets"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * PAIRS,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gpuspan brackets resolve"),
                size: bytes,
                // COPY_DST: the timestamps of passes with their own writes are copied in.
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            read: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gpuspan brackets read"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        }
    }
}

/// One bracket's two query slots: its start at `2 * pair`, its end at `2 * pair + 1`.
#[derive(Debug, Clone)]
pub(crate) struct Slots {
    batch: u64,
    pair: u32,
    query_set: wgpu::QuerySet,
    /// The device has no `write_timestamp` (`Mode::Passes`): an empty compute pass writes each.
    at_passes: bool,
}

impl Slots {
    pub(super) fn write_start(&self, encoder: &mut wgpu::CommandEncoder) {
        write(encoder, &self.query_set, 2 * self.pair, self.at_passes);
    }

    /// Written again by each later submission of the call: the last one is what the resolve reads.
    pub(super) fn write_end(&self, encoder: &mut wgpu::CommandEncoder) {
        write(encoder, &self.query_set, 2 * self.pair + 1, self.at_passes);
    }

    /// The query set and the start and end slots, for passes' `timestamp_writes` (`passes.rs`).
    pub(super) fn pass_writes(&self) -> (&wgpu::QuerySet, u32, u32) {
        (&self.query_set, 2 * self.pair, 2 * self.pair + 1)
    }
}

/// Writes timestamp `index` of `set` at this point of `encoder`: `write_timestamp` where the
/// device has it, else the start of an empty compute pass (legal with `TIMESTAMP_QUERY` alone;
/// what calibration does too).
pub(super) fn write(encoder: &mut wgpu::CommandEncoder, set: &wgpu::QuerySet, index: u32, at_passes: bool) {
    if !at_passes {
        encoder.write_timestamp(set, index);
        return;
    }
    let _ = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some("gpuspan timestamp"),
        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
            query_set: set,
            beginning_of_pass_write_index: Some(index),
            end_of_pass_write_index: None,
        }),
    });
}

/// What a finished record's two timestamps measured.
#[derive(Debug, Clone)]
pub(super) enum Timed {
    /// A queue bracket, which closed at the function's exit (`at_exit`) or with its last
    /// submission.
    Bracket { at_exit: bool },
    /// The passes the call began, on a pass-level device: the first one's start, the last
    /// one's end (`passes.rs`).
    Passes,
}

/// What waits in a batch for its timestamps.
#[allow(clippy::large_enum_variant)] // moved once into its batch; a box would cost an allocation each
enum Finished {
    /// A scope's record, its slot pair, and what its two timestamps measured.
    Scope(u32, Timed, Record),
    /// Passes (or copies) of an instrumented device in this batch, as their encoder's callback
    /// handed them over (one entry for them all): each record is made at delivery, on the
    /// resolver thread, not on the thread that encoded it (`instrument/pass.rs`).
    Passes(Vec<TimedPass>),
}

/// A pass (or copy) of an instrumented device timed with a slot pair of a batch
/// (`instrument/pass.rs`): what waits in the batch until its timestamps are read.
#[derive(Debug)]
pub(crate) struct TimedPass {
    pub(crate) slots: Slots,
    pub(crate) pass: EndedPass,
}

struct Batch {
    id: u64,
    buffers: Buffers,
    /// The queue its brackets were opened on (a wgpu device has one): the resolve goes there.
    queue: wgpu::Queue,
    /// Slot pairs handed out, from 0.
    taken: u32,
    /// Brackets opened whose scope has not finished.
    open: u32,
    opened_at_ns: u64,
    /// Closed to new brackets.
    sealed: bool,
    /// Finished brackets and passes waiting for a round.
    records: Vec<Finished>,
    /// Those the round in flight reads back.
    resolving: Vec<Finished>,
    /// Set when a round's read-back was submitted; the map callback sets it done or failed.
    map: Option<Arc<AtomicU8>>,
    /// Pairs read from a pass's own timestamp writes (`take_foreign`): the pass's encoder
    /// resolves them into the buffer here, which each round copies over the pair's slots.
    foreign: Vec<(u32, wgpu::Buffer)>,
}

impl Batch {
    fn bytes(&self) -> u64 {
        u64::from(2 * self.taken) * u64::from(wgpu::QUERY_SIZE)
    }
}

/// A device's batches, in the order they were opened; the last one takes new brackets while it
/// is not sealed.
#[derive(Default)]
pub(crate) struct Pool {
    batches: Vec<Batch>,
    spare: Vec<Buffers>,
    next_id: u64,
}

impl Pool {
    /// Batches not yet delivered.
    pub(super) fn len(&self) -> usize {
        self.batches.len()
    }
}

/// Two slots for a bracket on `queue`; `None` (counted, said once) when the device has too many
/// batches waiting.
pub(super) fn take(d: &DeviceState, queue: &wgpu::Queue) -> Option<Slots> {
    take_chunk(d, queue, 1)?.next()
}

/// Slot pairs taken at once, for the passes of one encoder (`instrument/pass.rs`): one lock of
/// the pool per chunk instead of one per pass. Pairs not used are given back when the encoder is
/// done with it ([`give_back`]); until then they count as open in their batch, so that the batch
/// is not recycled while a pass may still write into it.
#[derive(Debug)]
pub(crate) struct Chunk {
    batch: u64,
    /// The next pair to hand out, and the end of the chunk's pairs.
    next: u32,
    end: u32,
    query_set: wgpu::QuerySet,
    at_passes: bool,
}

impl Chunk {
    /// The next unused slot pair.
    pub(crate) fn next(&mut self) -> Option<Slots> {
        if self.next == self.end {
            return None;
        }
        let pair = self.next;
        self.next += 1;
        Some(Slots { batch: self.batch, pair, query_set: self.query_set.clone(), at_passes: self.at_passes })
    }
}

/// Up to `pairs` slot pairs of the batch taking new brackets (fewer where it fills: the chunk
/// ends at the batch's end); `None` as [`take`].
pub(super) fn take_chunk(d: &DeviceState, queue: &wgpu::Queue, pairs: u32) -> Option<Chunk> {
    let mut pool = d.brackets.lock().ok()?;
    let opened = pool.batches.last().is_none_or(|b| b.sealed);
    if opened {
        if pool.batches.len() >= MAX_BATCHES {
            drop(pool);
            Losses::add(&losses().pending_frames, 1);
            note_once(format_args!(
                "more than {} wgpu queue brackets were waiting for their timestamps; later ones fall back to host timing",
                MAX_BATCHES as u32 * PAIRS
            ));
            return None;
        }
        let buffers = pool.spare.pop().unwrap_or_else(|| Buffers::new(&d.device));
        let id = pool.next_id;
        pool.next_id += 1;
        pool.batches.push(Batch {
            id,
            buffers,
            queue: queue.clone(),
            taken: 0,
            open: 0,
            opened_at_ns: crate::clock::now_ns(),
            sealed: false,
            records: Vec::new(),
            resolving: Vec::new(),
            map: None,
            foreign: Vec::new(),
        });
    }
    let b = pool.batches.last_mut()?;
    let first = b.taken;
    let n = pairs.clamp(1, PAIRS - first);
    b.taken += n;
    b.open += n;
    b.sealed = b.taken == PAIRS;
    let at_passes = d.mode == super::Mode::Passes;
    let chunk = Chunk { batch: b.id, next: first, end: first + n, query_set: b.buffers.query_set.clone(), at_passes };
    drop(pool);
    if opened {
        // The resolver comes back while the batch fills, to seal it when it is old enough.
        crate::resolver::wake();
    }
    Some(chunk)
}

/// The encoder is done with `chunk`: its unused pairs leave their batch (handed out again where
/// no later chunk was taken after them, else left as holes the resolve reads and nobody uses).
pub(super) fn give_back(d: &DeviceState, chunk: Chunk) {
    let unused = chunk.end - chunk.next;
    if unused == 0 {
        return;
    }
    let Ok(mut pool) = d.brackets.lock() else { return };
    let Some(b) = pool.batches.iter_mut().rev().find(|b| b.id == chunk.batch) else { return };
    b.open -= unused;
    if b.taken == chunk.end && b.map.is_none() {
        b.taken = chunk.next;
    }
    let sealed = b.sealed;
    drop(pool);
    if sealed {
        // It may have nothing left to deliver: the resolver recycles it.
        crate::resolver::wake();
    }
}

/// Where a pass's own timestamps (resolved by its encoder) are read from: a buffer with the
/// start at 0 and the end at [`FOREIGN_END`] (resolves land on 256-byte boundaries).
pub(super) const FOREIGN_END: u64 = wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT;

/// Two slots whose timestamps are not written by gpuspan but by a pass's own writes, resolved
/// into the returned buffer ([`FOREIGN_END`]) by the encoder the pass is in; `None` as [`take`].
pub(super) fn take_foreign(d: &DeviceState, queue: &wgpu::Queue) -> Option<(Slots, wgpu::Buffer)> {
    let slots = take(d, queue)?;
    let buffer = d.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpuspan pass writes"),
        size: FOREIGN_END + u64::from(wgpu::QUERY_SIZE),
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    if let Ok(mut pool) = d.brackets.lock() {
        if let Some(b) = pool.batches.iter_mut().find(|b| b.id == slots.batch) {
            b.foreign.push((slots.pair, buffer.clone()));
        }
    }
    Some((slots, buffer))
}

/// A bracket has written its last end: its record waits in its batch for the batch's
/// timestamps. None when the scope was dropped without one (counted as lost), or when an
/// attached encoder timed the call instead (`superseded`: not a loss).
pub(super) fn finish(d: &DeviceState, slots: &Slots, timed: Timed, record: Option<Record>, superseded: bool) {
    finished(d, slots, record.map(|r| Finished::Scope(slots.pair, timed, r)), !superseded);
}

/// Passes of an instrumented device were executed (an encoder's, in one callback, in the order
/// they took their slots): they wait in their batch for its timestamps, as one entry per batch,
/// and each record is made when they are read.
pub(super) fn finish_passes(d: &DeviceState, passes: Vec<TimedPass>) {
    let mut wake = false;
    let mut gone = Vec::new();
    let mut pool = d.brackets.lock().ok();
    let mut rest = passes;
    while !rest.is_empty() {
        let batch = rest[0].slots.batch;
        let n = rest.iter().take_while(|t| t.slots.batch == batch).count();
        let later = if n == rest.len() { Vec::new() } else { rest.split_off(n) };
        match pool.as_mut().and_then(|p| p.batches.iter_mut().rev().find(|b| b.id == batch)) {
            Some(b) => {
                b.open -= n as u32;
                wake |= b.sealed;
                b.records.push(Finished::Passes(rest));
            }
            None => gone.push(Finished::Passes(rest)),
        }
        rest = later;
    }
    drop(pool);
    given_up(gone, false);
    if wake {
        crate::resolver::wake();
    }
}

/// A slot pair's user is done: `waiting` for the batch's timestamps, or nothing; a scope that
/// leaves nothing (or whose batch is gone) is counted as lost where `count_loss`.
fn finished(d: &DeviceState, slots: &Slots, waiting: Option<Finished>, count_loss: bool) {
    let mut waiting = waiting;
    let filed = d.brackets.lock().ok().and_then(|mut pool| file(&mut pool, slots, &mut waiting, count_loss));
    match filed {
        // A closed batch is not polled for: a record finishing in one asks for a round.
        Some(true) => crate::resolver::wake(),
        Some(false) => {}
        None => given_up(waiting, count_loss),
    }
}

/// Files what is `waiting` (taking it) in its batch, and says whether the batch is sealed (so
/// that a round must be asked for); `None`, leaving it, where the batch is gone.
fn file(pool: &mut Pool, slots: &Slots, waiting: &mut Option<Finished>, count_loss: bool) -> Option<bool> {
    // The newest first: a pass ends in one of the last batches opened.
    let b = pool.batches.iter_mut().rev().find(|b| b.id == slots.batch)?;
    b.open -= 1;
    match waiting.take() {
        Some(w) => b.records.push(w),
        None if count_loss => Losses::add(&losses().unresolved_scopes, 1),
        None => {}
    }
    Some(b.sealed)
}

/// What could not wait for timestamps (only after a panic with the pool's lock held): it goes
/// on without GPU timing.
fn given_up(waiting: impl IntoIterator<Item = Finished>, count_loss: bool) {
    if count_loss {
        Losses::add(&losses().unresolved_scopes, 1);
    }
    for w in waiting {
        match w {
            Finished::Scope(_, _, r) => collector::submit(r),
            Finished::Passes(passes) => {
                for t in passes {
                    ended::resolved(t.pass, None);
                }
            }
        }
    }
}

/// Seals batches old enough (every one when `flush`), and submits a round for each sealed batch
/// with finished records and no round in flight; a sealed batch with nothing left to deliver is
/// recycled. Returns how many batches the resolver must come back for: filling ones (to seal
/// them) and those with records waiting or a round in flight.
pub(super) fn request(d: &DeviceState, flush: bool) -> usize {
    let Ok(mut guard) = d.brackets.lock() else { return 0 };
    let pool = &mut *guard;
    let now = crate::clock::now_ns();
    let mut submits = Vec::new();
    let mut waiting = 0;
    let mut spent = Vec::new();
    for (i, b) in pool.batches.iter_mut().enumerate() {
        if !b.sealed && (flush || now.saturating_sub(b.opened_at_ns) >= SEAL_AFTER_NS) {
            b.sealed = true;
        }
        if !b.sealed {
            waiting += 1;
            continue;
        }
        if b.map.is_some() {
            waiting += 1;
            continue;
        }
        if b.records.is_empty() {
            if b.open == 0 {
                spent.push(i); // every bracket delivered (or dropped without a record)
            }
            continue; // brackets still running: their finish asks for the next round
        }
        waiting += 1;
        b.resolving = std::mem::take(&mut b.records);
        let mut encoder =
            d.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuspan brackets") });
        encoder.resolve_query_set(&b.buffers.query_set, 0..2 * b.taken, &b.buffers.resolve, 0);
        let size = u64::from(wgpu::QUERY_SIZE);
        for (pair, own) in &b.foreign {
            let at = u64::from(2 * pair) * size;
            encoder.copy_buffer_to_buffer(own, 0, &b.buffers.resolve, at, size);
            encoder.copy_buffer_to_buffer(own, FOREIGN_END, &b.buffers.resolve, at + size, size);
        }
        encoder.copy_buffer_to_buffer(&b.buffers.resolve, 0, &b.buffers.read, 0, b.bytes());
        let flag = Arc::new(AtomicU8::new(MAP_PENDING));
        let set = flag.clone();
        encoder.map_buffer_on_submit(&b.buffers.read, wgpu::MapMode::Read, ..b.bytes(), move |r| {
            set.store(if r.is_ok() { MAP_DONE } else { MAP_FAILED }, Ordering::Release);
            crate::resolver::wake();
        });
        b.map = Some(flag);
        submits.push((b.queue.clone(), encoder.finish()));
    }
    for i in spent.into_iter().rev() {
        let b = pool.batches.remove(i);
        pool.spare.push(b.buffers);
    }
    // Outside the lock: calls opening brackets meanwhile never wait on a submission.
    drop(guard);
    for (queue, commands) in submits {
        d.own_submit(1);
        queue.submit([commands]);
    }
    waiting
}

/// Delivers the records of every round whose read-back is mapped: each with its own two
/// timestamps, placed on the host clock (a round whose mapping failed: without, counted).
pub(super) fn deliver(d: &Arc<DeviceState>) {
    let mut rounds = Vec::new();
    if let Ok(mut pool) = d.brackets.lock() {
        for b in &mut pool.batches {
            let Some(state) = b.map.as_ref().map(|m| m.load(Ordering::Acquire)) else { continue };
            if state == MAP_PENDING {
                continue;
            }
            let ticks = if state == MAP_DONE {
                let ticks = read_ticks(b);
                b.buffers.read.unmap();
                ticks
            } else {
                None
            };
            b.map = None;
            rounds.push((ticks, std::mem::take(&mut b.resolving)));
        }
    }
    let period = d.timestamp_period().map(f64::from);
    for (ticks, records) in rounds {
        let observed = crate::clock::now_ns();
        let clock = match (&ticks, d.clock()) {
            (Some(_), None) => d.calibrate().then(|| d.clock()).flatten(),
            (_, clock) => clock,
        };
        let stamps = |pair: u32| ticks.as_ref().map(|t| (t[2 * pair as usize], t[2 * pair as usize + 1]));
        let time = |record: &mut Record, pair: u32, timed: Option<&Timed>| match (stamps(pair), period, clock) {
            // A zero is a slot the resolve found unwritten (wgpu clears those).
            (Some((start, end)), Some(period), Some(clock)) if start > 0 && end > 0 => {
                let end = end.max(start);
                let (gpu, rounding) = to_ns(start, end, period);
                let placed = super::bounds::place_ns(d, gpu, rounding, record, observed, clock);
                let (source, bracketed, bracket_at_exit) = match timed {
                    Some(Timed::Bracket { at_exit }) => (placed.source, true, *at_exit),
                    Some(Timed::Passes) => (TimingSource::GpuPasses, false, false),
                    // A pass's own two timestamps.
                    None => (TimingSource::GpuTimestamp, false, false),
                };
                record.gpu = Some(GpuTiming {
                    // From the ticks' difference: exact where the instants are rounded.
                    busy_ns: ((end - start) as f64 * period).round() as u64,
                    source,
                    bracketed,
                    bracket_at_exit,
                    device: Some(d.label.clone()),
                    ..placed
                });
            }
            _ => Losses::add(&losses().unresolved_scopes, 1),
        };
        for waiting in records {
            match waiting {
                Finished::Scope(pair, timed, mut record) => {
                    time(&mut record, pair, Some(&timed));
                    collector::submit(record);
                }
                Finished::Passes(passes) => {
                    for t in passes {
                        let mut record = t.pass.record();
                        time(&mut record, t.slots.pair, None);
                        ended::resolved(t.pass, Some(record));
                    }
                }
            }
        }
    }
}

/// Two timestamps in GPU nanoseconds, and by how much each may be off: nothing with a period of
/// 1 ns (integer ticks), else the `f64` rounding of the product.
fn to_ns(start: u64, end: u64, period: f64) -> ((i128, i128), i128) {
    if period == 1.0 {
        return ((i128::from(start), i128::from(end)), 0);
    }
    let (s, e) = (start as f64 * period, end as f64 * period);
    ((s.round() as i128, e.round() as i128), super::bounds::rounding_ns(e / 1e9))
}

/// The batch's timestamps, two per bracket, from its mapped read-back buffer.
fn read_ticks(b: &Batch) -> Option<Vec<u64>> {
    let view = mapped_range(&b.buffers.read.slice(..b.bytes())).ok()?;
    Some(view.chunks_exact(8).map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect())
}
