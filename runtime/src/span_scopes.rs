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
//! - **CUDA under CUPTI**: each entry of the span, on whichever thread enters (a worker's
//!   `in_scope`, a device thread that enters the caller's span, each poll of an instrumented
//!   future), several at once included, is a window of that thread's time, as an annotated
//!   synchronous scope's (decision 71): the innermost window of a thread owns its launches, as
//!   for annotated calls. Inside an async annotated scope's poll (an external id pushed on the
//!   thread) the span's id is pushed instead. Without CUPTI a span is timed on the host. With
//!   the layer active, CUDA timing starts at the first selected span, before the program's
//!   first launch.
//!
//! - **Unowned work is named**: GPU work that no annotated call or selected span owned (by thread
//!   or by time) names the unselected span entered at its launch (`gpuspan.open_span`), and the
//!   summary lists those spans with the selection that would measure them. That needs every
//!   span's entries, so this census starts only at the first such work (decision 55).
//!
//! Cost: an unselected span is not this layer's (the per-layer filter said no for its
//! callsite), and where another layer keeps it alive, each of its enters and exits is one load
//! here ([`SpanLayer`], `live.rs`), until the census starts: from then on each span's entry and
//! exit lock its life. A selected one costs one registry lookup per entry and exit (not the per-layer
//! filter's two), its by-time life's lock, and its backend's tag (a CUPTI window).

// Everything only the instrumented build uses (the selection, the spans held, the census).
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::*;

use std::any::TypeId;
use tracing::span::{Attributes, Id, Record as Values};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Metadata, Subscriber};
use tracing_subscriber::filter::{Filtered, LevelFilter};
use tracing_subscriber::layer::{Context, Layer};
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
pub fn layer<S>() -> SpanLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    SpanLayer::new(None)
}

/// [`layer`] with its own selection, `directives` in `EnvFilter`'s syntax
/// (`my_app::infer=info,candle=debug,[request]`), whatever `init` was given. Directives that do
/// not parse are said once, and nothing is selected. Without the `enabled` feature it selects no
/// span, whatever `directives` say.
pub fn layer_with<S>(directives: &str) -> SpanLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    SpanLayer::new(Some(directives))
}

/// The layer [`layer`] and [`layer_with`] make: [`SpanScopes`] under the per-layer filter
/// [`SpanSelection`], except that a span the filter did not enable is told in one load (the
/// per-layer filter alone looks every span up in the registry at each enter and exit).
pub struct SpanLayer<S> {
    inner: Filtered<SpanScopes, SpanSelection, S>,
}

impl<S> std::fmt::Debug for SpanLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanLayer").field("inner", &self.inner).finish()
    }
}

impl<S> SpanLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    /// The layer with `directives` as its own selection, or `init`'s (`None`).
    fn new(directives: Option<&str>) -> Self {
        SpanLayer { inner: SpanScopes::new().with_filter(SpanSelection::new(directives)) }
    }
}

impl<S> SpanLayer<S> {
    /// Whether span `id` may be one the filter enabled (`false`: certainly not, and the
    /// per-layer filter's lookup would find so).
    #[inline]
    fn may_hold(&self, id: &Id) -> bool {
        self.inner.inner().may_hold(id)
    }
}

// Everything goes to the per-layer filter as it is; only the hooks that take a span id and
// would look it up skip a span the filter did not enable.
// Those are `#[inline]`, so that `Layered` folds them in: an unselected span's enter, exit,
// record and close cost the check's load and no call (docs/benchmarks.md, "Instruction counts").
impl<S> Layer<S> for SpanLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.inner.register_callsite(metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.enabled(metadata, ctx)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_new_span(attrs, id, ctx);
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.inner.max_level_hint()
    }

    #[inline]
    fn on_record(&self, span: &Id, values: &Values<'_>, ctx: Context<'_, S>) {
        if self.may_hold(span) {
            self.inner.on_record(span, values, ctx);
        }
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        if self.may_hold(span) && self.may_hold(follows) {
            self.inner.on_follows_from(span, follows, ctx);
        }
    }

    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.event_enabled(event, ctx)
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.inner.on_event(event, ctx);
    }

    // A span it may hold: past the per-layer filter, one lookup instead of its two
    // (`SpanScopes::entered`).
    #[inline]
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if self.may_hold(id) {
            self.inner.inner().entered(id, ctx, self.inner.filter());
        }
    }

    #[inline]
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if self.may_hold(id) {
            self.inner.inner().exited(id, ctx, self.inner.filter());
        }
    }

    #[inline]
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.may_hold(&id) {
            self.inner.on_close(id, ctx);
        }
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        if self.may_hold(old) {
            self.inner.on_id_change(old, new, ctx);
        }
    }

    // The per-layer filter's downcasts pass through, as `Box<dyn Layer>` and `Vec<L>` pass them:
    // the subscriber finds the filter (its id, the marker of a per-layer filter) through them.
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: forwarded as is; the pointer the inner layer returns points into `self.inner`,
        // which lives as long as `self`.
        unsafe { self.inner.downcast_raw(id) }
    }
}

/// The layer's part: see [`layer`]. Does nothing without the `enabled` feature.
#[derive(Debug)]
#[non_exhaustive] // made by the layer only, in either build
pub struct SpanScopes {
    /// The spans the filter enabled, per bucket of ids ([`SpanLayer`]'s one load).
    #[cfg(feature = "enabled")]
    live: imp::live::LiveSpans,
}

/// Which spans are scopes: an `EnvFilter`'s selection, minus gpuspan's own spans and every event.
/// Selects nothing without the `enabled` feature.
#[derive(Debug)]
#[non_exhaustive] // made by the layer only, in either build
pub struct SpanSelection {
    /// Its directives, or `init`'s, and the callsites it did not switch off.
    #[cfg(feature = "enabled")]
    inner: imp::selected::Selection,
}

/// Without the `enabled` feature: a layer that holds no span and does nothing, under a filter
/// that selects nothing (the instrumented ones are `imp/selected.rs`'s).
#[cfg(not(feature = "enabled"))]
mod off {
    use super::{SpanScopes, SpanSelection};
    use tracing::span::Id;
    use tracing::subscriber::Interest;
    use tracing::{Metadata, Subscriber};
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::{Context, Filter, Layer};

    impl SpanScopes {
        pub(super) fn new() -> Self {
            SpanScopes {}
        }

        /// No span is held, so [`SpanLayer`](super::SpanLayer) forwards none of its hooks.
        #[inline(always)]
        pub(super) fn may_hold(&self, _: &Id) -> bool {
            false
        }

        pub(super) fn entered<S>(&self, _: &Id, _: Context<'_, S>, _: &SpanSelection) {}

        pub(super) fn exited<S>(&self, _: &Id, _: Context<'_, S>, _: &SpanSelection) {}
    }

    impl<S: Subscriber> Layer<S> for SpanScopes {}

    impl SpanSelection {
        pub(super) fn new(_: Option<&str>) -> Self {
            SpanSelection {}
        }
    }

    impl<S: Subscriber> Filter<S> for SpanSelection {
        fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
            false
        }

        fn callsite_enabled(&self, _meta: &'static Metadata<'static>) -> Interest {
            Interest::never()
        }

        fn max_level_hint(&self) -> Option<LevelFilter> {
            Some(LevelFilter::OFF)
        }
    }
}
