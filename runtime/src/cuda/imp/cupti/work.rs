//! CUPTI's pending work for the one resolver (`crate::resolver`): a poll and a flush both
//! drain the threads' queues of ended scopes and the channel under the live state's lock (decoding returned buffers and attributing
//! them), and hand resolved records to the pipeline after releasing it.

use super::dump::Frame;
use super::records::Raw;
use super::thread_index::Window;
use super::{buffers, clock, dump, records, state, window, Live, Msg};
use crate::collector;
use crate::diagnostics::note_once;
use crate::record::Record;
use crate::resolver::{PendingWork, Progress};
use crate::scope::Call;
use cudarc::cupti::sys;
use std::ffi::{c_char, CStr};
use std::io::Write;
use std::time::{Duration, Instant};

impl Live {
    /// A scope ended: its record is built here, off the caller's thread.
    fn ended(&mut self, call: Call, fence: u64, window: Option<Window>) {
        // A selected span's entry on one thread: a window of its scope, no record (its own end
        // is on the host clock, so has no window: `window::close_span`).
        if let (true, Some(w)) = (call.site.is_span(), window) {
            self.write(Frame::SpanWindow { scope_id: call.scope_id, fence, window: w });
            self.resolver.span_window(call.scope_id, fence, w);
            return;
        }
        let record = if call.on_own_clock {
            let (start_ns, end_ns) = (clock::window_to_host(call.host_start), clock::window_to_host(call.host_end));
            call.into_record_at(crate::record::Interval { start_ns, end_ns })
        } else {
            call.into_record()
        };
        if let (Some(w), true) = (window, self.dump.is_some()) {
            self.write(Frame::Window { scope_id: record.scope_id, window: w });
        }
        if self.dump.is_some() {
            let site = record.site.desc.name.to_owned();
            self.write(Frame::Ended { scope_id: record.scope_id, fence, host_ns: crate::clock::now_ns(), site });
        }
        self.resolver.ended_in(record, fence, window);
    }

    /// Takes everything the threads' queues and the channel hold; returns resolved records and
    /// whether any scope ended since the last drain.
    fn drain(&mut self) -> (Vec<Record>, bool) {
        let calibration = self.resolver.calibrate(clock::mapping);
        if self.dump.is_some() && self.dumped_clock != Some(calibration) {
            self.dumped_clock = Some(calibration);
            let offset_ns = i64::try_from(calibration.offset_ns).unwrap_or(i64::MAX);
            self.write(Frame::Clock { offset_ns, error_ns: calibration.error_ns, taken_ns: calibration.taken_at_ns });
        }
        // Before the queues: a window that closed before this was pushed before it.
        let threads = window::snapshot();
        // The queues before the channel: a scope that reaches the channel (its thread's queue
        // is gone) ended after everything in its queue.
        let any_ended = window::drain(|call, fence, window| self.ended(call, fence, window)) > 0;
        let mut dropped = 0;
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Msg::Requested(seq) => {
                    self.resolver.requested(seq);
                    self.write(Frame::Requested { seq });
                }
                Msg::Dropped(n) => dropped += n,
                Msg::Note(text) => self.write(Frame::Note { host_ns: crate::clock::now_ns(), text }),
                Msg::Ended(call, fence, window) => self.ended(call, fence, window),
                Msg::Buffer { base, valid } => {
                    // SAFETY: a live buffer from `requested`, returned by CUPTI with `valid` bytes.
                    let seq = unsafe { *(base as *const u64) };
                    let data = (base as *mut u64).wrapping_add(buffers::HEADER_WORDS) as *mut u8;
                    let offs = buffers::offsets(data, valid);
                    // SAFETY: CUPTI wrote `valid` bytes at `data`.
                    let bytes = unsafe { std::slice::from_raw_parts(data, valid) };
                    let mut raws = Vec::with_capacity(offs.len());
                    let mut bad = None;
                    for rec in dump::records(&offs, bytes) {
                        match records::parse(rec) {
                            Ok(r) => raws.push(r),
                            Err(e) => bad = Some(e),
                        }
                    }
                    if let Some(e) = bad {
                        note_once(e);
                    }
                    let mut name = |ptr: u64| {
                        // SAFETY: kernel name pointers stay valid while CUPTI is attached.
                        (ptr != 0)
                            .then(|| unsafe { CStr::from_ptr(ptr as *const c_char) }.to_string_lossy().into_owned())
                    };
                    self.resolver.buffer(seq, buffers::delivered_ns(base), &raws, &mut name);
                    if self.dump.is_some() {
                        for r in &raws {
                            if let Raw::Kernel(k) = r {
                                if k.name_ptr != 0 && self.dumped_names.insert(k.name_ptr) {
                                    // SAFETY: as above.
                                    let s = unsafe { CStr::from_ptr(k.name_ptr as *const c_char) };
                                    self.write(Frame::Name { ptr: k.name_ptr, name: s.to_string_lossy().into_owned() });
                                }
                            }
                        }
                        let host_ns = crate::clock::now_ns();
                        self.write(Frame::Buffer { seq, host_ns, offsets: offs, bytes: bytes.to_vec() });
                    }
                    buffers::recycle(base);
                }
            }
        }
        if dropped > 0 {
            note_once(
                "CUPTI dropped activity records (its buffers were full): some GPU work is missing; see the \
                 `lost` line of the summary",
            );
        }
        if self.dump.is_some() {
            self.write(Frame::Threads(threads.clone()));
        }
        // Every window that ended before the snapshot is mapped by now; the rest started at or
        // after their thread's oldest open window, or after the snapshot.
        clock::forget_points_before(threads.open.iter().map(|&(_, since)| since).min().unwrap_or(threads.now));
        self.resolver.observe(&threads);
        let records = self.resolver.poll(crate::clock::now_ns());
        if let Some(w) = &mut self.dump {
            let _ = w.flush();
        }
        (records, any_ended)
    }
}

