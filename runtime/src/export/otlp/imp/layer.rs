//! The `tracing` layer that exports the application's own spans (`#[instrument]`, request
//! spans) through the same pipeline, so that they arrive at the collector and become the
//! parents of gpuspan's spans.

use opentelemetry_sdk::trace::SdkTracer;
use std::cell::Cell;
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The tracing-opentelemetry layer, for the application's spans only (see [`AppSpans`]).
pub(in crate::otlp) type OtlpLayer<S> = Filtered<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>, AppSpans, S>;

thread_local! {
    /// This thread exports telemetry (gpuspan's runtime, export thread, or an export running
    /// on the SDK's metric thread).
    static EXPORTING: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as one that only exports, for its whole life.
pub(super) fn mark_export_thread() {
    EXPORTING.with(|e| e.set(true));
}

/// Marks the calling thread as exporting until dropped.
#[derive(Debug)]
pub(super) struct Exporting {
    before: bool,
}

impl Exporting {
    pub(super) fn enter() -> Self {
        Exporting { before: EXPORTING.with(|e| e.replace(true)) }
    }
}

impl Drop for Exporting {
    fn drop(&mut self) {
        let before = self.before;
        EXPORTING.with(|e| e.set(before));
    }
}

/// Which spans the layer exports: not gpuspan's host spans (gpuspan exports those itself, once
/// the GPU time is known and only when sampled; the layer would export one per call), and
/// nothing created while exporting. The exporter's own stack (tonic, h2, hyper) makes `tracing`
/// spans; exported, each export would make more spans to export, without end.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::otlp) struct AppSpans;

fn is_gpuspan(meta: &Metadata<'_>) -> bool {
    let t = meta.target();
    t == "gpuspan" || t.starts_with("gpuspan::") || (meta.is_span() && crate::spans::is_host_span(meta))
}

impl<S> Filter<S> for AppSpans {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        !is_gpuspan(meta) && !EXPORTING.with(Cell::get)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        // Whether a span is created while exporting depends on the thread, so the answer
        // cannot be cached per call site, except for gpuspan's own.
        if is_gpuspan(meta) {
            Interest::never()
        } else {
            Interest::sometimes()
        }
    }
}

pub(in crate::otlp) fn layer<S>(tracer: SdkTracer) -> OtlpLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // Context activation (the default) makes an entered span the current OpenTelemetry
    // context, which is where gpuspan reads the parent of its spans from.
    tracing_opentelemetry::layer().with_tracer(tracer).with_filter(AppSpans)
}

#[cfg(test)]
mod tests {
    use super::is_gpuspan;

    #[test]
    fn gpuspan_host_spans_are_told_apart_by_their_marker_field_not_their_target() {
        tracing::subscriber::with_default(tracing_subscriber::registry(), || {
            // What `#[gpu_kernel]` makes: the user's module as target, the marker field.
            let host =
                tracing::info_span!(target: "my_app::gpu", "saxpy", n = 1, gpuspan.kernel.wgpu = tracing::field::Empty);
            let own = tracing::info_span!(target: "gpuspan::export", "flush");
            let app = tracing::info_span!(target: "my_app", "handle_request", n = 1);
            let near = tracing::info_span!(target: "gpuspan_app", "step");
            assert!(is_gpuspan(host.metadata().expect("enabled")), "an annotated call's host span");
            assert!(is_gpuspan(own.metadata().expect("enabled")), "gpuspan's own target");
            assert!(!is_gpuspan(app.metadata().expect("enabled")), "an application span");
            assert!(!is_gpuspan(near.metadata().expect("enabled")), "a crate named like gpuspan");
        });
    }
}
