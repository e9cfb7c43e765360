//! Synchronous CUDA scopes under CUPTI, on the caller's thread: instead of pushing an external
//! correlation id (~255 ns for push + pop on an H100), a scope reads CUPTI's clock when it opens
//! and closes (~32 ns each) and hands the window with its OS thread id to the resolver, which
//! gives it every API call of that thread inside the window (`thread_index.rs`).
//!
//! A scope keeps push/pop where a window cannot decide: one that may suspend and move threads
//! (async: converted at its first suspension, before its body ran) and one that opens while an
//! external id is pushed on its thread (an async poll), whose id must stay on top of CUPTI's
//! stack. Each thread publishes the start of its outermost open window, so that the resolver can
//! tell a call made outside every scope from one whose scope has not ended yet.
//!
//! Every CUPTI scope, windowed or pushed, hands its end to the resolver through its thread's
//! queue (`queue.rs`); a scope ending while its thread is being torn down (no queue any more)
//! goes through the channel of `mod.rs`.

use super::queue::{Producer, Pushed, Queues};
use super::thread_index::{Snapshot, Window};
use crate::scope::Call;
use cudarc::cupti::sys::{self as sys, CUptiResult};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a thread shows the resolver.
#[derive(Debug)]
struct Published {
    thread: u32,
    /// CUPTI's clock when the thread's outermost open window opened; 0 when none is open.
    open_since: AtomicU64,
}

/// A scope's end on its way to the resolver, in its thread's queue: written field by field on
/// every scope's close, so it holds only what the queue does not know (its thread). A window
/// scope's window is its call's ends (`Call::on_own_clock`, decision 46).
pub(super) struct Ended {
    call: Call,
    /// Buffers CUPTI had requested when the scope ended (after its window's end was read).
    fence: u64,
}

/// The threads' windows (in `Cupti`).
pub(super) struct WindowState {
    /// CUPTI writes OS thread ids into API records (set at start): windows can be used.
    pub(super) enabled: AtomicBool,
    /// Every thread that opened a window and is alive (or still has one open).
    threads: Mutex<Vec<Arc<Published>>>,
    /// Every thread's queue of ended scopes, drained by the resolver ([`drain`]).
    ended: Queues<Ended>,
    /// CUPTI's clock is `CLOCK_REALTIME` (checked at start and at every snapshot): windows
    /// read that clock directly, ~20 ns through the vDSO against ~38 ns for
    /// `cuptiGetTimestamp` (decision 43).
    realtime: AtomicBool,
}

impl WindowState {
    pub(super) const fn new() -> WindowState {
        WindowState {
            enabled: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            ended: Queues::new(),
            realtime: AtomicBool::new(false),
        }
    }
}

#[inline(always)]
pub(super) fn state() -> &'static WindowState {
    &super::state().window
}

/// Scopes per segment of a thread's queue: ~100 bytes each (~120 with `otlp`), ~25–30 KiB a
/// segment, two for a thread the resolver keeps up with. The producer wakes the resolver at a
/// quarter of each (64 scopes, ~0.3 ms of tiny launches) and links a further segment when one
/// is full (decision 42).
const SEGMENT: usize = 256;

struct Local {
    /// Windows open on this thread.
    windows: Cell<u32>,
    /// External ids this thread's scopes have pushed and not popped.
    pushed: Cell<u32>,
    published: Arc<Published>,
    ended: Producer<Ended>,
}

impl Local {
    fn new() -> Local {
        // SAFETY: gettid has no preconditions.
        let thread = unsafe { libc::gettid() } as u32;
        let published = Arc::new(Published { thread, open_since: AtomicU64::new(0) });
        if let Ok(mut t) = state().threads.lock() {
            t.push(published.clone());
        }
        Local { windows: Cell::new(0), pushed: Cell::new(0), published, ended: state().ended.producer(SEGMENT, thread) }
    }

    /// Puts an ended scope in this thread's queue, waking the resolver if the queue asks for it.
    /// `call` builds the scope's call here, so that it is not moved through the callers.
    #[inline]
    fn hand_over(&self, call: impl FnOnce() -> Call) {
        // Read after the window's end: the buffers holding its API records are requested by now.
        let fence = super::buffers::requested_so_far();
        // Built before the push: `call` may reach the span registry, and the push must not be
        // entered again between choosing its slot and publishing it.
        let ended = Ended { call: call(), fence };
        if self.ended.push(ended) == Pushed::Wake {
            super::work::wake();
        }
    }

    /// [`hand_over`](Self::hand_over) of a call that is plain data, built in its queue slot
    /// (`call` reaches nothing that could hand a scope over on this thread).
    #[inline(always)]
    fn hand_over_plain(&self, call: impl FnOnce() -> Call) {
        let fence = super::buffers::requested_so_far();
        if self.ended.push_with(|| Ended { call: call(), fence }) == Pushed::Wake {
            super::work::wake();
        }
    }
}

thread_local! {
    static LOCAL: Local = Local::new();
}

