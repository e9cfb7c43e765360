//! The integration tests that need no backend feature: every function shape, the host span, spans
//! without the layer, and the fault suite (each case a child process). One binary in every feature
//! set (docs/decisions.md, 77).

mod faults;
mod host_span;
mod shapes;
mod spans_no_layer;
