//! The CUPTI activity API, live: enabling the record kinds, the buffers CUPTI fills, the scope
//! id pushed around each call, and the thread that parses returned buffers off the caller's path.
//!
//! Threads: CUPTI calls [`requested`] and [`completed`] on its own threads (or inside a flush);
//! both only hand data over through a channel. Parsing and attribution ([`super::resolve`])
//! happen under one lock, taken by gpuspan's `gpuspan-cupti` thread every few milliseconds and
//! by `gpuspan::flush()`; records are submitted after the lock is released.

use super::parse::{self, dump::Frame, Raw};
use super::resolve::{Counts, Resolver};
use super::CudaError;
use crate::diagnostics::{note_once, Losses, LOSSES};
use crate::record::{DeviceLabel, Record};
use crate::scope::Call;
use crate::{clock, pipeline};
use cudarc::cupti::sys::{
    self as sys, CUptiResult, CUpti_Activity, CUpti_ActivityKind as K, CUpti_ExternalCorrelationKind,
    CUpti_driver_api_trace_cbid_enum as D, CUpti_runtime_api_trace_cbid_enum as R,
};
use std::collections::HashSet;
use std::ffi::{c_char, CStr};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const KIND: CUpti_ExternalCorrelationKind = CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

/// Bytes of one activity buffer. A kernel record is ~200 bytes, an API record 40.
const BUFFER_BYTES: usize = 4 << 20;
/// Words in front of the part handed to CUPTI: the buffer's sequence number lives there.
const HEADER_WORDS: usize = 2;
const WORDS: usize = BUFFER_BYTES / 8 + HEADER_WORDS;

/// Buffers CUPTI asked for so far; a scope's fence is this value when it ends.
static REQUESTED: AtomicU64 = AtomicU64::new(0);
static POOL: Mutex<Vec<Box<[u64]>>> = Mutex::new(Vec::new());
static TX: OnceLock<Sender<Msg>> = OnceLock::new();
static LIVE: OnceLock<Mutex<Live>> = OnceLock::new();
/// Ended scopes sent but not yet taken by the resolver: tells its thread to flush soon.
static WAITING: AtomicU64 = AtomicU64::new(0);
/// Records resolved but not yet handed to the pipeline (submitted outside the lock): a flush
/// is complete only when this is 0 too.
static SUBMITTING: AtomicU64 = AtomicU64::new(0);
/// CUPTI's CPU clock minus gpuspan's host clock, and the bound on that measurement.
static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
static CLOCK_ERROR: AtomicU64 = AtomicU64::new(0);

/// Compares CUPTI's clock (which its records use) with gpuspan's host clock: both count
/// Unix-epoch nanoseconds, but from different clocks that drift apart (wall clock versus
/// monotonic), so the offset is measured at start and every second after.
fn measure_clock() {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..5 {
        let mut c = 0u64;
        let h0 = clock::now_ns();
        // SAFETY: plain out-parameter.
        let ok = unsafe { sys::cuptiGetTimestamp(&mut c) } == CUptiResult::CUPTI_SUCCESS;
        let h1 = clock::now_ns();
        if !ok {
            return;
        }
        let width = h1 - h0;
        let offset = c as i64 - (h0 + width / 2) as i64;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, offset));
        }
    }
    if let Some((width, offset)) = best {
        CLOCK_OFFSET.store(offset, Ordering::Relaxed);
        CLOCK_ERROR.store(width.div_ceil(2), Ordering::Relaxed);
    }
}

/// The last measured CUPTI-minus-host clock offset and its error bound, in ns.
pub(crate) fn clock() -> (i64, u64) {
    (CLOCK_OFFSET.load(Ordering::Relaxed), CLOCK_ERROR.load(Ordering::Relaxed))
}

enum Msg {
    Requested(u64),
    Buffer {
        base: usize,
        valid: usize,
    },
    Dropped(u64),
    /// A scope ended (the record is built on the resolver thread), with its fence.
    Ended(Call, u64),
    Note(String),
}

struct Live {
    resolver: Resolver,
    rx: Receiver<Msg>,
    dump: Option<std::io::BufWriter<std::fs::File>>,
    dumped_names: HashSet<u64>,
}

