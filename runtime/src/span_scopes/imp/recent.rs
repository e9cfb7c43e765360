//! The selected spans this thread entered last, so that entering one of them again (each poll
//! of a future it instruments, each `in_scope`) reads its [`Instance`] without the registry's
//! lookup and the extensions' lock, which `tracing` makes every layer pay per hook because it
//! hands a layer only the span's id (decision 76).
//!
//! An entry is keyed by the layer (each subscriber's registry numbers its own spans) and the id,
//! and is used only while its span is open: once a span closed, the registry may give its id (a
//! slab index under a generation that wraps) to a new span, which then takes the lookup. A
//! span's handle is held while it is entered, so it cannot close during the entry; and while it
//! is open its subscriber, so its layer's address is not another's.

use super::selected::Instance;
use std::cell::RefCell;
use std::sync::Arc;

/// Spans remembered per thread: a selected span entered inside another keeps both; four cover
/// nested request, stage and step spans.
const WAYS: usize = 4;

/// A layer's address and a span id, with the instance they name.
type Ways = [Option<((usize, u64), Arc<Instance>)>; WAYS];

thread_local! {
    static RECENT: RefCell<Ways> = const { RefCell::new([const { None }; WAYS]) };
}

/// The instance of span `id` of `layer` if this thread remembers it open, else `None` (the
/// caller looks the span up). A shared handle, so that what the entry does may enter other spans.
#[inline]
pub(super) fn get<L>(layer: &L, id: &tracing::span::Id) -> Option<Arc<Instance>> {
    let id = (layer as *const L as usize, id.into_u64());
    RECENT
        .try_with(|ways| {
            let ways = ways.try_borrow().ok()?;
            let (_, i) = ways.iter().flatten().find(|(held, _)| *held == id)?;
            (!i.is_closed()).then(|| i.clone())
        })
        .ok()
        .flatten()
}

/// Remembers the instance of span `id` of `layer`, just found by a lookup, as this thread's most
/// recent.
pub(super) fn remember<L>(layer: &L, id: &tracing::span::Id, i: &Arc<Instance>) {
    let id = (layer as *const L as usize, id.into_u64());
    let evicted = RECENT.try_with(|ways| {
        let mut ways = ways.try_borrow_mut().ok()?;
        // Its own older way (a closed span's id reused) goes first, else the least recent.
        let at = ways.iter().position(|w| w.as_ref().is_some_and(|(held, _)| *held == id)).unwrap_or(WAYS - 1);
        let evicted = ways[at].take();
        ways[..=at].rotate_right(1);
        ways[0] = Some((id, i.clone()));
        evicted
    });
    // Dropped outside the borrow: the last reference to a closed span's instance frees it here.
    drop(evicted);
}

#[cfg(test)]
mod tests {
    use crate::span_scopes::layer_with;
    use tracing_subscriber::layer::SubscriberExt;

    /// The layer of the subscriber the test makes (the `SpanScopes` inside its `SpanLayer`).
    fn scopes_of(dispatch: &tracing::Dispatch) -> &crate::span_scopes::SpanScopes {
        dispatch.downcast_ref::<crate::span_scopes::SpanScopes>().expect("the span layer's state")
    }

    /// A span closed on one thread and its id reused: the new span is not taken for the old
    /// one; and the same id in another subscriber is another span.
    #[test]
    fn a_remembered_span_is_used_only_while_open_and_only_by_its_layer() {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer_with("recent_app=info")));
        let other = tracing::Dispatch::new(tracing_subscriber::registry().with(layer_with("recent_app=info")));
        let layer = scopes_of(&dispatch);
        tracing::dispatcher::with_default(&dispatch, || {
            let first = tracing::info_span!(target: "recent_app", "first");
            for _ in 0..3 {
                first.in_scope(|| ());
            }
            let first_id = first.id().expect("enabled");
            drop(first);
            // The registry reuses the freed slot: the same index, a new generation, or (after the
            // generation wrapped) the same id; either way the new span's own instance is entered.
            let second = tracing::info_span!(target: "recent_app", "second");
            second.in_scope(|| ());
            let second_id = second.id().expect("enabled");
            let held = super::get(layer, &second_id).map(|i| i.is_closed());
            assert_eq!(held, Some(false), "the second span is remembered, open");
            assert!(super::get(layer, &first_id).is_none(), "the closed span is not used");
            assert!(super::get(scopes_of(&other), &second_id).is_none(), "another subscriber's span of that id is not");
        });
    }
}
