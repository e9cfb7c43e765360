//! The resolver's thread, which only a GPU backend (`_gpu`) starts: backends register, wake it,
//! and it polls them until [`stop`](super::stop).

use super::state::PendingWork;
use super::{drive, flush_all, resolver, state, ON_RESOLVER};
use crate::diagnostics::note_once;
use std::sync::atomic::Ordering;
use std::time::Instant;

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

/// Polls every backend; returns what they still hold and the earliest time one asked to be
/// polled again.
fn poll_all(backends: &[&'static dyn PendingWork], now: Instant) -> (usize, Option<Instant>) {
    backends
        .iter()
        .map(|b| b.poll(now))
        .fold((0, None), |(pending, next), p| (pending + p.pending, [next, p.next_wake].into_iter().flatten().min()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{flush_within, state, stop, PendingWork, Progress};
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

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
