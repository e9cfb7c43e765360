//! The instrumented build's CUDA timing: the one static, the choice of source, CUPTI and CUDA
//! events, and the CUDA part of each scope.

pub(crate) mod cupti;
pub(crate) mod events;

/// The decoder and the attribution, lent to tests by `testing_api::replay`.
pub(super) mod replay {
    pub use super::cupti::{
        attribution::{Resolver, EXTERNAL_KIND},
        callbacks::{work_of, Work},
        finish::device_labels,
        records::*,
        thread_index::{Snapshot, Window},
    };
    /// The capture file's format.
    pub mod dump {
        pub use crate::cuda::cupti::dump::*;
    }
}

// The public types and functions, as this module's children name them (`super::Timing`).
use super::*;
use crate::backends::BackendScope;
use crate::backends::GpuScope;
use crate::call::Call;
use crate::clock;
use crate::diagnostics::note_once;
use crate::site::{Backend, Site};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// Everything CUDA timing keeps for the process: the source chosen, what bare scopes do, the
/// devices found, the CUDA events' contexts and waiting calls (`events.rs`) and CUPTI's state
/// (`cupti/`). Const-constructed: a field of the one static costs the hot path no extra load.
struct Cuda {
    timing: OnceLock<Timing>,
    /// What bare scopes (no stream in the signature) do: [`WATCH_OFF`] until CUDA timing
    /// started with a device, so a program without CUDA pays one relaxed load per scope and
    /// nothing more.
    watch: AtomicU8,
    probe: OnceLock<Result<Vec<DeviceLabel>, CudaError>>,
    events: events::EventState,
    cupti: cupti::Cupti,
}

/// The one static of CUDA timing. Process-wide because what it serves is: CUPTI calls its
/// buffer callbacks (`cupti/buffers.rs`) from C, on its own threads, with no context pointer to
/// find an owner by; and CUDA contexts, which the events and their clock anchors belong to, are
/// the process's, as is the driver that [`probe`] loads once.
static CUDA: Cuda = Cuda {
    timing: OnceLock::new(),
    watch: AtomicU8::new(WATCH_OFF),
    probe: OnceLock::new(),
    events: events::EventState::new(),
    cupti: cupti::Cupti::new(),
};
const WATCH_OFF: u8 = 0;
const WATCH_CUPTI: u8 = 1;
const WATCH_EVENTS: u8 = 2;

/// [`probe`]: the devices found, looked for once.
pub(super) fn probe_once() -> Result<&'static [DeviceLabel], &'static CudaError> {
    CUDA.probe.get_or_init(probe_devices).as_deref()
}

fn probe_devices() -> Result<Vec<DeviceLabel>, CudaError> {
    use cudarc::driver::result;
    // SAFETY: only tries to dlopen libcuda.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaError::NoDriver);
    }
    let names = std::panic::catch_unwind(|| -> Result<Vec<String>, String> {
        result::init().map_err(|e| format!("{e:?}"))?;
        let n = result::device::get_count().map_err(|e| format!("{e:?}"))?;
        (0..n)
            .map(|i| {
                let d = result::device::get(i).map_err(|e| format!("{e:?}"))?;
                result::device::get_name(d).map_err(|e| format!("{e:?}"))
            })
            .collect()
    });
    match names {
        Ok(Ok(names)) if !names.is_empty() => Ok(cupti::finish::device_labels(names)),
        Ok(Ok(_)) => Err(CudaError::NoDevice("the driver reports 0 devices".into())),
        Ok(Err(e)) => Err(CudaError::NoDevice(e)),
        Err(_) => Err(CudaError::NoDriver),
    }
}

/// Labels of the devices found, by ordinal (empty without a driver).
pub(crate) fn devices() -> &'static [DeviceLabel] {
    probe().unwrap_or(&[])
}

