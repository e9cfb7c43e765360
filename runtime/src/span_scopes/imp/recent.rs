//! The selected spans a thread entered last, so that entering one of them again (each poll of a
//! future it instruments, each `in_scope`) finds what the layer keeps for it without the
//! registry's lookup and the extensions' lock, which `tracing` makes every layer pay per hook
//! because it hands a layer only the span's id (decision 76).
//!
//! An entry is keyed by the layer (each subscriber's registry numbers its own spans) and the id,
//! and is used only while its span is open: once a span closed, the registry may give its id (a
//! slab index under a generation that wraps) to a new span, which then takes the lookup. A
//! span's handle is held while it is entered, so it cannot close during the entry; and while it
//! is open its subscriber, so its layer's address is not another's.

use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;
use tracing::span::Id;

/// Spans remembered per thread: a selected span entered inside another keeps both; four cover
/// nested request, stage and step spans.
const WAYS: usize = 4;

/// What a remembered span's state must say: whether the span closed.
pub(crate) trait Closes {
    /// The span closed: its id may already be a new span's.
    fn is_closed(&self) -> bool;
}

/// A remembered span: its layer's address and id, with the state they name.
type Way<T> = Option<((usize, u64), Arc<T>)>;

/// One thread's remembered spans (a `thread_local!` of the layer's side), most recent first.
pub(crate) struct Recent<T> {
    ways: RefCell<[Way<T>; WAYS]>,
}

impl<T: Closes> Recent<T> {
    pub(crate) const fn new() -> Self {
        Recent { ways: RefCell::new([const { None }; WAYS]) }
    }

    /// The state of span `id` of `layer` if remembered and open, else `None` (the caller looks
    /// the span up). Its address rather than a handle: a handle's count is two locked
    /// read-modify-writes per hook, and the state needs none to stay alive while the span is
    /// entered or exited (the caller's own, below). The ways are not borrowed past the return,
    /// so that what the entry does may enter other spans.
    ///
    /// The state is alive while its span is open, which the span's layer guarantees by holding
    /// it (a selected span's extensions keep it until the span closes), and the span cannot
    /// close during its own entry or exit: whoever enters or exits a span holds a handle to it.
    #[inline]
    pub(crate) fn get<L>(&self, layer: &L, id: &Id) -> Option<NonNull<T>> {
        let key = (layer as *const L as usize, id.into_u64());
        let ways = self.ways.try_borrow().ok()?;
        let (_, held) = ways.iter().flatten().find(|(k, _)| *k == key)?;
        (!held.is_closed()).then(|| NonNull::from(&**held))
    }

    /// Remembers the state of span `id` of `layer`, just found by a lookup, as the most recent.
    pub(crate) fn remember<L>(&self, layer: &L, id: &Id, state: &Arc<T>) {
        let key = (layer as *const L as usize, id.into_u64());
        let evicted = self.ways.try_borrow_mut().ok().and_then(|mut ways| {
            // Its own older way (a closed span's id reused) goes first, else the least recent.
            let at = ways.iter().position(|w| w.as_ref().is_some_and(|(k, _)| *k == key)).unwrap_or(WAYS - 1);
            let evicted = ways[at].take();
            ways[..=at].rotate_right(1);
            ways[0] = Some((key, state.clone()));
            evicted
        });
        // Dropped outside the borrow: the last handle to a closed span's state frees it here.
        drop(evicted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct State(AtomicBool);

    impl Closes for State {
        fn is_closed(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }

    fn open() -> Arc<State> {
        Arc::new(State(AtomicBool::new(false)))
    }

    /// A span closed and its id reused: the new span is not taken for the old one; the same id
    /// of another layer (another subscriber) is another span; the least recent of five goes.
    #[test]
    fn a_remembered_span_is_used_only_while_open_only_by_its_layer_and_the_oldest_goes() {
        let recent = Recent::<State>::new();
        let (layer, other_layer) = (1u8, 2u8);
        let id = Id::from_u64(7);
        let first = open();
        recent.remember(&layer, &id, &first);
        let is =
            |got: Option<NonNull<State>>, s: &Arc<State>| got.is_some_and(|g| std::ptr::eq(g.as_ptr(), Arc::as_ptr(s)));
        assert!(is(recent.get(&layer, &id), &first));
        assert!(recent.get(&other_layer, &id).is_none(), "another layer's span of that id is not");
        first.0.store(true, Ordering::Relaxed);
        assert!(recent.get(&layer, &id).is_none(), "the closed span is not used");
        let second = open();
        recent.remember(&layer, &id, &second);
        assert!(is(recent.get(&layer, &id), &second), "its id's new span");
        assert_eq!(Arc::strong_count(&first), 1, "the closed span's way was the one replaced");
        let later: Vec<_> = (8..12).map(|n| (Id::from_u64(n), open())).collect();
        for (id, s) in &later {
            recent.remember(&layer, id, s);
        }
        assert!(recent.get(&layer, &id).is_none(), "the least recent of five is gone");
        assert!(later.iter().all(|(id, s)| is(recent.get(&layer, id), s)));
    }
}
