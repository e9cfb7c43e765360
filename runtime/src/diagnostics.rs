//! Failure is data: everything gpuspan could not do is counted here, said once, and shown in
//! the summary, instead of panicking or silently losing measurements.
//!
//! Without the `enabled` feature nothing is measured, so nothing needs saying: what would be
//! said once (a bad `OTEL_*` value in a configuration that is never used) is dropped.

#[cfg(feature = "enabled")]
use std::collections::BTreeSet;
use std::fmt;
#[cfg(feature = "enabled")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "enabled")]
use std::sync::Mutex;

/// Counters of measurements that were lost, by cause.
#[cfg(feature = "enabled")]
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

/// The process's losses: those of its [`Collector`](crate::collector::Collector). Not inlined:
/// generic code that counts a loss (the OTLP export's) would otherwise name the collector in
/// other crates (see [`note_once`]).
#[cfg(feature = "enabled")]
#[inline(never)]
pub(crate) fn losses() -> &'static Losses {
    &crate::collector::collector().losses
}

#[cfg(feature = "enabled")]
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
#[cfg(feature = "enabled")]
#[derive(Debug)]
pub(crate) struct Notes(Mutex<BTreeSet<String>>);

#[cfg(feature = "enabled")]
impl Notes {
    pub(crate) const fn new() -> Self {
        Notes(Mutex::new(BTreeSet::new()))
    }
}

/// Says `message` once per process (per distinct text) and keeps it for the summary.
///
/// Goes to the `tracing` subscriber when one is installed, otherwise to stderr.
/// Without the `enabled` feature the message is dropped.
pub(crate) fn note_once(message: impl fmt::Display) {
    #[cfg(feature = "enabled")]
    note_text_once(message.to_string());
    #[cfg(not(feature = "enabled"))]
    let _ = message;
}

/// [`note_once`] of a text: not generic, so that no code outside this crate names the collector
/// (its symbol would be exported, and every access to it go through the GOT: one more load on
/// the hot path).
#[cfg(feature = "enabled")]
#[inline(never)]
fn note_text_once(message: String) {
    let fresh = crate::collector::collector().notes.0.lock().map(|mut n| n.insert(message.clone())).unwrap_or(false);
    if fresh {
        if tracing::dispatcher::has_been_set() {
            tracing::warn!(target: "gpuspan", "{message}");
        } else {
            say(format_args!("gpuspan: {message}"));
        }
    }
}

/// Everything said so far, for the summary.
#[cfg(feature = "enabled")]
pub(crate) fn notes() -> Vec<String> {
    crate::collector::collector().notes.0.lock().map(|n| n.iter().cloned().collect()).unwrap_or_default()
}

/// Writes one line to stderr, ignoring errors: a closed or full stderr must not panic the
/// program (the standard print macros do). Every line gpuspan prints goes through here.
#[cfg(feature = "enabled")]
pub(crate) fn say(line: fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