/// Every CUPTI entry point gpuspan calls. cudarc panics on a missing symbol, so their presence
/// is checked before the first call.
const SYMBOLS: &[&str] = &[
    "cuptiGetVersion",
    "cuptiGetResultString",
    "cuptiActivityRegisterCallbacks",
    "cuptiActivityEnable",
    "cuptiActivityEnableDriverApi",
    "cuptiActivityEnableRuntimeApi",
    "cuptiActivityFlushAll",
    "cuptiActivityFlushPeriod",
    "cuptiActivityGetNextRecord",
    "cuptiActivityGetNumDroppedRecords",
    "cuptiActivityPushExternalCorrelationId",
    "cuptiActivityPopExternalCorrelationId",
    "cuptiGetTimestamp",
];

/// Driver and runtime calls made at every launch that enqueue no GPU work: their API records
/// (and so their external-correlation records) are not collected, which keeps the per-call cost
/// and the buffer traffic down.
const QUIET_DRIVER: &[D] = &[
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetId,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetFlags,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetId,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    D::CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    D::CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    D::CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,
    D::CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
    D::CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetErrorName,
    D::CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
];
const QUIET_RUNTIME: &[R] = &[
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetId_v12000,
];

fn message(r: CUptiResult) -> String {
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: cuptiGetResultString writes a pointer to a static string or leaves it null.
    let ok = unsafe { sys::cuptiGetResultString(r, &mut s) } == CUptiResult::CUPTI_SUCCESS;
    if ok && !s.is_null() {
        // SAFETY: CUPTI returns a NUL-terminated static string.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    }
}

fn check(call: &'static str, r: CUptiResult) -> Result<(), CudaError> {
    if r == CUptiResult::CUPTI_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Cupti { call, message: message(r) })
    }
}

/// Finds libcupti the way cudarc will and checks every symbol gpuspan calls.
fn probe_library() -> Result<(), CudaError> {
    let candidates = cudarc::get_lib_name_candidates("cupti");
    // SAFETY: loading libcupti runs no initialisation with preconditions on our side.
    let Some((path, lib)) =
        candidates.iter().find_map(|c| unsafe { libloading::Library::new(c) }.ok().map(|l| (c.clone(), l)))
    else {
        return Err(CudaError::NoCupti);
    };
    for symbol in SYMBOLS {
        // SAFETY: only the symbol's presence is checked; it is never called through this handle.
        if unsafe { lib.get::<*const ()>(symbol.as_bytes()) }.is_err() {
            return Err(CudaError::CuptiTooOld { path, symbol });
        }
    }
    Ok(())
}

/// Turns CUPTI activity recording on and starts the resolver thread.
pub(crate) fn start(devices: Vec<DeviceLabel>) -> Result<u32, CudaError> {
    probe_library()?;
    let mut version = 0u32;
    // SAFETY: plain out-parameter.
    check("cuptiGetVersion", unsafe { sys::cuptiGetVersion(&mut version) })?;
    let (tx, rx) = channel();
    let dump = crate::env::cupti_dump().and_then(|path| {
        let file = crate::export::file::create(path.as_ref())
            .map_err(|e| note_once(format_args!("cannot write the CUPTI dump to {}: {e}", path.to_string_lossy())))
            .ok()?;
        let mut w = std::io::BufWriter::new(file);
        w.write_all(parse::dump::MAGIC).ok()?;
        Some(w)
    });
    let _ = TX.set(tx);
    let _ = LIVE.set(Mutex::new(Live { resolver: Resolver::new(devices), rx, dump, dumped_names: HashSet::new() }));
    // SAFETY: the callbacks are `extern "C"` functions valid for the whole process.
    check("cuptiActivityRegisterCallbacks", unsafe {
        sys::cuptiActivityRegisterCallbacks(Some(requested), Some(completed))
    })?;
    for kind in [
        K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        K::CUPTI_ACTIVITY_KIND_MEMCPY,
        K::CUPTI_ACTIVITY_KIND_MEMSET,
        K::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
        // External-correlation records are only written for API calls that CUPTI records.
        K::CUPTI_ACTIVITY_KIND_DRIVER,
        K::CUPTI_ACTIVITY_KIND_RUNTIME,
    ] {
        // SAFETY: enabling a kind has no preconditions.
        check("cuptiActivityEnable", unsafe { sys::cuptiActivityEnable(kind) })?;
    }
    // SAFETY: setting the period has no preconditions.
    let period = unsafe { sys::cuptiActivityFlushPeriod(FLUSH_PERIOD_MS) };
    if period == CUptiResult::CUPTI_SUCCESS {
        CUPTI_FLUSHES.store(true, Ordering::Relaxed);
    } else {
        note_once(format_args!(
            "CUPTI refused a flush period ({}): gpuspan flushes its buffers itself, which slows CUDA calls \
             slightly",
            message(period)
        ));
    }
    for cbid in QUIET_DRIVER {
        // SAFETY: as above; failure only means more records.
        let _ = unsafe { sys::cuptiActivityEnableDriverApi(*cbid as u32, 0) };
    }
    for cbid in QUIET_RUNTIME {
        // SAFETY: as above.
        let _ = unsafe { sys::cuptiActivityEnableRuntimeApi(*cbid as u32, 0) };
    }
    // Resolve the hot-path symbols now, while a missing one can still be reported.
    let mut last = 0;
    // SAFETY: push then pop on this thread's stack leaves it as it was.
    check("cuptiActivityPushExternalCorrelationId", unsafe { sys::cuptiActivityPushExternalCorrelationId(KIND, 0) })?;
    check("cuptiActivityPopExternalCorrelationId", unsafe {
        sys::cuptiActivityPopExternalCorrelationId(KIND, &mut last)
    })?;
    measure_clock();
    std::thread::Builder::new()
        .name("gpuspan-cupti".into())
        .spawn(resolver_thread)
        .map_err(|e| CudaError::Thread(e.to_string()))?;
    crate::flush::register(flush);
    Ok(version)
}