/// CUPTI's clock, which its API records use.
#[inline]
pub(super) fn now() -> u64 {
    if state().realtime.load(Ordering::Relaxed) {
        return realtime();
    }
    cupti_now()
}

#[inline]
fn cupti_now() -> u64 {
    let mut t = 0;
    // SAFETY: plain out-parameter; the symbol was checked at start.
    if unsafe { sys::cuptiGetTimestamp(&mut t) } != CUptiResult::CUPTI_SUCCESS {
        return 0;
    }
    t
}

#[inline]
fn realtime() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: plain out-parameter.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether a reading of CUPTI's clock lies between two readings of `CLOCK_REALTIME` taken
/// around it: always, if they are one clock, however long the bracket.
fn bracketed() -> bool {
    let r0 = realtime();
    let c = cupti_now();
    let r1 = realtime();
    r0 != 0 && c != 0 && r0 <= c && c <= r1
}

/// At CUPTI's start: windows read `CLOCK_REALTIME` if CUPTI's clock is that clock, i.e. if
/// each of 1000 readings lies inside its bracket (the tightest take ~40 ns: a clock that differs
/// by more than that fails).
pub(super) fn choose_clock() {
    state().realtime.store((0..1000).all(|_| bracketed()), Ordering::Relaxed);
}

/// Without CUPTI: scopes open and close windows on `CLOCK_REALTIME` as they would under it, so
/// that the path can be counted on a machine without a GPU (`scripts/count-window`).
pub(super) fn simulate() {
    state().realtime.store(true, Ordering::Relaxed);
    state().enabled.store(true, Ordering::Relaxed);
}

/// Windows read `CLOCK_REALTIME` (false before CUPTI started).
pub(super) fn reads_realtime() -> bool {
    state().realtime.load(Ordering::Relaxed)
}

/// On the resolver, before each drain: once a reading falls outside its bracket, the two clocks
/// are not one (CUPTI mapped its own), and windows go back to `cuptiGetTimestamp` for good.
fn verify_clock() {
    if state().realtime.load(Ordering::Relaxed) && !bracketed() {
        state().realtime.store(false, Ordering::Relaxed);
        crate::diagnostics::note_once(
            "CUPTI's clock stopped matching CLOCK_REALTIME: CUDA scopes read it through cuptiGetTimestamp from now \
             on (scopes open at that moment may be attributed by a clock off by up to one resolver poll's drift)",
        );
    }
}

/// Opens a window on this thread and returns its start, or `None` if this scope must push its
/// id instead (windows off, or an external id pushed on this thread).
#[inline]
pub(super) fn open() -> Option<u64> {
    if !state().enabled.load(Ordering::Relaxed) {
        return None;
    }
    LOCAL
        .try_with(|l| {
            if l.pushed.get() > 0 {
                return None;
            }
            let start = now();
            if start == 0 {
                return None; // CUPTI's clock failed: this scope pushes its id
            }
            let open = l.windows.get();
            if open == 0 {
                // SeqCst with the snapshot's load: a call made after this store reads a later clock
                // than a snapshot that missed it.
                l.published.open_since.store(start.max(1), Ordering::SeqCst);
            }
            l.windows.set(open + 1);
            Some(start)
        })
        .ok()
        .flatten()
}

/// Closes this thread's innermost window and hands the scope over with it (before the thread
/// shows the resolver that the window is closed). `call` describes the scope, given the
/// window's end, with the window as its ends: a closure over its state rather than a `Call`, so
/// that the ~70-byte call is built where it is queued instead of moved through here twice more
/// (`scripts/count-window`).
#[inline]
pub(super) fn close(call: impl FnOnce(u64) -> Call) {
    let end = now();
    let mut call = Some(call);
    let _ = LOCAL.try_with(|l| {
        if let Some(call) = call.take() {
            l.hand_over(|| call(end));
        }
        leave(l);
    });
    if let Some(call) = call {
        super::send_ended(call(end), None); // the thread is ending: the scope resolves without a window
    }
}

/// A selected span's entry on this thread ends (its window opened at [`open`]): the window goes
/// to the resolver through this thread's queue as one of the span's (decision 71), in the order
/// of the thread's other windows, as a call of the span's site and scope on its own clock (the
/// resolver tells it from the span's own end, which is on the host clock, by that: `work.rs`).
/// A thread being torn down (no queue any more) loses it: the calls in it are then decided as
/// outside every window (by time, the span's).
#[inline]
pub(super) fn close_span(site: &'static crate::site::Site, scope_id: u64, start: u64) {
    let end = now();
    let _ = LOCAL.try_with(|l| {
        l.hand_over_plain(|| Call {
            site,
            scope_id,
            thread: 0,
            error: false,
            on_own_clock: true,
            host_start: start,
            host_end: end,
            bytes: None,
            memory: None,
            parent: Default::default(),
            spans: None,
            fields: None,
            only_if_gpu: false,
        });
        leave(l);
    });
}

