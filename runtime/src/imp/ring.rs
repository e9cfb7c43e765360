//! The per-thread ring of host-timed calls (Tracy's client model): a call that is only counted
//! writes (site, raw clock ticks, bytes) into its thread's ring and returns; the ticks become
//! nanoseconds when the ring is counted; the counting happens later,
//! a whole ring at a time, when the ring is full (on the calling thread, so that nothing is lost
//! and memory stays bounded), when the thread ends (a thread-local destructor), or when anyone
//! reads the aggregates ([`drain_all`], before every summary).
//!
//! A ring has one producer, its thread, which only writes `head`; consumers hold the ring's
//! `drain` lock and only write `tail`. The owner drains into its own per-thread shards; another
//! thread drains into the per-site totals of the registry (never into the owner's shards, which
//! only the owner writes).

use crate::site::Site;
use std::cell::Cell;
use std::sync::atomic::{Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex, MutexGuard};

pub(crate) mod state;
use state::{Entry, Ring, CAPACITY};

fn rings() -> MutexGuard<'static, Vec<Arc<Ring>>> {
    lock(&crate::collector::collector().rings.0)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain counts: a panic elsewhere while locked leaves them usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ring {
    /// Counts every entry written so far, each run of one site's calls at once: into the
    /// calling thread's shards (`own`: the owner) or into the totals of other threads (a reader).
    /// The caller holds `drain`.
    fn drain_runs(&self, _held: &MutexGuard<'_, ()>, own: bool) {
        let tail = self.tail.load(Relaxed);
        let head = self.head.load(Acquire);
        let to_ns = crate::clock::ticks_converter();
        let mut i = tail;
        while i != head {
            // The written entries from `i` that lie in one piece of the array.
            let at = i % CAPACITY;
            let len = head.wrapping_sub(i).min(CAPACITY - at);
            // SAFETY: entries between `tail` and `head` were published by the owner (release
            // store of `head`, acquired above) and are not reused before the release store of
            // `tail`; `UnsafeCell<MaybeUninit<Entry>>` has `Entry`'s layout.
            let written = unsafe { std::slice::from_raw_parts(self.entries.as_ptr().add(at).cast::<Entry>(), len) };
            // One pass: each run of one site's entries is counted until the site changes.
            let mut rest = written;
            while let Some(first) = rest.first() {
                let site = first.site;
                let calls =
                    rest.iter().map_while(move |e| std::ptr::eq(e.site, site).then(|| (to_ns(e.ticks), e.bytes)));
                let n = if own {
                    site.state.stats.add_host_all(calls)
                } else {
                    site.state.stats.add_host_all_elsewhere(calls)
                };
                rest = &rest[n.max(1)..];
            }
            i = i.wrapping_add(len);
        }
        self.tail.store(head, Release);
    }

    /// The owner counts its ring into its own shards.
    fn drain_own(&self) {
        let held = lock(&self.drain);
        self.drain_runs(&held, true);
    }
}

/// The calling thread's ring; drained into its shards and unregistered when the thread ends.
struct Local(Arc<Ring>);

impl Local {
    fn new() -> Self {
        let ring = Arc::new(Ring::new());
        rings().push(ring.clone());
        RING.with(|r| r.set(Arc::as_ptr(&ring)));
        Local(ring)
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // Calls from later thread-local destructors count straight into the aggregates.
        RING.with(|r| r.set(GONE));
        // The shard table may be gone already: `add_host` then counts with the ended threads.
        self.0.drain_own();
        let mut rings = rings();
        if let Some(i) = rings.iter().position(|r| Arc::ptr_eq(r, &self.0)) {
            rings.swap_remove(i);
        }
    }
}

/// [`RING`] once this thread's ring is gone (never a ring's address: a ring is aligned to 8).
const GONE: *const Ring = std::ptr::dangling::<u64>().cast();

thread_local! {
    /// Owns this thread's ring (made on the thread's first counted call).
    static LOCAL: Local = Local::new();
    /// The ring [`LOCAL`] owns, for [`push`]: a plain pointer in a thread-local with neither
    /// lazy set-up nor destructor, so reading it is one load. Null before the first call,
    /// [`GONE`] after `LOCAL`'s destructor.
    static RING: Cell<*const Ring> = const { Cell::new(std::ptr::null()) };
}

/// Counts a host-timed call that produced no record, `ticks` long (raw clock): into this
/// thread's ring, after counting the whole ring when it is full (so nothing is lost and memory
/// stays bounded); on a thread's first call, or after its ring is gone (a call from another
/// thread-local's destructor), through [`first_or_late`].
#[inline(always)]
pub(crate) fn push(site: &'static Site, ticks: u64, bytes: Option<u64>) {
    push_to(current(), site, ticks, bytes);
}

/// This thread's ring, as [`push_to`] takes it. Read by a scope's caller: a thread-local is
/// reached through what the compiler sees as a call (the linker makes it one load), and the
/// caller's frame saves registers for its own calls anyway.
#[derive(Clone, Copy)]
pub(crate) struct Current(*const Ring);

#[inline(always)]
pub(crate) fn current() -> Current {
    Current(RING.with(Cell::get))
}

