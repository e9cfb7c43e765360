//! What the collector holds of the rings: every live thread's ring, and the ring itself (its
//! entries and the producer's and consumers' positions). Apart from `ring.rs`, which writes and
//! counts them and reaches the process's collector, so that the collector names a part that
//! imports nothing above it.

use crate::site::Site;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

/// Calls per ring: 24 bytes each, 12 KiB per thread that makes host-timed calls.
pub(super) const CAPACITY: usize = 512;

/// One counted call.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) site: &'static Site,
    /// The call's duration in raw clock ticks.
    pub(super) ticks: u64,
    /// 0 for "no size": the aggregates add sizes, where the two are the same.
    pub(super) bytes: u64,
}

pub(super) struct Ring {
    /// Entries written; only the owner thread stores it.
    pub(super) head: AtomicUsize,
    /// Entries counted; stored only under `drain`.
    pub(super) tail: AtomicUsize,
    /// `tail + CAPACITY` as the owner last read `tail`: it writes below this without reading
    /// `tail` again. Only the owner uses it.
    pub(super) limit: AtomicUsize,
    pub(super) drain: Mutex<()>,
    pub(super) entries: [UnsafeCell<MaybeUninit<Entry>>; CAPACITY],
}

// SAFETY: an entry slot is written only by the owner between `tail + CAPACITY` and `head`
// (slots no consumer reads), and read only by a consumer holding `drain` between `tail` and
// `head` (slots the owner published with a release store of `head`).
unsafe impl Sync for Ring {}
unsafe impl Send for Ring {}

/// Every live thread's ring, for [`drain_all`]; owned by the
/// [`Collector`](crate::collector::Collector).
pub(crate) struct Rings(pub(super) Mutex<Vec<Arc<Ring>>>);

impl std::fmt::Debug for Rings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let threads = self.0.lock().unwrap_or_else(|e| e.into_inner()).len();
        f.debug_struct("Rings").field("threads", &threads).finish()
    }
}

impl Rings {
    pub(crate) const fn new() -> Self {
        Rings(Mutex::new(Vec::new()))
    }
}

impl Ring {
    pub(super) fn new() -> Self {
        Ring {
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            limit: AtomicUsize::new(CAPACITY),
            drain: Mutex::new(()),
            entries: [const { UnsafeCell::new(MaybeUninit::uninit()) }; CAPACITY],
        }
    }
}
