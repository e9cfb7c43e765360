//! The trace context a call's spans hang under, taken when its scope opens: OpenTelemetry's when
//! the OTLP export is compiled in, nothing (zero-sized) otherwise. Chosen here, at compile time,
//! one module per side (as `otlp_choice.rs`), so that the scope and the record name no exporter.

pub(crate) use side::{capture, capture_span, Parent};

/// With `otlp`: OpenTelemetry's context.
#[cfg(feature = "otlp")]
mod side {
    pub(crate) use crate::otlp::imp::parent::{capture_parent as capture, capture_span_parent as capture_span, Parent};
}

/// Without `otlp`: no exporter takes a parent.
#[cfg(not(feature = "otlp"))]
mod side {
    /// No exporter takes a parent: nothing to carry.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct Parent;

    /// Nothing to capture.
    #[inline(always)]
    pub(crate) fn capture() -> Parent {
        Parent
    }

    /// Nothing to capture (a selected span's parent).
    #[inline(always)]
    pub(crate) fn capture_span() -> Parent {
        Parent
    }
}