/// Enters a scope: CUPTI tags every API call of this thread with `id` until [`pop`].
#[inline]
pub(crate) fn push(id: u64) -> bool {
    // SAFETY: the symbol was resolved in `start`; pushing has no preconditions.
    unsafe { sys::cuptiActivityPushExternalCorrelationId(KIND, id) == CUptiResult::CUPTI_SUCCESS }
}

/// Leaves a scope; says once if the id on top of the thread's stack was not `id`.
#[inline]
pub(crate) fn pop(id: u64) {
    let mut last = 0;
    // SAFETY: as `push`.
    let ok = unsafe { sys::cuptiActivityPopExternalCorrelationId(KIND, &mut last) } == CUptiResult::CUPTI_SUCCESS;
    if !ok || last != id {
        note_once(
            "CUDA scopes on one thread ended out of order (or an async CUDA scope moved threads): some GPU work \
             may be attributed to the wrong call",
        );
    }
}

/// A scope ended: it waits for the buffers CUPTI requested so far.
pub(crate) fn ended(call: Call) {
    let fence = REQUESTED.load(Ordering::SeqCst);
    if let Some(tx) = TX.get() {
        WAITING.fetch_add(1, Ordering::Relaxed);
        if tx.send(Msg::Ended(call, fence)).is_err() {
            Losses::add(&LOSSES.unresolved_scopes, 1);
        }
    }
}

/// Writes a line into the CUPTI dump, if one is being written (what a capture was doing).
pub(crate) fn note(text: String) {
    if let Some(tx) = TX.get() {
        let _ = tx.send(Msg::Note(text));
    }
}

/// What the resolver has done so far.
pub(crate) fn counts() -> Option<Counts> {
    Some(LIVE.get()?.lock().ok()?.resolver.counts())
}

unsafe extern "C" fn requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let mut b = POOL.lock().ok().and_then(|mut p| p.pop()).unwrap_or_else(|| vec![0u64; WORDS].into_boxed_slice());
    let seq = REQUESTED.fetch_add(1, Ordering::SeqCst) + 1;
    b[0] = seq;
    let base = Box::into_raw(b) as *mut u64;
    // SAFETY: CUPTI passes valid out-pointers; the buffer stays alive until `completed`.
    unsafe {
        *buffer = base.add(HEADER_WORDS) as *mut u8;
        *size = BUFFER_BYTES;
        *max_records = 0;
    }
    if let Some(tx) = TX.get() {
        let _ = tx.send(Msg::Requested(seq));
    }
}

