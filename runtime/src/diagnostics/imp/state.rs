//! What the collector holds of the diagnostics (the losses' counters and the notes said), and the
//! one writer of gpuspan's lines to stderr. Apart from `diagnostics.rs`, which reaches the
//! process's collector, so that the collector names a part that imports nothing above it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters of measurements that were lost, by cause.
#[derive(Debug)]
pub(crate) struct Losses {
    /// Timeline events over the timeline's capacity.
    pub timeline_events: AtomicU64,
    /// GPU query frames dropped because too many were pending (wgpu).
    pub pending_frames: AtomicU64,
    /// Scopes whose GPU timestamps never arrived (query not ended, frame failed).
    pub unresolved_scopes: AtomicU64,
    /// Activity records CUPTI reports it dropped.
    pub cupti_records: AtomicU64,
    /// Spans not admitted to the OTLP export queue because it was full.
    pub otlp_spans_dropped: AtomicU64,
    /// Spans the collector did not take (unreachable, refused, timed out, left at shutdown).
    pub otlp_spans_failed: AtomicU64,
    /// OTLP metric exports that failed (cumulative metrics: the next success carries the counts).
    pub otlp_metric_exports_failed: AtomicU64,
}

impl Losses {
    pub(crate) const fn new() -> Self {
        Losses {
            timeline_events: AtomicU64::new(0),
            pending_frames: AtomicU64::new(0),
            unresolved_scopes: AtomicU64::new(0),
            cupti_records: AtomicU64::new(0),
            otlp_spans_dropped: AtomicU64::new(0),
            otlp_spans_failed: AtomicU64::new(0),
            otlp_metric_exports_failed: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// `(what, count)` for every non-zero counter.
    pub(crate) fn snapshot(&self) -> Vec<(&'static str, u64)> {
        [
            ("timeline events over capacity", &self.timeline_events),
            ("GPU query frames dropped (too many pending)", &self.pending_frames),
            ("scopes whose GPU timestamps never arrived", &self.unresolved_scopes),
            ("CUPTI activity records dropped", &self.cupti_records),
            ("spans dropped (OTLP export queue full)", &self.otlp_spans_dropped),
            ("spans not delivered to the OTLP collector", &self.otlp_spans_failed),
            ("OTLP metric exports failed", &self.otlp_metric_exports_failed),
        ]
        .into_iter()
        .map(|(what, c)| (what, c.load(Ordering::Relaxed)))
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// Every note said, once each; owned by the [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Notes(pub(super) Mutex<BTreeSet<String>>);

impl Notes {
    pub(crate) const fn new() -> Self {
        Notes(Mutex::new(BTreeSet::new()))
    }
}

/// Writes one line to stderr, ignoring errors: a closed or full stderr must not panic the
/// program (the standard print macros do). Every line gpuspan prints goes through here.
pub(crate) fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
