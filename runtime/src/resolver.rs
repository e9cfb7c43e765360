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
#[cfg(feature = "_gpu")]
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

pub(crate) mod state;
pub(crate) use state::PendingWork;
#[cfg(feature = "_gpu")]
pub(crate) use state::Progress;
use state::{Resolver, State};

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

#[cfg(feature = "_gpu")]
/// Adds `backend` to those the resolver drives (once; later calls only wake it).
pub(crate) fn register(backend: &'static dyn PendingWork) {
    {
        let mut guard = state();
        let s = &mut *guard;
        if !s.backends.iter().any(|b| b.name() == backend.name()) {
            s.backends.push(backend);
        }
    }
    wake();
}

#[cfg(feature = "_gpu")]
/// A registered backend has new work: wakes the resolver, starting it if it is not running.
/// Only the first wake after the resolver last looked takes the lock.
pub(crate) fn wake() {
    if resolver().woken.swap(true, Ordering::AcqRel) {
        return;
    }
    let mut guard = state();
    let s = &mut *guard;
    if !s.running && !s.backends.is_empty() {
        // A thread that ended (after `stop`) is joined before its successor starts.
        let old = s.thread.take();
        let spawned = std::thread::Builder::new().name("gpuspan-resolver".into()).spawn(run);
        match spawned {
            Ok(handle) => {
                s.thread = Some(handle);
                s.running = true;
            }
            Err(e) => note_once(format_args!(
                "could not start the gpuspan-resolver thread ({e}); GPU timings arrive only at flush"
            )),
        }
        drop(guard);
        if let Some(old) = old {
            let _ = old.join();
        }
        return;
    }
    drop(guard);
    resolver().signal.notify_all();
}

#[cfg(feature = "_gpu")]
fn run() {
    ON_RESOLVER.with(|r| r.set(true));
    let mut guard = state();
    loop {
        let s = &mut *guard;
        if let Some(deadline) = s.flush_deadline.take() {
            let asked = s.flush_asked;
            let backends = s.backends.clone();
            drop(guard);
            let settled = drive(|| flush_all(&backends, deadline));
            guard = state();
            let s = &mut *guard;
            s.flush_done = asked;
            s.flush_settled = settled;
            resolver().signal.notify_all();
            continue;
        }
        if s.stop && !resolver().woken.load(Ordering::Acquire) {
            s.stop = false;
            s.running = false;
            resolver().signal.notify_all();
            return;
        }
        resolver().woken.store(false, Ordering::Release);
        let backends = s.backends.clone();
        drop(guard);
        let now = Instant::now();
        let (pending, next) = drive(|| poll_all(&backends, now));
        guard = state();
        let s = &mut *guard;
        s.pending = pending;
        if resolver().woken.load(Ordering::Acquire) || s.stop || s.flush_deadline.is_some() {
            continue;
        }
        guard = match next {
            Some(t) => resolver()
                .signal
                .wait_timeout(guard, t.saturating_duration_since(Instant::now()))
                .map_or_else(|e| e.into_inner().0, |(g, _)| g),
            None => resolver().signal.wait(guard).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

fn drive<T>(f: impl FnOnce() -> T) -> T {
    let _driving = resolver().driving.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

#[cfg(feature = "_gpu")]
/// Polls every backend; returns what they still hold and the earliest time one asked to be
/// polled again.
fn poll_all(backends: &[&'static dyn PendingWork], now: Instant) -> (usize, Option<Instant>) {
    backends
        .iter()
        .map(|b| b.poll(now))
        .fold((0, None), |(pending, next), p| (pending + p.pending, [next, p.next_wake].into_iter().flatten().min()))
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

#[cfg(all(test, feature = "_gpu"))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A backend with `left` calls that resolve one per poll.
    struct Countdown {
        left: AtomicUsize,
        polls: AtomicUsize,
    }

    impl PendingWork for Countdown {
        fn name(&self) -> &'static str {
            "countdown (test)"
        }
        fn poll(&self, now: Instant) -> Progress {
            self.polls.fetch_add(1, Ordering::SeqCst);
            let left = self.left.load(Ordering::SeqCst).saturating_sub(1);
            self.left.store(left, Ordering::SeqCst);
            Progress { pending: left, next_wake: (left > 0).then(|| now + Duration::from_millis(1)) }
        }
        fn flush(&self, deadline: Instant) -> bool {
            while self.left.load(Ordering::SeqCst) > 0 {
                if Instant::now() >= deadline {
                    return false;
                }
                self.poll(Instant::now());
            }
            true
        }
    }

    static WORK: Countdown = Countdown { left: AtomicUsize::new(0), polls: AtomicUsize::new(0) };

    #[test]
    fn the_thread_polls_when_woken_flushes_through_itself_and_restarts_after_stop() {
        WORK.left.store(5, Ordering::SeqCst);
        register(&WORK);
        assert!(flush_within(Duration::from_secs(5)), "a flush resolves everything pending");
        assert_eq!(WORK.left.load(Ordering::SeqCst), 0);
        stop(Instant::now() + Duration::from_secs(5));
        assert!(
            {
                let s = state();
                !s.running && s.thread.is_none()
            },
            "joined at stop"
        );
        // Without a thread, a flush drives the backends itself.
        WORK.left.store(3, Ordering::SeqCst);
        assert!(flush_within(Duration::from_secs(5)));
        // New work starts a fresh thread, which polls it down without a flush.
        let before = WORK.polls.load(Ordering::SeqCst);
        WORK.left.store(4, Ordering::SeqCst);
        wake();
        let until = Instant::now() + Duration::from_secs(10);
        while WORK.left.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(WORK.left.load(Ordering::SeqCst), 0, "the restarted thread resolved the work");
        assert!(WORK.polls.load(Ordering::SeqCst) >= before + 4);
        stop(Instant::now() + Duration::from_secs(5));
    }
}
