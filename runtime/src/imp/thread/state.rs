//! What the collector holds of the threads: the next index and the names kept. Apart from
//! `thread.rs`, which reaches the process's collector, so that the collector names a part that
//! imports nothing above it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

/// Thread indices and names; owned by the [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Names {
    pub(super) next_index: AtomicU32,
    pub(super) registry: Mutex<Option<Registry>>,
}

impl Names {
    pub(crate) const fn new() -> Self {
        Names { next_index: AtomicU32::new(1), registry: Mutex::new(None) }
    }
}

#[derive(Debug, Default)]
pub(super) struct Registry {
    /// Named threads running, or among the last `KEEP_EXITED` to end.
    pub(super) names: HashMap<u32, Arc<str>>,
    /// The named threads that ended, in the order they did, the oldest first.
    pub(super) exited: VecDeque<u32>,
}
