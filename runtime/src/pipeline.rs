//! Where resolved records go: into the site's aggregates (always), then, when sampled, to every
//! installed sink (the timeline, OpenTelemetry).

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

static SINKS: RwLock<Vec<Arc<dyn Sink>>> = RwLock::new(Vec::new());
/// How many installed sinks want every record: while none does, a record that is not sampled
/// never touches the lock.
static WANT_ALL: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn add_sink(sink: Arc<dyn Sink>) {
    if let Ok(mut s) = SINKS.write() {
        let all = sink.wants_all();
        if all {
            WANT_ALL.fetch_add(1, Ordering::Relaxed);
        }
        s.push(sink);
        drop(s);
        if all {
            crate::sampling::refresh_floor();
        }
    }
}

pub(crate) fn remove_sink(sink: &Arc<dyn Sink>) {
    if let Ok(mut s) = SINKS.write() {
        let before = s.len();
        s.retain(|x| !Arc::ptr_eq(x, sink));
        if s.len() < before && sink.wants_all() {
            WANT_ALL.fetch_sub(1, Ordering::Relaxed);
            drop(s);
            crate::sampling::refresh_floor();
        }
    }
}

/// Whether some sink wants every record, sampled or not (the sampling floor says it too).
#[inline]
pub(crate) fn wants_every_call() -> bool {
    WANT_ALL.load(Ordering::Relaxed) > 0
}

/// Ends `sinks` in their order: each is taken out of the pipeline and finished, and its line
/// said.
pub(crate) fn finish(sinks: &[Arc<dyn Sink>], deadline: Instant) {
    for sink in sinks {
        remove_sink(sink);
        if let Some(line) = sink.finish(deadline) {
            crate::diagnostics::say(format_args!("{line}"));
        }
    }
}

/// Whether a call of `site` lasting `duration_ns` would reach any sink: it is sampled, or a
/// capture wants every record. When not, the caller may count the call without building a record.
#[inline]
pub(crate) fn wants(site: &crate::Site, duration_ns: u64) -> bool {
    WANT_ALL.load(Ordering::Relaxed) > 0 || crate::sampling::is_sampled_duration(site, duration_ns)
}

/// Takes a finished record.
pub(crate) fn submit(mut record: Record) {
    crate::causality::enforce(&mut record);
    record.site.stats.add(&record);
    let sampled = crate::sampling::is_sampled(&record);
    if !sampled && WANT_ALL.load(Ordering::Relaxed) == 0 {
        return;
    }
    // Once, here, so that every sink shows the same values.
    record.extra = crate::hooks::record_attributes(&record);
    if let Ok(sinks) = SINKS.read() {
        for s in sinks.iter().filter(|s| sampled || s.wants_all()) {
            s.accept(&record);
        }
    }
}
