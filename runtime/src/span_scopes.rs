//! The spans a program already has, as measurement scopes (decision 15, issue 25): a
//! `tracing_subscriber` layer that makes each *selected* span a `Scope` of the same kind an
//! annotated call opens, timed by the same backends, so that a program with no annotation gets
//! GPU time per span.
//!
//! - **Selection**: a per-layer filter ([`SpanSelection`]) in `EnvFilter`'s directive syntax.
//!   [`layer`] takes the selection [`init`](crate::init()) was given (`Config::spans`, else
//!   `GPUSPAN_SPANS`), whenever it is built: until `init` runs it reads `GPUSPAN_SPANS`, and
//!   `init` replaces it (and has `tracing` ask every callsite again). [`layer_with`] takes its
//!   own, fixed. gpuspan's own spans (target `gpuspan` or `gpuspan::..`) and events are never
//!   selected.
//! - **A selected span is one scope**, opened at its first entry (the host clock starts then)
//!   and closed when the span closes: one record per span instance, aggregated under a site
//!   named after the span (one per callsite, registered at run time: `site.rs`), with the
//!   span's fields as attributes and `gpuspan.kind = span`.
//! - **wgpu**: the scope is a queue bracket on the registered device's queue, its start
//!   submitted at the first entry and its end when the span closes (`gpu.timing.bracket_end =
//!   exit`): a bound that holds every submission on that queue in between, whoever made it,
//!   also when the span is entered per poll of a future. Bandwidth is never derived from it.
//! - **CUDA under CUPTI**: the scope's id is pushed as external correlation id around each
//!   entry, on whichever thread enters (a worker's `in_scope`, a device thread that enters the
//!   caller's span, each poll of an instrumented future), several at once included; the
//!   innermost entered scope of a thread owns its launches, as for annotated calls. Without
//!   CUPTI a span is timed on the host. With the layer active, CUDA timing starts at the first
//!   selected span, before the program's first launch.
//!
//! - **Unowned work is named**: GPU work that no annotated call or selected span owned (by thread
//!   or by time) names the unselected span entered at its launch (`gpuspan.open_span`), and the
//!   summary lists those spans with the selection that would measure them. That needs every
//!   span's entries, so this census starts only at the first such work (decision 55).
//!
//! Cost: an unselected span is not this layer's (the per-layer filter said no for its
//! callsite) until the census starts; from then on each span's entry and exit lock its life.
//! A selected one takes its span's extensions and a mutex at each entry and exit.

#[cfg(feature = "enabled")]
mod open_spans;
#[cfg(feature = "enabled")]
mod selected;
#[cfg(feature = "enabled")]
mod slot;
#[cfg(all(feature = "enabled", feature = "cuda"))]
pub(crate) use open_spans::ByTime;
#[cfg(all(feature = "enabled", any(feature = "cuda", feature = "_wgpu")))]
pub(crate) use selected::unselected_at;
#[cfg(all(feature = "enabled", feature = "cuda"))]
pub(crate) use selected::{by_time, init_selects};
#[cfg(feature = "enabled")]
pub(crate) use selected::{say_if_layer_missing, say_unselected_spans};
#[cfg(feature = "enabled")]
pub(crate) use selected::select_from_init;
#[cfg(feature = "enabled")]
pub(crate) use slot::Selected;
#[cfg(all(feature = "enabled", feature = "_wgpu"))]
pub(crate) use {open_spans::WorkByTime, selected::work_by_time};

#[cfg(feature = "enabled")]
use std::sync::Arc;
use tracing::Subscriber;
#[cfg(feature = "enabled")]
use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The layer that makes selected spans measurement scopes, with the selection
/// [`init`](crate::init()) was given: `Config::spans(..)`, else `GPUSPAN_SPANS` (nothing selected
/// when neither says anything). It may be built before or after `init`: until `init` runs it
/// follows `GPUSPAN_SPANS`. Without the `enabled` feature it selects no span.
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt;
/// use tracing_subscriber::util::SubscriberInitExt;
/// tracing_subscriber::registry().with(gpuspan::layer()).init();
/// let _guard = gpuspan::Config::from_env().spans("my_app::infer=info,[request]").init();
/// ```
pub fn layer<S>() -> Filtered<SpanScopes, SpanSelection, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    #[cfg(feature = "enabled")]
    let selection = SpanSelection { fixed: None };
    #[cfg(not(feature = "enabled"))]
    let selection = SpanSelection { _private: () };
    SpanScopes { _private: () }.with_filter(selection)
}

/// [`layer`] with its own selection, `directives` in `EnvFilter`'s syntax
/// (`my_app::infer=info,candle=debug,[request]`), whatever `init` was given. Directives that do
/// not parse are said once, and nothing is selected. Without the `enabled` feature it selects no
/// span, whatever `directives` say.
pub fn layer_with<S>(directives: &str) -> Filtered<SpanScopes, SpanSelection, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    #[cfg(feature = "enabled")]
    let selection = SpanSelection { fixed: Some(selected::parse(Some(directives))) };
    #[cfg(not(feature = "enabled"))]
    let selection = {
        let _ = directives;
        SpanSelection { _private: () }
    };
    SpanScopes { _private: () }.with_filter(selection)
}

/// The layer's part: see [`layer`]. Does nothing without the `enabled` feature.
#[derive(Debug)]
pub struct SpanScopes {
    _private: (),
}

/// Which spans are scopes: an `EnvFilter`'s selection, minus gpuspan's own spans and every event.
/// Selects nothing without the `enabled` feature.
#[derive(Debug)]
pub struct SpanSelection {
    /// `None`: the one `init` was given (or `GPUSPAN_SPANS`), read each time it is asked.
    #[cfg(feature = "enabled")]
    fixed: Option<Option<Arc<EnvFilter>>>,
    #[cfg(not(feature = "enabled"))]
    _private: (),
}

#[cfg(not(feature = "enabled"))]
impl<S: Subscriber> Layer<S> for SpanScopes {}

#[cfg(not(feature = "enabled"))]
impl<S: Subscriber> tracing_subscriber::layer::Filter<S> for SpanSelection {
    fn enabled(&self, _meta: &tracing::Metadata<'_>, _cx: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        false
    }

    fn callsite_enabled(&self, _meta: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::never()
    }

    fn max_level_hint(&self) -> Option<tracing_subscriber::filter::LevelFilter> {
        Some(tracing_subscriber::filter::LevelFilter::OFF)
    }
}
