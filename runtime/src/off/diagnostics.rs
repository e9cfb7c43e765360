//! Without the `enabled` feature nothing is measured, so nothing needs saying: what would be
//! said once (a bad `OTEL_*` value in a configuration that is never used) is dropped.

/// Drops the message: instrumentation is off.
#[allow(dead_code)]
pub(crate) fn note_once(_message: impl std::fmt::Display) {}
