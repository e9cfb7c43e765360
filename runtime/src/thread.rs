//! Small per-thread identities: a dense index for timeline tracks and scope ids, and the
//! thread's name, kept for the timeline's track labels.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

static NEXT_INDEX: AtomicU32 = AtomicU32::new(1);
static NAMES: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

struct Slot {
    index: u32,
    next_scope: Cell<u64>,
}

thread_local! {
    static SLOT: Slot = {
        let index = NEXT_INDEX.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current().name().map_or_else(|| format!("thread {index}"), str::to_owned);
        if let Ok(mut names) = NAMES.lock() {
            names.push((index, name));
        }
        Slot { index, next_scope: Cell::new(0) }
    };
}

/// Bits of a scope id that count scopes within one thread.
const SCOPE_BITS: u32 = 40;

/// The calling thread's index and a fresh scope id, unique in the process and never 0.
#[inline]
pub(crate) fn next_scope() -> (u32, u64) {
    SLOT.with(|s| {
        let n = s.next_scope.get() + 1;
        s.next_scope.set(n);
        (s.index, (u64::from(s.index) << SCOPE_BITS) | (n & ((1 << SCOPE_BITS) - 1)))
    })
}

/// The calling thread's index (what its records carry in `thread`).
#[cfg_attr(not(feature = "testing"), allow(dead_code))] // for `Capture`
pub(crate) fn index() -> u32 {
    SLOT.with(|s| s.index)
}

/// `(index, name)` of every thread that opened a scope.
pub(crate) fn names() -> Vec<(u32, String)> {
    NAMES.lock().map(|n| n.clone()).unwrap_or_default()
}

/// How many thread names the registry holds.
#[cfg(test)]
fn retained() -> usize {
    NAMES.lock().map_or(0, |n| n.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_exited_threads_are_not_kept_without_bound() {
        for i in 0..3_000 {
            let t = std::thread::Builder::new().name(format!("churn-{i}")).spawn(|| next_scope().0);
            t.expect("spawn").join().expect("join");
        }
        // At most the names of the threads still alive and of the latest ones to exit.
        assert!(retained() < 2_000, "{} names held after 3000 threads ended", retained());
    }
}
