//! What the collector holds of the signal handling: read in signal context, so atomics only.
//! Apart from `signal.rs`, which reaches the process's collector, so that the collector names
//! a part that imports nothing above it.

pub(crate) use os::Signals;

/// Unix: the handlers' state.
#[cfg(unix)]
mod os {
    use std::sync::{
        atomic::{AtomicBool, AtomicI32, AtomicU32},
        Once, OnceLock,
    };

    /// The signal handling's state, in the [`Collector`](crate::collector::Collector): read in
    /// signal context, so atomics only.
    #[derive(Debug)]
    pub(crate) struct Signals {
        /// SIGINT/SIGTERM handlers installed once.
        pub(in super::super) installed: Once,
        /// The pipe's write end the handler wakes the watcher through (-1: none yet).
        pub(in super::super) wake: AtomicI32,
        /// Set by the first signal: the flush runs, a second signal ends the process at once.
        pub(in super::super) flushing: AtomicBool,
        /// The exit hook registered once.
        pub(in super::super) exit_hook: Once,
        /// The process that registered the exit hook (a forked child inherits the hook).
        pub(in super::super) exit_pid: AtomicU32,
        /// What the exit hook runs (`init.rs`'s `shutdown`), handed in by `init()`.
        pub(in super::super) exit_end: OnceLock<fn()>,
    }

    impl Signals {
        pub(crate) const fn new() -> Self {
            Signals {
                installed: Once::new(),
                wake: AtomicI32::new(-1),
                flushing: AtomicBool::new(false),
                exit_hook: Once::new(),
                exit_pid: AtomicU32::new(0),
                exit_end: OnceLock::new(),
            }
        }
    }
}

/// No state without Unix signals.
#[cfg(not(unix))]
mod os {
    #[derive(Debug)]
    pub(crate) struct Signals;

    impl Signals {
        pub(crate) const fn new() -> Self {
            Signals
        }
    }
}