/// What a [`process`] left: calls still pending, and whether any scope ended since the last.
#[derive(Clone, Copy, Default)]
struct Processed {
    pending: usize,
    ended: bool,
}

/// Drains and resolves under the lock, submits outside it. Called only by the one driver of
/// `crate::resolver`, so when it returns, every record it took is in the pipeline.
fn process(flushed: Option<bool>) -> Processed {
    let Some(live) = state().live.get() else { return Processed::default() };
    let (records, done) = match live.lock() {
        Ok(mut l) => {
            if let Some(forced) = flushed {
                l.write(Frame::Flushed { host_ns: crate::clock::now_ns(), forced });
            }
            let (mut r, ended) = l.drain();
            if flushed == Some(true) {
                // The deadline: every ended scope is decided with what it has (counted).
                r.extend(l.resolver.force());
            }
            (r, Processed { pending: l.resolver.pending(), ended })
        }
        Err(_) => return Processed::default(),
    };
    for r in records {
        collector::submit(r);
    }
    done
}

/// Asks CUPTI for its buffers: only those whose records are all complete, or all (`forced`).
fn flush_all(forced: bool) {
    // Flag 1 is CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.
    // SAFETY: flushing has no preconditions.
    let _ = unsafe { sys::cuptiActivityFlushAll(u32::from(forced)) };
}

/// How often CUPTI hands back its buffers, from its own worker thread
/// (`cuptiActivityFlushPeriod`). Flushing from gpuspan's thread instead (`cuptiActivityFlushAll`)
/// takes locks the application's CUDA calls need: measured on an H100 (docs/benchmarks.md),
/// flushing ourselves every 5 ms slowed a small-kernel loop by several percent, every 50 ms
/// by well under one, CUPTI's own 50 ms period not measurably.
pub(super) const FLUSH_PERIOD_MS: u32 = 50;
/// Where CUPTI refused a flush period, the resolver flushes this often while scopes wait for
/// their records, and every [`FLUSH_IDLE`] otherwise.
const FLUSH_WHILE_PENDING: Duration = Duration::from_millis(50);
const FLUSH_IDLE: Duration = Duration::from_millis(500);
/// Scopes do not wake the resolver when they end (only a quarter-full segment does: decision
/// 42): it looks at the queues this often while scopes end or wait, and every [`QUEUES_IDLE`]
/// otherwise. A scope needs its CUPTI buffers back before it resolves anyway, and every
/// returned buffer wakes the resolver.
const QUEUES_BUSY: Duration = Duration::from_millis(20);
const QUEUES_IDLE: Duration = Duration::from_millis(200);

/// CUPTI's activity records: scopes waiting for their buffers.
pub(super) struct Activity;

/// Hands CUPTI's records to the resolver (when recording starts).
pub(super) fn register() {
    crate::resolver::register(&Activity);
}

/// Asks the resolver to drain the channel now (a scope ended, CUPTI returned a buffer).
pub(super) fn wake() {
    crate::resolver::wake();
}

impl PendingWork for Activity {
    fn name(&self) -> &'static str {
        "cupti"
    }

    /// Drains what CUPTI and the scopes handed over. Buffers come back on CUPTI's own thread
    /// (which wakes the resolver); where CUPTI flushes on its own, nothing here waits on time
    /// but the clock mapping and the stale-record limit. Where it refused a period, the buffers
    /// must be asked for, on a timer.
    fn poll(&self, now: Instant) -> Progress {
        let Some(live) = state().live.get() else { return Progress::default() };
        let (last_flush, self_flushing) = match live.lock() {
            Ok(l) => (l.last_flush, !l.cupti_flushes),
            Err(_) => return Progress::default(),
        };
        let first = process(None);
        let mut pending = first.pending;
        let every = if pending > 0 { FLUSH_WHILE_PENDING } else { FLUSH_IDLE };
        let mut flushed_at = last_flush;
        if self_flushing && now.saturating_duration_since(last_flush) >= every {
            flush_all(false);
            flushed_at = now;
            if let Ok(mut l) = live.lock() {
                l.last_flush = now;
            }
            pending = process(Some(false)).pending;
        }
        let next_wake = match (self_flushing, pending > 0) {
            (true, true) => (flushed_at + FLUSH_WHILE_PENDING).min(now + QUEUES_BUSY),
            (true, false) => flushed_at + FLUSH_IDLE,
            (false, true) => now + QUEUES_BUSY,
            (false, false) => now + QUEUES_IDLE,
        };
        let queues = if pending > 0 || first.ended { QUEUES_BUSY } else { QUEUES_IDLE };
        Progress { pending, next_wake: Some(next_wake.min(now + queues)) }
    }

    /// Flushes until nothing is pending, a forced flush at the deadline.
    fn flush(&self, deadline: Instant) -> bool {
        loop {
            flush_all(false);
            if process(Some(false)).pending == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                flush_all(true);
                return process(Some(true)).pending == 0;
            }
            // Buffers come back from CUPTI's thread: give it a moment, bounded by the deadline.
            std::thread::sleep(Duration::from_millis(1).min(deadline.saturating_duration_since(Instant::now())));
        }
    }
}
