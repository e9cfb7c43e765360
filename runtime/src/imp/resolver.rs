//! The one resolver: a `gpuspan-resolver` thread that brings every backend's pending GPU
//! measurements home, off the caller's path, and `gpuspan::flush()`.
//!
//! A backend (wgpu frames, CUPTI buffers, CUDA events) implements [`PendingWork`] in its own
//! file and calls [`wake`] whenever it has something new (a scope ended, CUPTI returned a
//! buffer, a submission finished). The first wake starts the thread; it polls every registered
//! backend, then sleeps until the next wake or the earliest `next_wake` a backend asked for.
//! Only one thread at a time drives the backends (the resolver, or a flush on the caller's
//! thread when there is no resolver), so a backend needs no counter of records "taken but not
//! yet submitted": when its `poll` returns, what it took is in the pipeline.
//!
//! [`stop`] (at shutdown) ends the thread and joins it within a deadline; new work after that
//! starts a fresh one.

// Without a GPU backend (`_gpu`) nothing registers: only `flush` and `stop` are reached, and what
// only a backend calls is not built.

use crate::diagnostics::note_once;
use std::cell::Cell;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

pub(crate) mod state;
pub(crate) use state::PendingWork;
// The thread itself, started by a backend's first wake.
#[cfg(feature = "_gpu")]
mod driving;
use state::{Resolver, State};
#[cfg(feature = "_gpu")]
pub(crate) use {
    driving::{register, wake},
    state::Progress,
};

fn resolver() -> &'static Resolver {
    &crate::collector::collector().resolver
}

/// How long a flush's caller waits past its deadline for the thread to report (a backend's
/// last GPU wait may end just after it).
const GRACE: Duration = Duration::from_millis(250);

thread_local! {
    /// Set on the resolver thread: a flush asked from there (a sink) must not wait for itself.
    static ON_RESOLVER: Cell<bool> = const { Cell::new(false) };
}

fn state() -> MutexGuard<'static, State> {
    resolver().state.lock().unwrap_or_else(|e| e.into_inner())
}

fn drive<T>(f: impl FnOnce() -> T) -> T {
    let _driving = resolver().driving.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

/// Flushes every backend, each whatever the ones before it returned.
fn flush_all(backends: &[&'static dyn PendingWork], deadline: Instant) -> bool {
    let results: Vec<bool> = backends.iter().map(|b| b.flush(deadline)).collect();
    results.into_iter().all(|done| done)
}

/// [`flush`] waiting at most `timeout` (for [`Guard::flush`](crate::Guard::flush) and the end).
pub(crate) fn flush_within(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    // From a sink on the resolver thread: the thread is busy with this very call.
    if ON_RESOLVER.with(Cell::get) {
        return false;
    }
    let mut guard = state();
    let s = &mut *guard;
    if s.backends.is_empty() {
        return true;
    }
    if !s.running {
        // No thread (it could not start, or ended at shutdown): this thread drives.
        let backends = s.backends.clone();
        drop(guard);
        return drive(|| flush_all(&backends, deadline));
    }
    s.flush_asked += 1;
    let mine = s.flush_asked;
    s.flush_deadline = Some(s.flush_deadline.map_or(deadline, |d| d.max(deadline)));
    resolver().signal.notify_all();
    let give_up = deadline + GRACE;
    loop {
        let s = &mut *guard;
        if s.flush_done >= mine {
            return s.flush_settled;
        }
        let now = Instant::now();
        if now >= give_up || !s.running {
            return false;
        }
        guard =
            resolver().signal.wait_timeout(guard, give_up - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
    }
}

/// Ends the resolver thread (after the work it was woken for) and joins it, waiting at most
/// until `deadline`; a thread still busy then is left to finish on its own (said once).
pub(crate) fn stop(deadline: Instant) {
    let mut guard = state();
    let s = &mut *guard;
    if !s.running || ON_RESOLVER.with(Cell::get) {
        return;
    }
    s.stop = true;
    resolver().signal.notify_all();
    loop {
        let s = &mut *guard;
        if !s.running {
            let handle = s.thread.take();
            drop(guard);
            if let Some(h) = handle {
                let _ = h.join();
            }
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            note_once(format_args!(
                "the gpuspan-resolver thread was still busy at shutdown ({} calls pending); it was left to finish \
                 on its own",
                s.pending
            ));
            return;
        }
        guard =
            resolver().signal.wait_timeout(guard, deadline - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
    }
}
