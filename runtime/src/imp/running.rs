//! What the `init()`s started and not yet ended, as the collector keeps it: each run is a
//! [`Run`] trait object (its implementor is `init.rs`'s), so that the collector names no part of
//! the composition root above it, as sinks are [`Sink`](crate::pipeline::Sink) objects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One `init()`'s run: what its end must finish (the live feed, the sinks, the summary).
pub(crate) trait Run: Send + std::fmt::Debug {
    /// The run's number, which its guard holds.
    fn id(&self) -> u64;
    /// Ends the run: its outputs written, its summary said.
    fn finish(self: Box<Self>);
}

/// The runs not yet ended; owned by the [`Collector`](crate::collector::Collector), not by the
/// guards, so that `shutdown()` (before `process::exit`) and the signal watcher can reach them.
#[derive(Debug)]
pub(crate) struct Running {
    started: Mutex<Vec<Box<dyn Run>>>,
    next_id: AtomicU64,
    /// Held for a whole shutdown: a second caller (the guard's drop while the signal watcher is
    /// writing) waits until the files are complete instead of letting the process exit under it.
    ending: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Running {
    pub(crate) const fn new() -> Self {
        Running { started: Mutex::new(Vec::new()), next_id: AtomicU64::new(1), ending: Mutex::new(()) }
    }

    /// A number for the next run.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps `run` until its end.
    pub(crate) fn push(&self, run: Box<dyn Run>) {
        lock(&self.started).push(run);
    }

    /// Held for a whole end (see the field).
    pub(crate) fn ending(&self) -> MutexGuard<'_, ()> {
        lock(&self.ending)
    }

    /// Every run not yet ended, taken out.
    pub(crate) fn take_all(&self) -> Vec<Box<dyn Run>> {
        std::mem::take(&mut *lock(&self.started))
    }

    /// The run numbered `id`, taken out, if it was not ended already.
    pub(crate) fn take(&self, id: u64) -> Option<Box<dyn Run>> {
        let mut started = lock(&self.started);
        started.iter().position(|r| r.id() == id).map(|i| started.remove(i))
    }
}