/// [`start`]: the timing source, chosen at the first call.
pub(super) fn start_once() -> Timing {
    *CUDA.timing.get_or_init(|| {
        let timing = choose();
        let watch = match timing {
            Timing::Cupti => WATCH_CUPTI,
            Timing::CudaEvent => WATCH_EVENTS,
            Timing::Host => WATCH_OFF,
        };
        CUDA.watch.store(watch, Ordering::Relaxed);
        timing
    })
}

fn choose() -> Timing {
    let devices = match probe() {
        Ok(d) => d.to_vec(),
        Err(e) => {
            note_once(e);
            return Timing::Host;
        }
    };
    let off = !crate::env::cupti();
    if off {
        note_once(CudaError::CuptiOff);
        return Timing::CudaEvent;
    }
    match cupti::start(devices) {
        Ok(_) => Timing::Cupti,
        Err(e) => {
            note_once(e);
            Timing::CudaEvent
        }
    }
}

/// `gpuspan::init()`: starts CUDA timing early (so that work launched before the first annotated
/// call is seen, and CUPTI's start-up is not charged to that call) only in a program that uses
/// CUDA: one with a CUDA site, or one that has loaded libcuda already, and a device present.
/// Otherwise nothing happens and nothing is said: the first CUDA call decides, if one comes.
pub(crate) fn start_at_init() {
    if CUDA.timing.get().is_some() {
        return;
    }
    let cuda_site = crate::sites::all_sites().iter().any(|s| s.desc.backend == Backend::Cuda && !is_own(s));
    if (cuda_site || driver_loaded()) && probe().is_ok() {
        start();
    }
}

/// gpuspan's own sites (`unattributed`).
fn is_own(site: &Site) -> bool {
    site.desc.module_path.starts_with("gpuspan::")
}

/// Whether the process made CUDA work possible: the driver was initialised and some device's
/// primary context (the one cudarc and the runtime API use) is active. Loading libcuda alone is
/// not use: a Vulkan or OpenGL driver, or a library probing for CUDA, loads it too, and a
/// wgpu-only program was told it "used CUDA". Call only when [`driver_loaded`]: this never
/// initialises the driver (an uninitialised one answers `CUDA_ERROR_NOT_INITIALIZED`).
fn context_active() -> bool {
    use cudarc::driver::sys::{self, CUresult};
    let mut count = 0;
    // SAFETY: plain out-parameters; the library is loaded (the caller checked).
    if unsafe { sys::cuDeviceGetCount(&mut count) } != CUresult::CUDA_SUCCESS {
        return false;
    }
    (0..count).any(|ordinal| {
        let (mut device, mut flags, mut active) = (0, 0, 0);
        // SAFETY: as above, for a device ordinal below the count.
        let read = unsafe {
            sys::cuDeviceGet(&mut device, ordinal) == CUresult::CUDA_SUCCESS
                && sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active) == CUresult::CUDA_SUCCESS
        };
        read && active != 0
    })
}

