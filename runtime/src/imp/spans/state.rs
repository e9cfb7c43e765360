//! What the collector holds of the application spans (who wants chains, and the next span
//! instance's id) and the chain a record carries. Apart from `spans.rs`, which reaches the process's collector, so that the
//! collector names a part that imports nothing above it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;

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

/// One application span instance and the ones enclosing it.
#[derive(Debug)]
pub(crate) struct SpanNode {
    /// Unique in the process.
    pub id: u64,
    pub name: &'static str,
    pub parent: Option<Arc<SpanNode>>,
    /// Already described in the capture file (there is one per process).
    pub written: AtomicBool,
}

/// The innermost application span of a call, if any.
pub(crate) type Chain = Option<Arc<SpanNode>>;
