//! The activity buffers gpuspan lends CUPTI: a small pool of boxed slices, each with a header
//! holding its sequence number (the fences scopes wait on) and the host instant CUPTI handed it
//! back (every record in it ended before: a fact for placing them), and their return through
//! the channel to the resolver (woken for it).

use super::Msg;
use crate::diagnostics::{losses, Losses};
use cudarc::cupti::sys::{self as sys, CUptiResult, CUpti_Activity};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Bytes of one activity buffer. A kernel record is ~200 bytes, an API record 40.
const BUFFER_BYTES: usize = 4 << 20;
/// Words in front of the part handed to CUPTI: the buffer's sequence number, then the host
/// instant it came back.
pub(super) const HEADER_WORDS: usize = 2;
const WORDS: usize = BUFFER_BYTES / 8 + HEADER_WORDS;

/// The buffers lent to CUPTI (in `Cupti`).
pub(super) struct BufferState {
    /// Buffers CUPTI asked for so far; a scope's fence is this value when it ends.
    requested: AtomicU64,
    pool: Mutex<Vec<Box<[u64]>>>,
}

impl BufferState {
    pub(super) const fn new() -> BufferState {
        BufferState { requested: AtomicU64::new(0), pool: Mutex::new(Vec::new()) }
    }
}

#[inline(always)]
fn state() -> &'static BufferState {
    &super::state().buffers
}

/// Buffers CUPTI asked for so far: a scope ending now waits for these.
#[inline(always)]
pub(super) fn requested_so_far() -> u64 {
    state().requested.load(Ordering::SeqCst)
}

pub(super) unsafe extern "C" fn requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let mut b =
        state().pool.lock().ok().and_then(|mut p| p.pop()).unwrap_or_else(|| vec![0u64; WORDS].into_boxed_slice());
    let seq = state().requested.fetch_add(1, Ordering::SeqCst) + 1;
    b[0] = seq;
    let base = Box::into_raw(b) as *mut u64;
    // SAFETY: CUPTI passes valid out-pointers; the buffer stays alive until `completed`.
    unsafe {
        *buffer = base.add(HEADER_WORDS) as *mut u8;
        *size = BUFFER_BYTES;
        *max_records = 0;
    }
    if let Some(tx) = super::state().tx.get() {
        let _ = tx.send(Msg::Requested(seq));
    }
}

pub(super) unsafe extern "C" fn completed(
    ctx: cudarc::driver::sys::CUcontext,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut dropped = 0usize;
    // SAFETY: ctx and stream are the ones CUPTI passed in.
    if unsafe { sys::cuptiActivityGetNumDroppedRecords(ctx, stream, &mut dropped) } == CUptiResult::CUPTI_SUCCESS
        && dropped > 0
    {
        Losses::add(&losses().cupti_records, dropped as u64);
        if let Some(tx) = super::state().tx.get() {
            let _ = tx.send(Msg::Dropped(dropped as u64));
        }
    }
    let delivered = crate::clock::now_ns();
    // SAFETY: every buffer CUPTI returns was made by `requested`, HEADER_WORDS past its start.
    let base = unsafe { (buffer as *mut u64).sub(HEADER_WORDS) } as usize;
    // SAFETY: the header is ours (CUPTI writes only past it) and HEADER_WORDS ≥ 2.
    unsafe { *(base as *mut u64).add(1) = delivered };
    match super::state().tx.get() {
        Some(tx) => {
            if let Err(e) = tx.send(Msg::Buffer { base, valid }) {
                if let Msg::Buffer { base, .. } = e.0 {
                    recycle(base);
                }
            }
            super::work::wake();
        }
        None => recycle(base),
    }
}

/// The host instant CUPTI handed back the buffer at `base` (its records' work ended before).
pub(super) fn delivered_ns(base: usize) -> u64 {
    // SAFETY: `base` is a live buffer from `requested`, written by `completed`.
    unsafe { *(base as *const u64).add(1) }
}

pub(super) fn recycle(base: usize) {
    // SAFETY: `base` came from Box::into_raw of a WORDS-long boxed slice in `requested`.
    let b = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(base as *mut u64, WORDS)) };
    if let Ok(mut p) = state().pool.lock() {
        if p.len() < 8 {
            p.push(b);
        }
    }
}

/// Record boundaries of a returned buffer, as CUPTI walks it.
pub(super) fn offsets(buffer: *mut u8, valid: usize) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rec: *mut CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: buffer/valid are what CUPTI returned; `rec` is CUPTI's cursor.
        let r = unsafe { sys::cuptiActivityGetNextRecord(buffer, valid, &mut rec) };
        if r != CUptiResult::CUPTI_SUCCESS || rec.is_null() {
            break;
        }
        out.push((rec as usize - buffer as usize) as u32);
    }
    out
}
