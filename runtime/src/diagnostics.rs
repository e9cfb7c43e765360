//! Failure is data: everything gpuspan could not do is counted here, said once, and shown in
//! the summary, instead of panicking or silently losing measurements.
//!
//! Without the `enabled` feature nothing is measured, so nothing needs saying: what would be
//! said once (a bad `OTEL_*` value in a configuration that is never used) is dropped.

use std::fmt;

// Everything only the instrumented build uses: the counts, the notes and the writer.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::{
    losses, notes, state,
    state::{say, Losses},
};

/// Says `message` once per process (per distinct text) and keeps it for the summary.
///
/// Goes to the `tracing` subscriber when one is installed, otherwise to stderr.
/// Without the `enabled` feature the message is dropped.
pub(crate) fn note_once(message: impl fmt::Display) {
    #[cfg(feature = "enabled")]
    imp::note_text_once(message.to_string());
    #[cfg(not(feature = "enabled"))]
    let _ = message;
}