unsafe extern "C" fn completed(
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
        Losses::add(&LOSSES.cupti_records, dropped as u64);
        if let Some(tx) = TX.get() {
            let _ = tx.send(Msg::Dropped(dropped as u64));
        }
    }
    // SAFETY: every buffer CUPTI returns was made by `requested`, HEADER_WORDS past its start.
    let base = unsafe { (buffer as *mut u64).sub(HEADER_WORDS) } as usize;
    match TX.get() {
        Some(tx) => {
            if let Err(e) = tx.send(Msg::Buffer { base, valid }) {
                if let Msg::Buffer { base, .. } = e.0 {
                    recycle(base);
                }
            }
        }
        None => recycle(base),
    }
}

fn recycle(base: usize) {
    // SAFETY: `base` came from Box::into_raw of a WORDS-long boxed slice in `requested`.
    let b = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(base as *mut u64, WORDS)) };
    if let Ok(mut p) = POOL.lock() {
        if p.len() < 8 {
            p.push(b);
        }
    }
}

/// Record boundaries of a returned buffer, as CUPTI walks it.
fn offsets(buffer: *mut u8, valid: usize) -> Vec<u32> {
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

impl Live {
    fn write(&mut self, f: Frame) {
        if let Some(w) = &mut self.dump {
            let mut b = Vec::new();
            f.encode(&mut b);
            if w.write_all(&b).is_err() {
                self.dump = None;
            }
        }
    }

    /// Takes everything the channel holds; returns resolved records.
    fn drain(&mut self) -> Vec<Record> {
        let (offset, error) = clock();
        self.resolver.set_clock(offset, error);
        let mut dropped = 0;
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Msg::Requested(seq) => self.write(Frame::Requested { seq }),
                Msg::Dropped(n) => dropped += n,
                Msg::Note(text) => self.write(Frame::Note { host_ns: clock::now_ns(), text }),
                Msg::Ended(call, fence) => {
                    let record = call.into_record();
                    WAITING.fetch_sub(1, Ordering::Relaxed);
                    if self.dump.is_some() {
                        let site = record.site.desc.name.to_owned();
                        self.write(Frame::Ended { scope_id: record.scope_id, fence, host_ns: clock::now_ns(), site });
                    }
                    self.resolver.ended(record, fence);
                }
                Msg::Buffer { base, valid } => {
                    // SAFETY: a live buffer from `requested`, returned by CUPTI with `valid` bytes.
                    let seq = unsafe { *(base as *const u64) };
                    let data = (base as *mut u64).wrapping_add(HEADER_WORDS) as *mut u8;
                    let offs = offsets(data, valid);
                    // SAFETY: CUPTI wrote `valid` bytes at `data`.
                    let bytes = unsafe { std::slice::from_raw_parts(data, valid) };
                    let mut raws = Vec::with_capacity(offs.len());
                    let mut bad = None;
                    for rec in parse::dump::records(&offs, bytes) {
                        match parse::parse(rec) {
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
                        let host_ns = clock::now_ns();
                        self.write(Frame::Buffer { seq, host_ns, offsets: offs, bytes: bytes.to_vec() });
                    }
                    recycle(base);
                }
            }
        }
        if dropped > 0 {
            note_once(
                "CUPTI dropped activity records (its buffers were full): some GPU work is missing; see the \
                 `lost` line of the summary",
            );
        }
        let records = self.resolver.poll(clock::now_ns());
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
                l.write(Frame::Flushed { host_ns: clock::now_ns(), forced });
            }
            let r = l.drain();
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
const FLUSH_PERIOD_MS: u32 = 50;
/// How often the resolver takes what CUPTI handed back. Where CUPTI refused a flush period,
/// it also flushes this often while scopes wait for their records (every 500 ms otherwise).
const FLUSH_WHILE_PENDING: Duration = Duration::from_millis(50);
/// CUPTI accepted [`FLUSH_PERIOD_MS`] and flushes on its own.
static CUPTI_FLUSHES: AtomicBool = AtomicBool::new(false);

fn resolver_thread() {
    let mut pending = 0;
    let mut last_flush = Instant::now();
    let mut last_clock = Instant::now();
    loop {
        if last_clock.elapsed() >= Duration::from_secs(1) {
            measure_clock();
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
fn flush(deadline: Instant) -> bool {
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
