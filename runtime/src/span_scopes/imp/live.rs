//! Which spans and callsites the layer may want, each answered in one load, so that an
//! unselected span beside another layer costs `tracing`'s own enter and exit (decision 63).
//!
//! `tracing_subscriber`'s per-layer filter (`Filtered`) looks every span up in the registry at
//! each enter, exit, record and close to read whether its filter enabled it. The layer counts the
//! spans its filter enabled instead, per bucket of their ids (a counting Bloom filter with one
//! hash): a span whose bucket is empty was not enabled, and the lookup is skipped. A span in a
//! busy bucket (its own, or another live selected span's) takes the lookup as before, so a
//! collision costs time, never a record.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use tracing::span::Id;
use tracing::Metadata;

/// Buckets: 256 counters (1 KiB per layer), few enough to stay in cache, many enough that a
/// program's few live selected spans rarely share one with the span being entered.
const BUCKETS: usize = 256;

/// Per bucket of span ids, how many spans the layer's filter enabled are alive.
#[derive(Debug)]
pub(crate) struct LiveSpans {
    buckets: [AtomicU32; BUCKETS],
}

impl LiveSpans {
    pub(crate) const fn new() -> Self {
        LiveSpans { buckets: [const { AtomicU32::new(0) }; BUCKETS] }
    }

    /// The registry's ids are slab indices (low bits) under a generation (high bits): a
    /// Fibonacci hash spreads both over the buckets.
    fn bucket(&self, id: &Id) -> &AtomicU32 {
        let h = id.into_u64().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKETS.trailing_zeros());
        &self.buckets[h as usize]
    }

    /// The filter enabled span `id` (its `on_new_span` reached the layer).
    pub(crate) fn opened(&self, id: &Id) {
        self.bucket(id).fetch_add(1, Ordering::Relaxed);
    }

    /// Span `id`, which [`opened`](Self::opened) counted, closed.
    pub(crate) fn closed(&self, id: &Id) {
        self.bucket(id).fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether span `id` may be one the filter enabled: `false` means certainly not. Relaxed is
    /// enough: a span is entered after it was made (on another thread only once the handle
    /// crossed over, which orders the count before), and is never entered after it closed.
    #[inline]
    pub(crate) fn may_hold(&self, id: &Id) -> bool {
        self.bucket(id).load(Ordering::Relaxed) != 0
    }
}

/// What the selection said of each callsite, as a pair of bits per hash of its metadata's
/// address: *known* (registered with this layer) and *may be wanted* (the selection did not
/// switch it off). Set when `tracing` registers a callsite (or asks again after `init` changed
/// the selection, or the census started), never cleared, so a stale bit only sends a span to the
/// full check. A known pair that says "off" answers the filter's per-span question (`enabled`,
/// asked where another layer keeps the callsite on) in one load; a callsite not known yet takes
/// the full check: `tracing` answers `sometimes` to a thread whose callsite another thread is
/// still registering, and that thread's span must not be lost.
#[derive(Debug)]
pub(crate) struct Callsites {
    bits: [AtomicU64; CALLSITE_WORDS],
}

/// 16 words of 32 pairs: 512 pairs; a program's selected callsites are few.
const CALLSITE_WORDS: usize = 16;

impl Callsites {
    pub(crate) const fn new() -> Self {
        Callsites { bits: [const { AtomicU64::new(0) }; CALLSITE_WORDS] }
    }

    /// The word and the pair's *known* bit; its *may be wanted* bit is the next one.
    fn pair(meta: &Metadata<'_>) -> (usize, u64) {
        let h = (meta as *const Metadata<'_> as usize as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55;
        ((h >> 5) as usize, 1 << (2 * (h & 31)))
    }

    /// The selection answered for `meta`'s callsite: `wanted` unless it switched it off.
    pub(crate) fn mark(&self, meta: &'static Metadata<'static>, wanted: bool) {
        let (word, known) = Self::pair(meta);
        let bits = if wanted { known | known << 1 } else { known };
        self.bits[word].fetch_or(bits, Ordering::Relaxed);
    }

    /// What the selection said of `meta`'s callsite: `None` while it is not known yet (another
    /// thread may still be registering it), else whether it (or one sharing its pair) may be
    /// wanted.
    pub(crate) fn said(&self, meta: &Metadata<'_>) -> Option<bool> {
        let (word, known) = Self::pair(meta);
        let w = self.bits[word].load(Ordering::Relaxed);
        (w & known != 0).then_some(w & (known << 1) != 0)
    }

    /// `false`: the selection switched `meta`'s callsite off (and no callsite sharing its pair
    /// may be wanted).
    #[inline]
    pub(crate) fn may_be_wanted(&self, meta: &Metadata<'_>) -> bool {
        let (word, known) = Self::pair(meta);
        let w = self.bits[word].load(Ordering::Relaxed);
        w & (known << 1) != 0 || w & known == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callsite_is_off_only_once_known_off_and_others_only_by_collision() {
        let sites = Callsites::new();
        // Two callsites' metadata, from spans a registry keeps.
        let (wanted, off) = tracing::subscriber::with_default(tracing_subscriber::registry(), || {
            let wanted = tracing::info_span!(target: "live_test", "wanted");
            let off = tracing::info_span!(target: "live_test", "off");
            (wanted.metadata().expect("enabled"), off.metadata().expect("enabled"))
        });
        assert!(sites.may_be_wanted(wanted) && sites.may_be_wanted(off), "not known yet: the full check");
        sites.mark(off, false);
        sites.mark(wanted, true);
        assert!(sites.may_be_wanted(wanted));
        let shared = Callsites::pair(wanted) == Callsites::pair(off);
        assert_eq!(sites.may_be_wanted(off), shared, "off in one load, unless it shares a wanted pair");
    }

    #[test]
    fn a_span_is_held_from_opened_to_closed_and_others_only_by_collision() {
        let live = LiveSpans::new();
        let ids: Vec<Id> = (1..=4096u64).map(Id::from_u64).collect();
        assert!(ids.iter().all(|id| !live.may_hold(id)), "nothing opened: nothing held");
        let selected = Id::from_u64(17);
        live.opened(&selected);
        live.opened(&selected); // the same id again, as after a close and reuse by the slab
        assert!(live.may_hold(&selected));
        // One live span makes only the ids of its bucket take the lookup: about 1 in 256.
        let colliding = ids.iter().filter(|id| live.may_hold(id)).count();
        assert!((1..=4096 / 128).contains(&colliding), "{colliding} of 4096 ids share its bucket");
        live.closed(&selected);
        assert!(live.may_hold(&selected), "still one open");
        live.closed(&selected);
        assert!(ids.iter().all(|id| !live.may_hold(id)), "all closed: nothing held");
    }
}
