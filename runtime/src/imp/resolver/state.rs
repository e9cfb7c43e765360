//! What the collector holds of the resolver (its queue of backends, its thread's handle and the
//! flush requests), and what a backend implements to be driven. Apart from `resolver.rs`, which
//! reaches the process's collector, so that the collector names a part that imports nothing
//! above it.

use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

#[cfg(feature = "_gpu")]
/// What one poll of a backend left behind.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Progress {
    /// Calls handed over to the backend that have not reached the pipeline yet.
    pub pending: usize,
    /// When to poll again if nothing wakes the resolver first (`None`: only when woken).
    pub next_wake: Option<Instant>,
}

/// A backend's measurements between a scope's end and the pipeline. Called by one thread at a
/// time, never on the caller's path.
pub(crate) trait PendingWork: Sync {
    /// Names the backend (in notes, and to register it once).
    #[cfg(feature = "_gpu")]
    fn name(&self) -> &'static str;
    /// Resolves what is ready without blocking and submits it to the pipeline.
    #[cfg(feature = "_gpu")]
    fn poll(&self, now: Instant) -> Progress;
    /// Resolves everything pending, waiting on the GPU until at most `deadline` (forcing what
    /// can be forced then). Returns whether nothing is left pending.
    fn flush(&self, deadline: Instant) -> bool;
}

pub(super) struct State {
    pub(super) backends: Vec<&'static dyn PendingWork>,
    pub(super) thread: Option<JoinHandle<()>>,
    /// The thread is running (set when spawned, cleared by the thread as it exits).
    pub(super) running: bool,
    /// What the backends held after the thread's last poll (for the note at [`stop`]).
    pub(super) pending: usize,
    /// Asked to end (by [`stop`]); cleared by the thread as it exits.
    pub(super) stop: bool,
    /// Flush requests: the latest asked, the latest done, its result, and the deadline of the
    /// next one (`Some` while one waits for the thread).
    pub(super) flush_asked: u64,
    pub(super) flush_done: u64,
    pub(super) flush_settled: bool,
    pub(super) flush_deadline: Option<Instant>,
}

/// The resolver's state, a part of the [`Collector`](crate::collector::Collector).
pub(crate) struct Resolver {
    pub(super) state: Mutex<State>,
    /// Signals the thread (new work, a flush, stop) and those waiting on it (a flush done, exit).
    pub(super) signal: Condvar,
    /// Held by whoever drives the backends.
    pub(super) driving: Mutex<()>,
    /// New work since the thread last looked. Outside the lock, so that a burst of scope ends
    /// costs one signal (the first) and an atomic swap each.
    pub(super) woken: AtomicBool,
}

impl Resolver {
    pub(crate) const fn new() -> Self {
        Resolver {
            state: Mutex::new(State {
                backends: Vec::new(),
                thread: None,
                running: false,
                pending: 0,
                stop: false,
                flush_asked: 0,
                flush_done: 0,
                flush_settled: false,
                flush_deadline: None,
            }),
            signal: Condvar::new(),
            driving: Mutex::new(()),
            woken: AtomicBool::new(false),
        }
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").field("woken", &self.woken).finish_non_exhaustive()
    }
}
