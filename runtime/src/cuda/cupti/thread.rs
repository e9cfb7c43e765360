//! The `gpuspan-cupti` thread and `gpuspan::flush()`: both drain the channel under the live
//! state's lock (decoding returned buffers and attributing them), and hand resolved records to
//! the pipeline after releasing it.

use super::dump::Frame;
use super::records::Raw;
use super::{buffers, clock, dump, records, window, Live, Msg, LIVE, WAITING};
use crate::diagnostics::note_once;
use crate::pipeline;
use crate::record::Record;
use cudarc::cupti::sys;
use std::ffi::{c_char, CStr};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Records resolved but not yet handed to the pipeline (submitted outside the lock): a flush
/// is complete only when this is 0 too.
static SUBMITTING: AtomicU64 = AtomicU64::new(0);

impl Live {
    /// Takes everything the channel holds; returns resolved records.
    fn drain(&mut self) -> Vec<Record> {
        let (offset, error) = clock::offset();
        self.resolver.set_clock(offset, error);
        // Before the channel: a window that closed before this was sent before it.
        let threads = window::snapshot();
        let mut dropped = 0;
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Msg::Requested(seq) => {
                    self.resolver.requested(seq);
                    self.write(Frame::Requested { seq });
                }
                Msg::Dropped(n) => dropped += n,
                Msg::Note(text) => self.write(Frame::Note { host_ns: crate::clock::now_ns(), text }),
                Msg::Ended(call, fence, window) => {
                    let record = call.into_record();
                    WAITING.fetch_sub(1, Ordering::Relaxed);
                    if let (Some(w), true) = (window, self.dump.is_some()) {
                        self.write(Frame::Window { scope_id: record.scope_id, window: w });
                    }
                    if self.dump.is_some() {
                        let site = record.site.desc.name.to_owned();
                        self.write(Frame::Ended {
                            scope_id: record.scope_id,
                            fence,
                            host_ns: crate::clock::now_ns(),
                            site,
                        });
                    }
                    self.resolver.ended_in(record, fence, window);
                }
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
                    self.resolver.buffer(seq, &raws, &mut name);
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
        self.resolver.observe(&threads);
        let records = self.resolver.poll(crate::clock::now_ns());
        if let Some(w) = &mut self.dump {
            let _ = w.flush();
        }
        records
    }
}

/// Drains and resolves under the lock, submits outside it; returns what is still pending.
fn process(flushed: Option<bool>) -> usize {
    let Some(live) = LIVE.get() else { return 0 };
    let (records, pending) = match live.lock() {
        Ok(mut l) => {
            if let Some(forced) = flushed {
                l.write(Frame::Flushed { host_ns: crate::clock::now_ns(), forced });
            }
            let mut r = l.drain();
            if flushed == Some(true) {
                // The deadline: every ended scope is decided with what it has (counted).
                r.extend(l.resolver.force());
            }
            SUBMITTING.fetch_add(r.len() as u64, Ordering::SeqCst);
            let p = l.resolver.pending();
            (r, p)
        }
        Err(_) => return 0,
    };
    for r in records {
        pipeline::submit(r);
        SUBMITTING.fetch_sub(1, Ordering::SeqCst);
    }
    pending
}

/// Nothing pending and nothing being handed over by another thread.
fn settled(pending: usize) -> bool {
    pending == 0 && SUBMITTING.load(Ordering::SeqCst) == 0
}

/// Asks CUPTI for its buffers: only those whose records are all complete, or all (`forced`).
fn flush_all(forced: bool) {
    // Flag 1 is CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.
    // SAFETY: flushing has no preconditions.
    let _ = unsafe { sys::cuptiActivityFlushAll(u32::from(forced)) };
}

/// How often CUPTI hands back its buffers, from its own worker thread
/// (`cuptiActivityFlushPeriod`). Flushing from gpuspan's thread instead (`cuptiActivityFlushAll`)
/// takes locks the application's CUDA calls need: measured on an H100 with an upload / three
/// 200 µs kernels / download loop, flushing ourselves every 5 ms cost 3.4–3.8 % of its wall
/// time, every 50 ms 0.4–0.6 %, every 2 s 0.0–0.2 %; CUPTI's own 50 ms period cost −0.1–0.2 %
/// (docs/benchmarks.md).
pub(super) const FLUSH_PERIOD_MS: u32 = 50;
/// How often the resolver takes what CUPTI handed back. Where CUPTI refused a flush period,
/// it also flushes this often while scopes wait for their records (every 500 ms otherwise).
const FLUSH_WHILE_PENDING: Duration = Duration::from_millis(50);
/// CUPTI accepted [`FLUSH_PERIOD_MS`] and flushes on its own.
pub(super) static CUPTI_FLUSHES: AtomicBool = AtomicBool::new(false);

pub(super) fn run() {
    let mut pending = 0;
    let mut last_flush = Instant::now();
    let mut last_clock = Instant::now();
    loop {
        if last_clock.elapsed() >= Duration::from_secs(1) {
            clock::measure();
            last_clock = Instant::now();
        }
        std::thread::sleep(FLUSH_WHILE_PENDING);
        let busy = pending > 0 || WAITING.load(Ordering::Relaxed) > 0;
        let due = if busy { FLUSH_WHILE_PENDING } else { Duration::from_millis(500) };
        let flushed = if !CUPTI_FLUSHES.load(Ordering::Relaxed) && last_flush.elapsed() >= due {
            flush_all(false);
            last_flush = Instant::now();
            Some(false)
        } else {
            None
        };
        pending = process(flushed);
    }
}

/// `gpuspan::flush()`: default flushes until nothing is pending, a forced one at the deadline.
pub(super) fn flush(deadline: Instant) -> bool {
    loop {
        flush_all(false);
        if settled(process(Some(false))) {
            return true;
        }
        if Instant::now() >= deadline {
            flush_all(true);
            return settled(process(Some(true)));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