/// [`push`] into `ring`, which the calling thread read with [`current`].
#[inline(always)]
pub(crate) fn push_to(ring: Current, site: &'static Site, ticks: u64, bytes: Option<u64>) {
    let ring = ring.0;
    if ring.is_null() || ring == GONE {
        return first_or_late(site, ticks, bytes);
    }
    // SAFETY: `LOCAL` keeps the ring alive until its destructor, which clears `RING` first.
    let ring = unsafe { &*ring };
    let bytes = bytes.unwrap_or(0);
    let head = ring.head.load(Relaxed);
    if head >= ring.limit.load(Relaxed) {
        return full(ring, site, ticks, bytes);
    }
    ring.write(head, Entry { site, ticks, bytes });
}

impl Ring {
    /// Writes entry number `head` (only the owner does).
    #[inline(always)]
    fn write(&self, head: usize, entry: Entry) {
        // SAFETY: the slot is free: `head` is below `limit`, a `tail + CAPACITY` acquired from
        // the consumers (the caller checked, or `full` just set it), and only the owner writes.
        unsafe { (*self.entries[head % CAPACITY].get()).write(entry) };
        self.head.store(head.wrapping_add(1), Release);
    }
}

/// The thread's first counted call (makes its ring), or one after its ring is gone.
#[cold]
#[inline(never)]
fn first_or_late(site: &'static Site, ticks: u64, bytes: Option<u64>) {
    if RING.with(Cell::get).is_null() && LOCAL.try_with(|_| ()).is_ok() {
        push(site, ticks, bytes);
    } else {
        unregistered(site, ticks, bytes);
    }
}

#[cold]
#[inline(never)]
fn unregistered(site: &'static Site, ticks: u64, bytes: Option<u64>) {
    site.state.stats.add_host(crate::clock::ticks_to_ns(ticks), bytes);
}

/// The ring is full as far as the owner knew: counts it unless a reader did, then writes the
/// entry. The caller's tail call: its path keeps no registers, and the entry travels in them.
#[cold]
#[inline(never)]
fn full(ring: &Ring, site: &'static Site, ticks: u64, bytes: u64) {
    let head = ring.head.load(Relaxed);
    // A reader may have counted the ring meanwhile; if not, the owner counts it now.
    if head.wrapping_sub(ring.tail.load(Acquire)) >= CAPACITY {
        ring.drain_own();
    }
    ring.limit.store(ring.tail.load(Acquire).wrapping_add(CAPACITY), Relaxed);
    ring.write(head, Entry { site, ticks, bytes });
}

/// Counts every thread's pending calls into the aggregates, so that a reader sees every call.
pub(crate) fn drain_all() {
    let rings: Vec<Arc<Ring>> = rings().clone();
    for ring in rings {
        let held = lock(&ring.drain);
        if ring.head.load(Acquire) == ring.tail.load(Relaxed) {
            continue;
        }
        ring.drain_runs(&held, false);
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::ticks_to_ns;
    use crate::site::{Backend, Site, SiteKind};
    use std::sync::mpsc;

    const fn site(name: &'static str) -> Site {
        Site::new(crate::site::site_desc!(name, SiteKind::Kernel, Backend::Host))
    }

    #[test]
    fn a_reader_sees_the_calls_still_in_a_live_threads_ring() {
        static SITE: Site = site("live");
        let (pushed, wait) = mpsc::channel();
        let (resume, go) = mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            for _ in 0..10 {
                super::push(&SITE, 100, Some(8));
            }
            pushed.send(()).unwrap();
            go.recv().unwrap();
            // Past the ring's capacity: the owner counts the full ring itself, losing nothing.
            for _ in 0..2 * super::CAPACITY + 3 {
                super::push(&SITE, 300, None);
            }
        });
        wait.recv().unwrap();
        let t1 = SITE.state.stats.totals();
        let (d100, d300) = (ticks_to_ns(100), ticks_to_ns(300));
        assert_eq!((t1.calls, t1.bytes, t1.total_ns, t1.min_ns, t1.max_ns), (10, 80, 10 * d100, d100, d100));
        resume.send(()).unwrap();
        t.join().unwrap();
        let n = 10 + 2 * super::CAPACITY as u64 + 3;
        let t2 = SITE.state.stats.totals();
        assert_eq!((t2.calls, t2.bytes, t2.min_ns, t2.max_ns), (n, 80, d100, d300));
        assert_eq!(t2.total_ns, 10 * d100 + d300 * (n - 10));
    }

    #[test]
    fn a_call_after_the_rings_destruction_is_counted() {
        static SITE: Site = site("late");
        struct CallsOnDrop;
        impl Drop for CallsOnDrop {
            fn drop(&mut self) {
                super::push(&SITE, 5, None);
            }
        }
        thread_local! {
            static CALLER: CallsOnDrop = const { CallsOnDrop };
        }
        std::thread::spawn(|| {
            CALLER.with(|_| ());
            super::push(&SITE, 7, None);
        })
        .join()
        .unwrap();
        let t = SITE.state.stats.totals();
        let (d5, d7) = (ticks_to_ns(5), ticks_to_ns(7));
        assert_eq!((t.calls, t.total_ns, t.min_ns, t.max_ns), (2, d5 + d7, d5, d7));
    }
}
