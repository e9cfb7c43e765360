//! Where sampled records go: the [`Sink`] trait and the installed sinks. The collector
//! (`collector.rs`) owns them and hands each record over (`Collector::submit`).

use crate::record::Record;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// A consumer of sampled records.
pub(crate) trait Sink: Send + Sync + std::fmt::Debug {
    fn accept(&self, record: &Record);
    /// Sees every record, sampled or not (test capture).
    fn wants_all(&self) -> bool {
        false
    }
    /// Called once at shutdown, after the sink was taken out of the pipeline: writes out what it
    /// holds, within `deadline` where the sink has no bound of its own. Returns the line to tell
    /// the user (what was written where), if any.
    fn finish(&self, _deadline: Instant) -> Option<String> {
        None
    }
}

/// The installed sinks; owned by the [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Sinks {
    list: RwLock<Vec<Arc<dyn Sink>>>,
    /// How many installed sinks want every record: while none does, a record that is not
    /// sampled never touches the lock.
    want_all: AtomicUsize,
}

impl Sinks {
    pub(crate) const fn new() -> Self {
        Sinks { list: RwLock::new(Vec::new()), want_all: AtomicUsize::new(0) }
    }

    /// Adds `sink`; returns whether it wants every record (the sampling floor must follow).
    pub(crate) fn add(&self, sink: Arc<dyn Sink>) -> bool {
        let Ok(mut s) = self.list.write() else { return false };
        let all = sink.wants_all();
        if all {
            self.want_all.fetch_add(1, Ordering::Relaxed);
        }
        s.push(sink);
        all
    }

    /// Removes `sink`; returns whether it was there and wanted every record.
    pub(crate) fn remove(&self, sink: &Arc<dyn Sink>) -> bool {
        let Ok(mut s) = self.list.write() else { return false };
        let before = s.len();
        s.retain(|x| !Arc::ptr_eq(x, sink));
        let all = s.len() < before && sink.wants_all();
        if all {
            self.want_all.fetch_sub(1, Ordering::Relaxed);
        }
        all
    }

    /// Whether some sink wants every record, sampled or not (the sampling floor says it too).
    #[inline(always)]
    pub(crate) fn wants_every_call(&self) -> bool {
        self.want_all.load(Ordering::Relaxed) > 0
    }

    /// Hands `record` to every sink that takes it (`sampled`: all of them).
    pub(crate) fn accept(&self, record: &Record, sampled: bool) {
        if let Ok(sinks) = self.list.read() {
            for s in sinks.iter().filter(|s| sampled || s.wants_all()) {
                s.accept(record);
            }
        }
    }
}
