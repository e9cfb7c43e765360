//! Where resolved records go: into the site's aggregates (always), then, when sampled, to every
//! installed sink (the timeline, OpenTelemetry).

use crate::record::Record;
use std::sync::{Arc, RwLock};

/// A consumer of sampled records.
pub(crate) trait Sink: Send + Sync {
    fn accept(&self, record: &Record);
    /// Sees every record, sampled or not (test capture).
    fn wants_all(&self) -> bool {
        false
    }
}

static SINKS: RwLock<Vec<Arc<dyn Sink>>> = RwLock::new(Vec::new());

pub(crate) fn add_sink(sink: Arc<dyn Sink>) {
    if let Ok(mut s) = SINKS.write() {
        s.push(sink);
    }
}

pub(crate) fn remove_sink(sink: &Arc<dyn Sink>) {
    if let Ok(mut s) = SINKS.write() {
        s.retain(|x| !Arc::ptr_eq(x, sink));
    }
}

/// Takes a finished record.
pub(crate) fn submit(record: Record) {
    record.site.stats.add(&record);
    let sampled = crate::sampling::is_sampled(&record);
    if let Ok(sinks) = SINKS.read() {
        for s in sinks.iter().filter(|s| sampled || s.wants_all()) {
            s.accept(&record);
        }
    }
}
