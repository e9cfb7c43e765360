//! The CUPTI activity API, live: turning recording on, how a scope marks its calls (a window
//! of its thread's time, or its id pushed as external correlation id), and the hand-over to the
//! thread that resolves records off the caller's path.
//!
//! One job per file: [`library`] finds libcupti and checks its entry points, [`callbacks`] holds
//! the callback-id tables (which calls enqueue work, which are not worth recording),
//! [`buffers`] lends CUPTI its activity buffers, [`records`] decodes them, [`clock`] maps CUPTI's
//! clock onto the host's, [`window`] marks synchronous scopes by thread and time,
//! [`attribution`] ties records to scopes (by window through [`thread_index`], else by external
//! id) and [`finish`] makes their records, [`work`] drains and resolves them for the one
//! resolver thread (`crate::resolver`), [`dump`] writes and reads the capture file the fixture
//! tests replay.
//!
//! Threads: CUPTI calls `buffers::requested` and `buffers::completed` on its own threads (or
//! inside a flush); both only hand data over through a channel and wake the resolver. Scopes
//! hand their ends over through their thread's queue ([`queue`], via [`window`]). Decoding
//! and attribution happen under one lock, taken by the resolver; records are submitted after
//! the lock is released.

// Decoding, the callback tables, attribution and the dump format are lent to tests by
// `cuda::testing_api::replay` (`gpuspan-testing`): their items are `pub`.
pub(crate) mod attribution;
mod buffers;
pub(crate) mod callbacks;
pub(crate) mod clock;
pub(crate) mod dump;
pub(crate) mod finish;
mod library;
mod queue;
// The raw records' fields mirror CUPTI's structs and keep their names: CUPTI's headers
// document them.
#[allow(missing_docs)]
pub(crate) mod records;
pub(crate) mod thread_index;
mod window;
mod work;

use super::{CudaError, CudaScope};
use crate::call::Call;
use crate::cuda::counts::Counts;
use crate::diagnostics::{losses, note_once, Losses};
use crate::record::DeviceLabel;
use attribution::Resolver;
use cudarc::cupti::sys::{self as sys, CUptiResult, CUpti_ActivityKind as K, CUpti_ExternalCorrelationKind};
use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
use thread_index::Window;

const KIND: CUpti_ExternalCorrelationKind = CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

/// CUPTI's state, held by `cuda`'s one static (`Cuda`): the channel to the resolver and what
/// it resolves with, the buffers lent, the clock's calibration and the threads' windows.
pub(super) struct Cupti {
    tx: OnceLock<Sender<Msg>>,
    live: OnceLock<Mutex<Live>>,
    buffers: buffers::BufferState,
    clock: clock::ClockState,
    window: window::WindowState,
}

impl Cupti {
    pub(super) const fn new() -> Cupti {
        Cupti {
            tx: OnceLock::new(),
            live: OnceLock::new(),
            buffers: buffers::BufferState::new(),
            clock: clock::ClockState::new(),
            window: window::WindowState::new(),
        }
    }
}

#[inline(always)]
fn state() -> &'static Cupti {
    &super::CUDA.cupti
}

enum Msg {
    Requested(u64),
    Buffer {
        base: usize,
        valid: usize,
    },
    Dropped(u64),
    /// A scope ended (the record is built on the resolver thread), with its fence and, for a
    /// synchronous scope, its window.
    Ended(Call, u64, Option<Window>),
    Note(String),
}

struct Live {
    resolver: Resolver,
    rx: Receiver<Msg>,
    dump: Option<std::io::BufWriter<std::fs::File>>,
    dumped_names: HashSet<u64>,
    /// The calibration last written to the dump.
    dumped_clock: Option<crate::placement::ClockMap>,
    /// When CUPTI's buffers were last asked for (its clock is mapped afresh where records are
    /// placed: `clock::mapping`).
    last_flush: Instant,
    /// CUPTI accepted [`work::FLUSH_PERIOD_MS`] and flushes on its own.
    cupti_flushes: bool,
}

