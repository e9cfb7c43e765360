//! Small per-thread identities: a dense index for timeline tracks and scope ids, and the
//! thread's name, kept for the timeline's track labels and the capture's thread frames.
//!
//! What a thread costs does not grow with the threads that lived before it: registering takes
//! one short lock and one map insert, and a name is looked up by index. Only names given with
//! `std::thread::Builder::name` are kept (an unnamed thread is `thread <index>`, made when
//! asked). A thread's name is kept while it runs and, once it has ended, among the last
//! [`KEEP_EXITED`] to end, long enough for its last records to reach the sinks that label
//! them (which copy the names they need); older ones are freed.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

pub(crate) mod state;
use state::Registry;

/// Names of ended threads still kept, the latest to end.
const KEEP_EXITED: usize = 1024;

fn registry() -> MutexGuard<'static, Option<Registry>> {
    crate::collector::collector().names.registry.lock().unwrap_or_else(|e| e.into_inner())
}

struct Slot {
    index: u32,
    next_scope: Cell<u64>,
}

/// Drops the thread's name from the running ones when the thread ends. Apart from [`SLOT`],
/// which has no destructor and so stays usable by annotated calls in other thread-local
/// destructors.
struct Exit(Cell<u32>);

impl Drop for Exit {
    fn drop(&mut self) {
        let index = self.0.get();
        if index == 0 {
            return;
        }
        let mut r = registry();
        let Some(r) = r.as_mut() else { return };
        if !r.names.contains_key(&index) {
            return;
        }
        r.exited.push_back(index);
        while r.exited.len() > KEEP_EXITED {
            if let Some(old) = r.exited.pop_front() {
                r.names.remove(&old);
            }
        }
    }
}

/// The calling thread's slot: its index and name registered. Not inlined into the callers of
/// [`next_scope`] (which other crates inline), so that no code outside this crate names the
/// collector (its symbol would be exported, and every access to it go through the GOT).
#[cold]
#[inline(never)]
fn register() -> Slot {
    let index = crate::collector::collector().names.next_index.fetch_add(1, Ordering::Relaxed);
    if let Some(name) = std::thread::current().name() {
        registry().get_or_insert_with(Registry::default).names.insert(index, name.into());
        // Unavailable while the thread's locals are being destroyed: the name then stays
        // (one, for a thread whose first call is made in a destructor).
        let _ = EXIT.try_with(|e| e.0.set(index));
    }
    Slot { index, next_scope: Cell::new(0) }
}

thread_local! {
    static SLOT: Slot = register();
    static EXIT: Exit = const { Exit(Cell::new(0)) };
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

/// The calling thread's index (what its records carry in `thread`), for `Capture`.
pub(crate) fn index() -> u32 {
    SLOT.with(|s| s.index)
}

/// The name of the thread with this index: its own while kept, else `thread <index>`.
pub(crate) fn name(index: u32) -> String {
    registry().as_ref().and_then(|r| r.names.get(&index)).map_or_else(|| format!("thread {index}"), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many thread names are held.
    fn retained() -> usize {
        registry().as_ref().map_or(0, |r| r.names.len())
    }

    #[test]
    fn names_of_exited_threads_are_not_kept_without_bound() {
        for i in 0..3_000 {
            let t = std::thread::Builder::new().name(format!("churn-{i}")).spawn(|| next_scope().0);
            t.expect("spawn").join().expect("join");
        }
        // At most the names of the threads still alive and of the latest ones to exit.
        assert!(retained() < 2_000, "{} names held after 3000 threads ended", retained());
    }

    #[test]
    fn a_thread_s_name_outlives_it_for_the_records_it_left() {
        let t = std::thread::Builder::new().name("loader".into()).spawn(|| next_scope().0);
        let index = t.expect("spawn").join().expect("join");
        assert_eq!(name(index), "loader");
        let unnamed = std::thread::spawn(|| next_scope().0).join().expect("join");
        assert_eq!(name(unnamed), format!("thread {unnamed}"));
    }
}
