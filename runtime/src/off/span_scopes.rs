//! `gpuspan::layer()` without the `enabled` feature: the same types and functions, selecting no
//! span and doing nothing, so that a subscriber built with it compiles unchanged.

use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::{Filtered, LevelFilter};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Selects no span without the `enabled` feature.
pub fn layer<S>() -> Filtered<SpanScopes, SpanSelection, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    SpanScopes { _private: () }.with_filter(SpanSelection { _private: () })
}

/// Selects no span without the `enabled` feature, whatever `directives` say.
pub fn layer_with<S>(_directives: &str) -> Filtered<SpanScopes, SpanSelection, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    layer()
}

/// Does nothing without the `enabled` feature.
#[derive(Debug)]
pub struct SpanScopes {
    _private: (),
}

/// Selects nothing without the `enabled` feature.
#[derive(Debug)]
pub struct SpanSelection {
    _private: (),
}

impl<S: Subscriber> Layer<S> for SpanScopes {}

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
