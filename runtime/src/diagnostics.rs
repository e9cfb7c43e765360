//! Failure is data: everything gpuspan could not do is counted here, said once, and shown in
//! the summary, instead of panicking or silently losing measurements.
//!
//! Without the `enabled` feature nothing is measured, so nothing needs saying: what would be
//! said once (a bad `OTEL_*` value in a configuration that is never used) is dropped.

use std::fmt;

#[cfg(feature = "enabled")]
pub(crate) mod state;
#[cfg(feature = "enabled")]
pub(crate) use state::{say, Losses};

/// The process's losses: those of its [`Collector`](crate::collector::Collector). Not inlined:
/// generic code that counts a loss (the OTLP export's) would otherwise name the collector in
/// other crates (see [`note_once`]).
#[cfg(feature = "enabled")]
#[inline(never)]
pub(crate) fn losses() -> &'static Losses {
    &crate::collector::collector().losses
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