/// Turns CUPTI activity recording on and hands its work to the resolver.
pub(crate) fn start(devices: Vec<DeviceLabel>) -> Result<u32, CudaError> {
    library::check_library()?;
    let mut version = 0u32;
    // SAFETY: plain out-parameter.
    library::check("cuptiGetVersion", unsafe { sys::cuptiGetVersion(&mut version) })?;
    let (tx, rx) = channel();
    let dump = crate::env::cupti_dump().and_then(|path| {
        // Created or truncated, but only if it is a regular file: never through a link, never
        // blocking.
        let file = crate::export::file::open_regular(path.as_ref())
            .and_then(|file| file.set_len(0).map(|()| file))
            .map_err(|e| note_once(format_args!("cannot write the CUPTI dump to {}: {e}", path.to_string_lossy())))
            .ok()?;
        let mut w = std::io::BufWriter::new(file);
        w.write_all(dump::MAGIC).ok()?;
        Some(w)
    });
    // API records carry the OS thread id (`gettid`) that windows are kept under. Without it,
    // every scope pushes its id.
    // SAFETY: setting the id type has no preconditions.
    let system = sys::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
    if unsafe { sys::cuptiSetThreadIdType(system) } == CUptiResult::CUPTI_SUCCESS {
        window::choose_clock();
        window::state().enabled.store(true, Ordering::Relaxed);
    }
    let _ = state().tx.set(tx);
    let _ = state().live.set(Mutex::new(Live {
        resolver: Resolver::new(devices),
        rx,
        dump,
        dumped_names: HashSet::new(),
        dumped_clock: None,
        last_flush: Instant::now(),
        cupti_flushes: false,
    }));
    // SAFETY: the callbacks are `extern "C"` functions valid for the whole process.
    library::check("cuptiActivityRegisterCallbacks", unsafe {
        sys::cuptiActivityRegisterCallbacks(Some(buffers::requested), Some(buffers::completed))
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
        library::check("cuptiActivityEnable", unsafe { sys::cuptiActivityEnable(kind) })?;
    }
    // Copies between two devices (or two contexts of one device) come only as MEMCPY2 records;
    // without them such a copy's scope would wait for a record that never comes. Not fatal:
    // everything else is still timed.
    // SAFETY: as above.
    let peer = unsafe { sys::cuptiActivityEnable(K::CUPTI_ACTIVITY_KIND_MEMCPY2) };
    if peer != CUptiResult::CUPTI_SUCCESS {
        note_once(format_args!(
            "CUPTI refused peer-copy records ({}): copies between GPUs are not timed, and their calls are \
             resolved without them after 30 s",
            library::message(peer)
        ));
    }
    // Synchronizing calls with the stream or context they waited for: work on it had ended when
    // they returned, a fact its placement is held to (issue 39). Not fatal: the calibration and
    // the other facts still place every record.
    // SAFETY: as above.
    let sync = unsafe { sys::cuptiActivityEnable(K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) };
    if sync != CUptiResult::CUPTI_SUCCESS {
        note_once(format_args!(
            "CUPTI refused synchronization records ({}): GPU work is not held to end before the \
             synchronize calls that waited for it",
            library::message(sync)
        ));
    }
    // SAFETY: setting the period has no preconditions.
    let period = unsafe { sys::cuptiActivityFlushPeriod(work::FLUSH_PERIOD_MS) };
    if period == CUptiResult::CUPTI_SUCCESS {
        if let Some(mut l) = state().live.get().and_then(|l| l.lock().ok()) {
            l.cupti_flushes = true;
        }
    } else {
        note_once(format_args!(
            "CUPTI refused a flush period ({}): gpuspan flushes its buffers itself, which slows CUDA calls \
             slightly",
            library::message(period)
        ));
    }
    for cbid in callbacks::QUIET_DRIVER {
        // SAFETY: as above; failure only means more records.
        let _ = unsafe { sys::cuptiActivityEnableDriverApi(*cbid as u32, 0) };
    }
    for cbid in callbacks::QUIET_RUNTIME {
        // SAFETY: as above.
        let _ = unsafe { sys::cuptiActivityEnableRuntimeApi(*cbid as u32, 0) };
    }
    // Resolve the hot-path symbols now, while a missing one can still be reported.
    let mut last = 0;
    // SAFETY: push then pop on this thread's stack leaves it as it was.
    library::check("cuptiActivityPushExternalCorrelationId", unsafe {
        sys::cuptiActivityPushExternalCorrelationId(KIND, 0)
    })?;
    library::check("cuptiActivityPopExternalCorrelationId", unsafe {
        sys::cuptiActivityPopExternalCorrelationId(KIND, &mut last)
    })?;
    clock::measure();
    // Registers CUPTI with the resolver now: where CUPTI flushes nothing on its own, the
    // resolver asks for its buffers from the start.
    work::register();
    Ok(version)
}

/// Enters a scope: a window of this thread's time, or (where a window cannot decide) its id
/// pushed as external correlation id. With the call's start: the window's, or the host clock's.
#[inline]
pub(crate) fn enter(id: u64) -> (CudaScope, u64) {
    match window::open() {
        Some(start) => (CudaScope::Window, start),
        None => {
            let start = crate::clock::raw();
            (CudaScope::Cupti { pushed: push(id) }, start)
        }
    }
}

/// A selected span is entered on this thread: a window of the thread's time, as a synchronous
/// scope's (decision 71); `None` where a window cannot decide (windows off, or an external id
/// pushed on this thread: the span's id is pushed instead).
#[inline]
pub(crate) fn span_window_open() -> Option<u64> {
    window::open()
}

/// The entry [`span_window_open`] began ends: its window is the span's on this thread.
#[inline]
pub(crate) fn span_window_close(site: &'static crate::site::Site, scope_id: u64, start: u64) {
    window::close_span(site, scope_id, start);
}

/// An async scope suspends: the window it opened (before its body ran) closes unused.
pub(crate) fn abandon_window() {
    window::abandon();
}

/// CUPTI tags every API call of this thread with `id` until [`pop`].
#[inline]
pub(crate) fn push(id: u64) -> bool {
    // SAFETY: the symbol was resolved in `start`; pushing has no preconditions.
    let ok = unsafe { sys::cuptiActivityPushExternalCorrelationId(KIND, id) == CUptiResult::CUPTI_SUCCESS };
    if ok {
        window::pushed(1);
    }
    ok
}

/// Leaves a scope; says once if the id on top of the thread's stack was not `id`.
#[inline]
pub(crate) fn pop(id: u64) {
    let mut last = 0;
    // SAFETY: as `push`.
    let ok = unsafe { sys::cuptiActivityPopExternalCorrelationId(KIND, &mut last) } == CUptiResult::CUPTI_SUCCESS;
    if ok {
        window::pushed(-1);
    }
    if !ok || last != id {
        note_once(
            "CUDA scopes on one thread ended out of order (or an async CUDA scope moved threads): some GPU work \
             may be attributed to the wrong call",
        );
    }
}

/// A scope ended: it waits for the buffers CUPTI requested so far.
pub(crate) fn ended(call: Call) {
    window::ended(call);
}

/// A synchronous scope ended: its window closes, and it waits for the buffers CUPTI requested
/// so far (read after the window's end, so they hold every API record inside it). `call`
/// describes the scope, built where it is queued (`window::close`).
#[inline]
pub(crate) fn ended_window(call: impl FnOnce(u64) -> Call) {
    window::close(call);
}

/// A scope ended on a thread whose queue is gone (it is being torn down): through the channel.
fn send_ended(call: Call, window: Option<Window>) {
    let fence = buffers::requested_so_far();
    if let Some(tx) = state().tx.get() {
        if tx.send(Msg::Ended(call, fence, window)).is_err() {
            Losses::add(&losses().unresolved_scopes, 1);
        }
        work::wake();
    }
}

/// Writes a line into the CUPTI dump, if one is being written (what a capture was doing).
pub(crate) fn note(text: String) {
    if let Some(tx) = state().tx.get() {
        let _ = tx.send(Msg::Note(text));
    }
}

/// What the resolver has done so far.
pub(crate) fn counts() -> Option<Counts> {
    Some(state().live.get()?.lock().ok()?.resolver.counts())
}

/// Windows read `CLOCK_REALTIME` instead of `cuptiGetTimestamp` (decision 43).
pub(crate) fn reads_realtime() -> bool {
    window::reads_realtime()
}

/// Windows without CUPTI, for counting their path (`window::simulate`); returns the ended
/// scopes the threads' queues held, dropped unresolved.
pub(crate) fn simulate_windows() -> usize {
    window::simulate();
    window::drain(|_, _, _| ())
}

/// Segments the threads' queues of ended scopes allocated past their first (decision 42).
pub(crate) fn queue_grown() -> u64 {
    window::grown()
}