/// Whether this process has loaded libcuda already (never loads it).
fn driver_loaded() -> bool {
    #[cfg(target_os = "linux")]
    {
        const RTLD_NOLOAD: std::ffi::c_int = 4;
        cudarc::get_lib_name_candidates("cuda").iter().any(|name| {
            let flags = libloading::os::unix::RTLD_LAZY | RTLD_NOLOAD;
            // SAFETY: RTLD_NOLOAD only looks the library up; nothing is loaded or initialised.
            unsafe { libloading::os::unix::Library::open(Some(name), flags) }.is_ok()
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// At shutdown: a program that used CUDA only through bare `#[gpu_kernel]`s, without ever
/// starting CUDA timing, had its kernels go unseen. Say so once, with the fix.
pub(crate) fn at_shutdown() {
    if CUDA.timing.get().is_some() {
        return;
    }
    let bare_reached = crate::sites::all_sites()
        .iter()
        .any(|s| s.desc.backend == Backend::Host && !is_own(s) && s.state.stats.totals().calls > 0);
    if bare_reached && driver_loaded() && context_active() {
        note_once(
            "this program used CUDA, but no annotated function names a CUDA stream, so gpuspan never started \
             CUDA timing and their GPU work went unseen: call `gpuspan::cuda::start()` after `gpuspan::init()`",
        );
    }
}

/// [`attach`]: the stream becomes the innermost open scope's, when CUDA events time it.
pub(super) fn attach(stream: &Arc<CudaStream>) {
    if start() != Timing::CudaEvent {
        return;
    }
    let _ = OPEN.try_with(|open| {
        let Ok(mut open) = open.try_borrow_mut() else { return };
        let Some(top) = open.last_mut() else { return };
        if top.events.is_some() {
            return;
        }
        match events::start_kept(stream) {
            Ok(e) => top.events = Some(e),
            Err(e) => note_once(format_args!("recording a CUDA event failed ({e:?}): a call is timed on the host")),
        }
    });
}

/// Scopes open on this thread that CUDA events time (or could, once [`attach`] hands them a
/// stream), innermost last. Only used without CUPTI.
#[derive(Debug)]
struct Open {
    scope_id: u64,
    events: Option<events::EventScope>,
}

thread_local! {
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
}

/// Puts a scope on this thread's list; gives the events back if the list is not available
/// (the thread is ending).
fn register(scope_id: u64, events: Option<events::EventScope>) -> Option<Option<events::EventScope>> {
    let mut slot = Some(events);
    let _ = OPEN.try_with(|open| {
        if let (Ok(mut open), Some(events)) = (open.try_borrow_mut(), slot.take()) {
            open.push(Open { scope_id, events });
        }
    });
    slot
}

/// Takes a scope off this thread's list, with its events (`None` if it is not there).
fn unregister(scope_id: u64) -> Option<Option<events::EventScope>> {
    OPEN.try_with(|open| {
        let mut open = open.try_borrow_mut().ok()?;
        let i = open.iter().rposition(|o| o.scope_id == scope_id)?;
        Some(open.remove(i).events)
    })
    .ok()
    .flatten()
}

/// The CUDA part of an open scope.
#[derive(Debug)]
pub(crate) enum CudaScope {
    /// A synchronous scope under CUPTI: the API calls of its thread in its window are its own;
    /// the window is the call's interval, opened at the scope's start (CUPTI's clock, decision
    /// 46). Becomes [`CudaScope::Cupti`] if it suspends (async).
    Window,
    /// The scope id is pushed as CUPTI external correlation id (popped at the end if `pushed`).
    Cupti {
        pushed: bool,
    },
    /// Without CUPTI: CUDA events on the site's stream, or on the one [`attach`] hands over.
    /// While the scope runs on a thread its events are on that thread's [`OPEN`] list
    /// (`parked: None`), while an async scope is suspended they are here.
    Events {
        /// Boxed: an async scope suspended, or a thread ending, is rare, and the ~50-byte events
        /// inline would grow every open scope (CUPTI's included) and the copies that build it.
        parked: Option<Box<Option<events::EventScope>>>,
        /// The site named a stream (so a missing one is not the site's fault).
        named_stream: bool,
    },
    Host,
}

// An async scope moves between threads with its future.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<CudaScope>();
};

impl CudaScope {
    /// The scope's CUDA part and the call's start: a CUPTI window's start (CUPTI's clock), or
    /// the host clock read before anything else of the scope (decision 46).
    #[inline]
    fn start(scope_id: u64, stream: Option<&CudaStream>) -> (CudaScope, u64) {
        match start() {
            Timing::Cupti => cupti::enter(scope_id),
            Timing::CudaEvent => {
                let start = clock::raw();
                let events = stream.and_then(|s| {
                    events::start(s)
                        .map_err(|e| {
                            note_once(format_args!(
                                "recording a CUDA event failed ({e:?}): a call is timed on the host"
                            ))
                        })
                        .ok()
                });
                (
                    CudaScope::Events {
                        parked: register(scope_id, events).map(Box::new),
                        named_stream: stream.is_some(),
                    },
                    start,
                )
            }
            Timing::Host => (CudaScope::Host, clock::raw()),
        }
    }

    /// A bare scope (no stream in the signature) in a process that times CUDA, as [`start`].
    #[inline]
    fn bare(scope_id: u64) -> (CudaScope, u64) {
        match CUDA.watch.load(Ordering::Relaxed) {
            WATCH_CUPTI => cupti::enter(scope_id),
            WATCH_EVENTS => {
                let start = clock::raw();
                (CudaScope::Events { parked: register(scope_id, None).map(Box::new), named_stream: false }, start)
            }
            _ => (CudaScope::Host, clock::raw()),
        }
    }
}

impl BackendScope for CudaScope {
    /// A CUPTI window: its ends are read on CUPTI's clock, by the window.
    #[inline(always)]
    fn own_clock(&self) -> bool {
        matches!(self, CudaScope::Window)
    }

    /// A span's scope pushes its id as CUPTI's external correlation id around each entry.
    fn tags_span_entries(&self) -> bool {
        true
    }

    /// An async scope stops running on this thread (after a poll): CUPTI's correlation stack
    /// and the list [`attach`] looks at are per thread, so the scope leaves them until the
    /// next poll.
    fn suspend(&mut self, scope_id: u64) {
        match self {
            // An async scope suspends once before its body runs (`ScopedFuture::new`): nothing
            // ran in the window; from now on it pushes its id around each poll.
            CudaScope::Window => {
                cupti::abandon_window();
                *self = CudaScope::Cupti { pushed: false };
            }
            CudaScope::Cupti { pushed } => {
                if *pushed {
                    cupti::pop(scope_id);
                    *pushed = false;
                }
            }
            CudaScope::Events { parked, .. } => {
                if parked.is_none() {
                    *parked = Some(Box::new(unregister(scope_id).flatten()));
                }
            }
            CudaScope::Host => {}
        }
    }

    /// An async scope runs again, perhaps on another thread (before a poll).
    fn resume(&mut self, scope_id: u64) {
        match self {
            CudaScope::Window => {}
            CudaScope::Cupti { pushed } => {
                if !*pushed {
                    *pushed = cupti::push(scope_id);
                }
            }
            CudaScope::Events { parked, .. } => {
                if let Some(events) = parked.take() {
                    *parked = register(scope_id, *events).map(Box::new);
                }
            }
            CudaScope::Host => {}
        }
    }

    /// A window closes, and its scope waits for the buffers CUPTI requested so far (read after
    /// the window's end, so they hold every API record inside it).
    #[inline(always)]
    fn close_in_place(&mut self, call: impl FnOnce(u64) -> Call) {
        cupti::ended_window(call);
    }

    /// The scope ended: its record waits for the GPU's timing.
    fn finish(self, call: Call) {
        match self {
            // The call's ends are its window's, on CUPTI's clock (it opened at the window's start).
            CudaScope::Window => cupti::ended_window(|end| Call { on_own_clock: true, host_end: end, ..call }),
            CudaScope::Cupti { pushed } => {
                if pushed {
                    cupti::pop(call.scope_id);
                }
                // A call that launched nothing keeps its host timing (cupti::finish).
                cupti::ended(call);
            }
            CudaScope::Events { parked, named_stream } => {
                let events = match parked {
                    Some(events) => *events,
                    None => unregister(call.scope_id).flatten(),
                };
                match events {
                    Some(e) => events::finish(e, call.into_record()),
                    None => {
                        if !named_stream && call.site.desc.backend == Backend::Cuda {
                            note_once(format_args!(
                                "`{}` has no CUDA stream parameter: without CUPTI it is timed on the host; add \
                                 `stream = <expr>`, or call `gpuspan::cuda::attach(&stream)` in its body, to time it \
                                 with CUDA events",
                                call.site.desc.name
                            ));
                        }
                        crate::collector::submit(call.into_record());
                    }
                }
            }
            CudaScope::Host => crate::collector::submit(call.into_record()),
        }
    }
}

/// The GPU part and the start of a CUDA site's scope (`Scope::cuda`); `stream` is the site's
/// stream, if it names one.
#[inline]
pub(crate) fn scope_start(scope_id: u64, stream: Option<&CudaStream>) -> (GpuScope, u64) {
    let (cuda, start) = CudaScope::start(scope_id, stream);
    (GpuScope::Cuda(cuda), start)
}

/// The same for a bare site once CUDA is timed (`Scope::cuda_watched`).
#[inline]
pub(crate) fn scope_bare(scope_id: u64) -> (GpuScope, u64) {
    let (cuda, start) = CudaScope::bare(scope_id);
    (GpuScope::Cuda(cuda), start)
}

/// The CUDA part of a selected application span's scope (`span_scopes.rs`): under CUPTI each
/// entry of the span on a thread is a window of that thread's time, as an annotated synchronous
/// scope's (decision 71), or, where a window cannot decide (an external id pushed on the
/// thread: inside an async scope's poll), its id pushed as external correlation id for the
/// entry ([`span_enter`], [`span_exit`]); without CUPTI `None` (CUDA events need a stream, which
/// a span does not name: it is timed on the host).
pub(crate) fn span_scope() -> Option<CudaScope> {
    (CUDA.watch.load(Ordering::Relaxed) == WATCH_CUPTI).then_some(CudaScope::Cupti { pushed: false })
}

/// A selected span is entered on this thread: a window of its time, else its scope's id pushed.
/// An entry lasts on one thread (`tracing`'s guards are not `Send`; an instrumented future's
/// poll enters and exits around it), so a window holds whichever entry, an async poll's too.
#[inline]
pub(crate) fn span_enter(scope_id: u64) -> crate::backends::SpanEntry {
    use crate::backends::SpanEntry;
    match cupti::span_window_open() {
        Some(start) => SpanEntry::Window(start),
        None if cupti::push(scope_id) => SpanEntry::Pushed,
        None => SpanEntry::Untagged,
    }
}

/// The entry [`span_enter`] made on this thread ends.
#[inline]
pub(crate) fn span_exit(site: &'static Site, scope_id: u64, entry: crate::backends::SpanEntry) {
    use crate::backends::SpanEntry;
    match entry {
        SpanEntry::Window(start) => cupti::span_window_close(site, scope_id, start),
        SpanEntry::Pushed => cupti::pop(scope_id),
        SpanEntry::Untagged => {}
    }
}

/// The span layer selects a span: CUDA timing must run before the framework's first launch,
/// which nothing annotated announces (a framework loads libcuda lazily). Started when a driver
/// and a device are present; a process without them is told nothing about CUDA.
pub(crate) fn start_for_spans() {
    if CUDA.timing.get().is_none() && probe().is_ok() {
        start();
    }
}

/// The timing source, if it was chosen already (for `testing_api::timing`).
pub(super) fn chosen() -> Option<Timing> {
    CUDA.timing.get().copied()
}

/// Makes bare scopes mark CUPTI windows without CUPTI or a device (for
/// `testing_api::simulate_cupti_windows`, which says why); `None` once CUDA timing was chosen.
pub(super) fn simulate_cupti_windows() -> Option<usize> {
    if CUDA.timing.get().is_some() {
        return None;
    }
    CUDA.watch.store(WATCH_CUPTI, Ordering::Relaxed);
    Some(cupti::simulate_windows())
}

/// Whether bare scopes take part in CUDA timing: one relaxed load, false unless CUDA timing
/// started with a device.
#[inline(always)]
pub(crate) fn watching() -> bool {
    CUDA.watch.load(Ordering::Relaxed) != WATCH_OFF
}
