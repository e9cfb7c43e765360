//! The `tracing` layer that exports the application's own spans (`#[instrument]`, request
//! spans) through the same pipeline, so that they arrive at the collector and become the
//! parents of gpuspan's spans.

use opentelemetry_sdk::trace::SdkTracer;
use tracing::Subscriber;
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The tracing-opentelemetry layer, without gpuspan's own host spans.
pub type OtlpLayer<S> = Filtered<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>, FilterFn, S>;

/// gpuspan exports its host spans itself, once the GPU time is known and only when sampled;
/// the layer exporting them too would mean one span per call and duplicates.
fn not_gpuspan(meta: &tracing::Metadata<'_>) -> bool {
    let t = meta.target();
    !(t == "gpuspan" || t.starts_with("gpuspan::"))
}

pub(super) fn layer<S>(tracer: SdkTracer) -> OtlpLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // Context activation (the default) makes an entered span the current OpenTelemetry
    // context, which is where gpuspan reads the parent of its spans from.
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(FilterFn::new(not_gpuspan as fn(&tracing::Metadata<'_>) -> bool))
}
