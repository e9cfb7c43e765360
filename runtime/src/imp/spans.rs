//! The application `tracing` spans a call was made in (a request, a batch), for the capture
//! file's "GPU cost per request" and its flamegraph: read from the subscriber's span registry
//! (tracing-subscriber's `Registry`, which `fmt` and every layered subscriber are built on)
//! when a call that becomes a record ends, and only while a capture asks for them: a call only
//! counted in the aggregates never asks, and without a capture the question is one relaxed load.
//!
//! The current span is what `tracing` says it is: across `.await`s the span a future was
//! `instrument`ed with (entered around each poll, on whichever thread polls), across a thread
//! hop the span the program entered there. gpuspan's own host spans are left out of a chain:
//! annotated calls nest by their host intervals in the capture.
//!
//! Each span instance gets its own id, kept in the span's extensions with its chain, so that the
//! chain is built once per span and two requests with one name stay apart (`tracing`'s ids are
//! reused once a span closes). Without a registry under the subscriber there is no chain.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

pub(crate) mod state;
use state::Chains;
pub(crate) use state::{Chain, SpanNode};
use tracing_subscriber::registry::{LookupSpan, Registry};

#[inline(always)]
fn chains() -> &'static Chains {
    &crate::collector::collector().spans
}

/// From now on, scopes take their span chain (until as many [`unwant`]s).
pub(crate) fn want() {
    chains().wanted.fetch_add(1, Relaxed);
}

/// One capture that wanted chains no longer does (a live capture window that closed).
pub(crate) fn unwant() {
    let _ = chains().wanted.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
}

/// The chain of the spans a call is made in, when a capture wants it: the parent of the call's
/// host span `host` (which the macro made under the current span), or, when no subscriber
/// wanted that span (`None`), the current span. Asked when the call ends and becomes a record.
#[inline]
pub(crate) fn capture(host: Option<&tracing::Span>) -> Chain {
    if chains().wanted.load(Relaxed) == 0 {
        return None;
    }
    from(host)
}

#[inline(never)]
fn from(host: Option<&tracing::Span>) -> Chain {
    let Some(host) = host.filter(|h| !h.is_disabled()) else { return current() };
    // The host span's own dispatcher and id: no thread-local lookup of the current span.
    host.with_subscriber(|(id, d)| {
        let registry = d.downcast_ref::<Registry>()?;
        node(registry.span(id)?.parent()?, 0)
    })
    .flatten()
}

fn current() -> Chain {
    tracing::dispatcher::get_default(|d| {
        let registry = d.downcast_ref::<Registry>()?;
        node(registry.span(d.current_span().id()?)?, 0)
    })
}

/// What a span's extensions keep: its chain (for one of gpuspan's spans, its parent's).
struct Cached(Chain);

/// Deeper than any real nesting; a bound on the recursion all the same.
const MAX_DEPTH: usize = 256;

/// The chain of a selected span's own record (`span_scopes.rs`): the span instance itself, then
/// the spans enclosing it, while a capture wants chains. Its record's chain is where the spans
/// and calls made inside it hang (self vs inclusive time in `gpuspan report`). Read from the
/// current dispatcher's registry (a per-layer filter's view of the span would skip the spans it
/// filtered out), and only if the span of that id there is of `callsite`.
pub(crate) fn of_span(id: &tracing::span::Id, callsite: &tracing::callsite::Identifier) -> Chain {
    if chains().wanted.load(Relaxed) == 0 {
        return None;
    }
    tracing::dispatcher::get_default(|d| {
        let span = d.downcast_ref::<Registry>()?.span(id)?;
        if span.metadata().callsite() != *callsite {
            return None;
        }
        node(span, 0)
    })
}

fn node(span: tracing_subscriber::registry::SpanRef<'_, Registry>, depth: usize) -> Chain {
    if let Some(Cached(c)) = span.extensions().get::<Cached>() {
        return c.clone();
    }
    let parent = match span.parent() {
        Some(p) if depth < MAX_DEPTH => node(p, depth + 1),
        _ => None,
    };
    let chain = if is_host_span(span.metadata()) {
        parent
    } else {
        let id = chains().next_id.fetch_add(1, Relaxed);
        Some(Arc::new(SpanNode { id, name: span.name(), parent, written: AtomicBool::new(false) }))
    };
    let mut ext = span.extensions_mut();
    // Another thread may have built it meanwhile: keep the first, so the instance has one id.
    if let Some(Cached(c)) = ext.get_mut::<Cached>() {
        return c.clone();
    }
    ext.insert(Cached(chain.clone()));
    chain
}

/// gpuspan's own host span of an annotated call: its target is the user's module, and its
/// metadata has the never-recorded field `gpuspan.<kind>.<backend>` that the macro adds.
pub(crate) fn is_host_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.fields().iter().any(|f| f.name().starts_with("gpuspan."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// The names of a chain, outermost first.
    fn names(chain: &Chain) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut at = chain.as_deref();
        while let Some(n) = at {
            out.push(n.name);
            at = n.parent.as_deref();
        }
        out.reverse();
        out
    }

    #[test]
    fn a_chain_names_the_enclosing_spans_and_tells_two_instances_apart() {
        want();
        let subscriber =
            tracing_subscriber::registry().with(tracing_subscriber::fmt::layer().with_writer(std::io::sink));
        tracing::subscriber::with_default(subscriber, || {
            let host = || tracing::info_span!("saxpy", gpuspan.kernel.wgpu = tracing::field::Empty);
            let capture = || capture(Some(&host()));
            assert!(capture().is_none(), "no span entered");
            let outer = tracing::info_span!("handle_request");
            let (a, b) = outer.in_scope(|| {
                let inner = tracing::info_span!("forward");
                // Inside an annotated call: the chain skips the outer call's host span.
                let a = inner.in_scope(|| host().in_scope(capture));
                let b = inner.in_scope(capture);
                (a, b)
            });
            assert_eq!(names(&a), ["handle_request", "forward"], "gpuspan's own span is not in the chain");
            assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()), "one node per span instance");
            let again = tracing::info_span!("handle_request").in_scope(capture);
            let filtered = outer.in_scope(current);
            assert_eq!(names(&filtered), ["handle_request"], "a call whose host span is filtered out");
            let first = a.as_ref().unwrap().parent.as_ref().unwrap();
            assert_eq!(names(&again), ["handle_request"]);
            assert_ne!(again.unwrap().id, first.id, "a second request with the same name is another instance");
            // Across a thread: the span the program carries there.
            let carried = outer.clone();
            let hop = std::thread::spawn(move || carried.in_scope(current)).join().unwrap();
            assert!(hop.is_none(), "the other thread has no subscriber here: no registry, no chain");
        });
    }
}
