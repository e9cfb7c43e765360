//! What is said and counted, in the instrumented build: the losses and notes the collector
//! owns, and the one way to stderr.

pub(crate) mod state;

use state::{say, Losses};

/// The process's losses: those of its [`Collector`](crate::collector::Collector). Not inlined:
/// generic code that counts a loss (the OTLP export's) would otherwise name the collector in
/// other crates (see [`note_once`](super::note_once)).
#[inline(never)]
pub(crate) fn losses() -> &'static Losses {
    &crate::collector::collector().losses
}

/// [`note_once`](super::note_once) of a text: not generic, so that no code outside this crate names the collector
/// (its symbol would be exported, and every access to it go through the GOT: one more load on
/// the hot path).
#[inline(never)]
pub(super) fn note_text_once(message: String) {
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
pub(crate) fn notes() -> Vec<String> {
    crate::collector::collector().notes.0.lock().map(|n| n.iter().cloned().collect()).unwrap_or_default()
}
