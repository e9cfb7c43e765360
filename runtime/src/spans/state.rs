//! What the collector holds of the application spans: who wants chains, and the next span
//! instance's id. Apart from `spans.rs`, which reaches the process's collector, so that the
//! collector names a part that imports nothing above it.

use std::sync::atomic::{AtomicU64, AtomicUsize};

/// Who wants chains, and the ids of span instances; owned by the
/// [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Chains {
    /// How many captures want chains (the capture file for the whole run, a live capture window
    /// while it is open).
    pub(super) wanted: AtomicUsize,
    pub(super) next_id: AtomicU64,
}

impl Chains {
    pub(crate) const fn new() -> Self {
        Chains { wanted: AtomicUsize::new(0), next_id: AtomicU64::new(1) }
    }
}