/// A scope without a window (it pushed its id) ended: through this thread's queue as well.
#[inline]
pub(super) fn ended(call: Call) {
    let mut call = Some(call);
    let _ = LOCAL.try_with(|l| {
        if let Some(call) = call.take() {
            l.hand_over(|| call);
        }
    });
    if let Some(call) = call {
        super::send_ended(call, None);
    }
}

/// Hands every scope the threads' queues hold to `f` (its call, fence and window), each
/// thread's in the order they ended.
pub(super) fn drain(mut f: impl FnMut(Call, u64, Option<Window>)) -> usize {
    state().ended.drain(|thread, e| {
        let c = &e.call;
        let window = c.on_own_clock.then_some(Window { thread, start: c.host_start, end: c.host_end });
        f(e.call, e.fence, window)
    })
}

/// Segments the threads' queues allocated past their first (decision 42).
pub(super) fn grown() -> u64 {
    state().ended.grown()
}

fn leave(l: &Local) {
    let open = l.windows.get().saturating_sub(1);
    l.windows.set(open);
    if open == 0 {
        // Release: the window was sent before; a snapshot that still sees it open only waits.
        l.published.open_since.store(0, Ordering::Release);
    }
}

/// An async scope suspends before its body ran: its window closes unused, it pushes instead.
pub(super) fn abandon() {
    let _ = LOCAL.try_with(leave);
}

/// This thread pushed (`+1`) or popped (`-1`) an external id.
#[inline]
pub(super) fn pushed(delta: i32) {
    if !state().enabled.load(Ordering::Relaxed) {
        return;
    }
    let _ = LOCAL.try_with(|l| l.pushed.set(l.pushed.get().saturating_add_signed(delta)));
}

/// Which threads have a window open. Taken before the resolver drains the queues: a window
/// that closed before this was pushed before it.
pub(super) fn snapshot() -> Snapshot {
    verify_clock();
    let now = now();
    let mut open = Vec::new();
    if let Ok(mut threads) = state().threads.lock() {
        threads.retain(|p| {
            let since = p.open_since.load(Ordering::SeqCst);
            if since != 0 {
                open.push((p.thread, since));
            }
            Arc::strong_count(p) > 1 || since != 0
        });
    }
    Snapshot { now, open }
}

#[cfg(test)]
mod tests {
    use super::{drain, realtime, state, Ordering};
    use crate::cuda::CudaScope;
    use crate::probe::Exit;
    use crate::scope::{GpuScope, Scope};
    use crate::site::{Backend, Site, SiteKind};

    static SITE: Site = Site::new(crate::site::site_desc!("window", SiteKind::Kernel, Backend::Cuda));

    fn window_scope(start: u64) -> Scope {
        Scope::open_timed(&SITE, tracing::Span::none(), Some(64), |_| (GpuScope::Cuda(CudaScope::Window), start))
    }

    #[test]
    fn a_plain_window_scope_closed_in_place_is_described_as_one_closed_in_full() {
        state().realtime.store(true, Ordering::Relaxed); // no CUPTI here: windows end on CLOCK_REALTIME
        let begun = realtime();
        drop(window_scope(begun)); // no span, no error: closed in place (`scope::close_general`)
        let mut failed = window_scope(begun);
        failed.exit(Exit::Error); // through `Active::close` and `hand_over`
        drop(failed);
        // A scope that pushed its id (never popped here: it pushed nothing) has no window.
        drop(Scope::open_timed(&SITE, tracing::Span::none(), Some(64), |_| {
            (GpuScope::Cuda(CudaScope::Cupti { pushed: false }), crate::clock::raw())
        }));
        let mut ended = Vec::new();
        drain(|call, _fence, window| {
            if std::ptr::eq(call.site, &SITE) {
                ended.push((call, window));
            }
        });
        assert_eq!(ended.len(), 3, "every scope handed over, in the order they ended");
        assert!(ended.pop().is_some_and(|(_, window)| window.is_none()), "a pushed scope has no window");
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let mut ids = Vec::new();
        for ((call, window), failed) in ended.into_iter().zip([false, true]) {
            let w = window.expect("a synchronous scope hands over its window");
            assert_eq!((w.thread, w.start), (tid, begun), "with its queue's thread");
            assert!(w.end >= w.start);
            // Timed by its window alone, closed in place or in full: no host clock reading.
            assert!(call.on_own_clock, "the window's ends are the call's");
            assert_eq!((call.host_start, call.host_end), (w.start, w.end));
            let r = call.into_record_at(crate::record::Interval { start_ns: w.start, end_ns: w.end });
            assert_eq!(r.error, failed);
            assert_eq!((r.bytes, r.memory.is_none(), r.thread), (Some(64), true, crate::thread::next_scope().0));
            assert!(r.scope_id != 0 && r.host.start_ns <= r.host.end_ns);
            ids.push(r.scope_id);
        }
        assert!(ids[0] < ids[1], "ids in opening order");
    }
}
