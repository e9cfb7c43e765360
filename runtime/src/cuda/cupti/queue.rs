//! How a thread hands its ended CUDA scopes to the resolver: a ring per thread with one
//! producer (the thread) and one consumer (the resolver), instead of a shared channel. A push is
//! a slot write and a release store (~10 ns; the channel's send cost ~140 ns on an H100).
//!
//! A full ring blocks nothing and loses nothing (decision 42): the item goes to the ring's
//! *spill*, a vector behind a lock that only the consumer also takes (for a swap), and every
//! later item follows it there until the consumer has emptied both, so the consumer still sees
//! each thread's items in the order they were pushed (the windows of one thread must arrive in
//! the order their scopes ended). Spilled items are counted.
//!
//! The producer asks for the consumer (a wake) only when its ring reaches a quarter of its
//! capacity or spills: the resolver does not need a scope until its CUPTI buffers come back, and
//! it looks at the rings on every poll anyway.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex, MutexGuard};

/// A thread's ring. Slots between `tail` and `head` hold items; only the producer writes `head`
/// and the slots past it, only the consumer (holding its registry's `consuming` lock) writes
/// `tail`.
struct Ring<T> {
    head: AtomicUsize,
    tail: AtomicUsize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Set by the producer when it spills, cleared by the consumer (under `spill`) once it took
    /// the spill: while set, the producer's items go to the spill.
    spilling: AtomicBool,
    spill: Mutex<Vec<T>>,
    spilled: AtomicU64,
    /// The producer is gone (its thread ended): the consumer drops the ring once it is empty.
    closed: AtomicBool,
}

// SAFETY: a slot is written only by the producer while it lies outside `tail..head` (no consumer
// reads it) and read only by the one consumer while inside `tail..head` (published by the
// producer's release store of `head`); items cross threads, so `T: Send`.
unsafe impl<T: Send> Sync for Ring<T> {}
unsafe impl<T: Send> Send for Ring<T> {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Ring<T> {
    fn capacity(&self) -> usize {
        self.slots.len()
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        let (tail, head) = (*self.tail.get_mut(), *self.head.get_mut());
        for i in tail..head {
            // SAFETY: `tail..head` holds initialised items nobody took; `&mut self`: no one else.
            unsafe { self.slots[i % self.slots.len()].get_mut().assume_init_drop() };
        }
    }
}

/// What a push asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Nothing: the consumer will find it at its next look.
    Quiet,
    /// Wake the consumer: the ring filled up to the wake mark, or spilled.
    Wake,
}

/// The owning thread's end of a ring. Not `Sync` (`Cell`): one thread pushes.
pub(super) struct Producer<T> {
    ring: Arc<Ring<T>>,
    _one_thread: PhantomData<Cell<()>>,
}

impl<T> Producer<T> {
    /// Adds `item` behind everything this producer pushed before.
    #[inline]
    pub(super) fn push(&self, item: T) -> Pushed {
        let r = &*self.ring;
        let head = r.head.load(Relaxed);
        let used = head.wrapping_sub(r.tail.load(Acquire));
        // Acquire: a cleared flag was stored after the consumer read `head` (see `take`).
        if used >= r.capacity() || r.spilling.load(Acquire) {
            return spill(r, item);
        }
        // SAFETY: `used < capacity`: the slot is outside `tail..head`, and only this thread
        // writes slots.
        unsafe { (*r.slots[head % r.capacity()].get()).write(item) };
        r.head.store(head.wrapping_add(1), Release);
        if used + 1 == (r.capacity() / 4).max(1) {
            Pushed::Wake
        } else {
            Pushed::Quiet
        }
    }
}

#[cold]
#[inline(never)]
fn spill<T>(r: &Ring<T>, item: T) -> Pushed {
    let mut s = lock(&r.spill);
    s.push(item);
    r.spilling.store(true, Relaxed);
    r.spilled.fetch_add(1, Relaxed);
    Pushed::Wake
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.ring.closed.store(true, Release);
    }
}

/// Every thread's ring of one kind of item, and the one consumer's drain.
pub(super) struct Rings<T> {
    rings: Mutex<Vec<Arc<Ring<T>>>>,
    /// Held by the consumer: one drain at a time.
    consuming: Mutex<()>,
    /// Items spilled by rings already dropped.
    spilled_before: AtomicU64,
}

impl<T> Rings<T> {
    pub(super) const fn new() -> Self {
        Rings { rings: Mutex::new(Vec::new()), consuming: Mutex::new(()), spilled_before: AtomicU64::new(0) }
    }

    /// A new ring of `capacity` slots for the calling thread.
    pub(super) fn producer(&self, capacity: usize) -> Producer<T> {
        let ring = Arc::new(Ring {
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            slots: (0..capacity.max(1)).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect(),
            spilling: AtomicBool::new(false),
            spill: Mutex::new(Vec::new()),
            spilled: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        lock(&self.rings).push(ring.clone());
        Producer { ring, _one_thread: PhantomData }
    }

    /// Hands every item pushed so far to `f`, each ring's in push order; drops the rings of
    /// threads that ended. Returns how many items it handed over.
    pub(super) fn drain(&self, mut f: impl FnMut(T)) -> usize {
        let _one = lock(&self.consuming);
        let rings: Vec<Arc<Ring<T>>> = lock(&self.rings).clone();
        let mut n = 0;
        let mut ended = Vec::new();
        for r in &rings {
            // Read first: everything pushed before the producer closed is visible below.
            let closed = r.closed.load(Acquire);
            n += take(r, &mut f);
            if closed {
                ended.push(r.clone());
            }
        }
        if !ended.is_empty() {
            let mut all = lock(&self.rings);
            all.retain(|r| !ended.iter().any(|e| Arc::ptr_eq(r, e)));
            let spilled: u64 = ended.iter().map(|r| r.spilled.load(Relaxed)).sum();
            self.spilled_before.fetch_add(spilled, Relaxed);
        }
        n
    }

    /// Items that went through a spill so far (a full ring), over all threads.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(super) fn spilled(&self) -> u64 {
        let live: u64 = lock(&self.rings).iter().map(|r| r.spilled.load(Relaxed)).sum();
        live + self.spilled_before.load(Relaxed)
    }

    /// Rings registered (live threads, and ended ones not drained yet).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.rings).len()
    }
}

/// The consumer's part for one ring (its caller holds `consuming`).
fn take<T>(r: &Ring<T>, f: &mut impl FnMut(T)) -> usize {
    // Under the spill lock: `head` and the spill are read together, and the flag cleared, so
    // that every slot before `head` is older than every spilled item, and every slot the
    // producer fills after seeing the flag cleared lies at or past `head`.
    let (head, spilled) = {
        let mut s = lock(&r.spill);
        let head = r.head.load(Acquire);
        let spilled = std::mem::take(&mut *s);
        r.spilling.store(false, Release);
        (head, spilled)
    };
    let tail = r.tail.load(Relaxed);
    let cap = r.capacity();
    for i in tail..head {
        // SAFETY: `tail..head` was published by the producer (acquire load of `head` above) and
        // is not reused before the release store of `tail` below; each item is read once.
        f(unsafe { (*r.slots[i % cap].get()).assume_init_read() });
    }
    r.tail.store(head, Release);
    let n = head.wrapping_sub(tail) + spilled.len();
    spilled.into_iter().for_each(f);
    n
}

#[cfg(test)]
mod tests {
    use super::{Pushed, Rings};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    fn drained(rings: &Rings<u64>) -> Vec<u64> {
        let mut out = Vec::new();
        rings.drain(|x| out.push(x));
        out
    }

    #[test]
    fn items_come_out_in_push_order_across_drains() {
        let rings = Rings::new();
        let p = rings.producer(8);
        for i in 0..5 {
            p.push(i);
        }
        assert_eq!(drained(&rings), [0, 1, 2, 3, 4]);
        assert_eq!(drained(&rings), [0u64; 0], "nothing twice");
        // Wrapping past the end of the slots.
        for i in 5..12 {
            p.push(i);
        }
        assert_eq!(drained(&rings), (5..12).collect::<Vec<_>>());
        assert_eq!(rings.spilled(), 0);
    }

    #[test]
    fn a_full_ring_spills_counts_and_keeps_the_order() {
        let rings = Rings::new();
        let p = rings.producer(4);
        let asked: Vec<Pushed> = (0..10).map(|i| p.push(i)).collect();
        assert_eq!(asked[0], Pushed::Wake, "a quarter of 4 slots is one: the first push wakes");
        assert!(asked[1..4].iter().all(|a| *a == Pushed::Quiet), "{asked:?}");
        assert!(asked[4..].iter().all(|a| *a == Pushed::Wake), "every spill wakes: {asked:?}");
        assert_eq!(rings.spilled(), 6, "the six past the capacity");
        assert_eq!(drained(&rings), (0..10).collect::<Vec<_>>(), "nothing lost, in order");
        // Emptied: the ring takes items again, and the count stays.
        let asked: Vec<Pushed> = (10..13).map(|i| p.push(i)).collect();
        assert_eq!(asked, [Pushed::Wake, Pushed::Quiet, Pushed::Quiet], "the wake mark again, no spill");
        assert_eq!(rings.spilled(), 6);
        assert_eq!(drained(&rings), [10, 11, 12]);
    }

    #[test]
    fn a_busy_producer_and_consumer_lose_and_reorder_nothing() {
        let rings = Arc::new(Rings::new());
        let (ready, wait) = mpsc::channel();
        const N: u64 = 200_000;
        let producer = {
            let rings = rings.clone();
            std::thread::spawn(move || {
                let p = rings.producer(16); // small: it spills often
                ready.send(()).unwrap();
                for i in 0..N {
                    p.push(i);
                }
            })
        };
        wait.recv().unwrap();
        let mut seen = Vec::with_capacity(N as usize);
        while seen.len() < N as usize {
            rings.drain(|x| seen.push(x));
            std::thread::yield_now();
        }
        producer.join().unwrap();
        rings.drain(|x| seen.push(x));
        assert_eq!(seen.len() as u64, N);
        assert!(seen.windows(2).all(|w| w[0] + 1 == w[1]), "in push order, each once");
    }

    #[test]
    fn a_thread_that_ends_with_items_left_hands_them_over_and_its_ring_goes() {
        let rings = Arc::new(Rings::new());
        let r = rings.clone();
        std::thread::spawn(move || {
            let p = r.producer(4);
            for i in 0..7 {
                p.push(i); // three of them spilled
            }
        })
        .join()
        .unwrap();
        assert_eq!(rings.len(), 1, "kept until drained");
        assert_eq!(drained(&rings), (0..7).collect::<Vec<_>>());
        assert_eq!(rings.len(), 0, "an ended thread's empty ring is dropped");
        assert_eq!(rings.spilled(), 3, "its spills still counted");
    }

    #[test]
    fn items_never_drained_are_dropped_with_the_rings() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        let rings = Rings::new();
        let p = rings.producer(4);
        for _ in 0..6 {
            p.push(Counted);
        }
        let mut taken = 0;
        rings.drain(|c| {
            taken += 1;
            drop(c)
        });
        assert_eq!((taken, DROPS.load(Ordering::SeqCst)), (6, 6));
        for _ in 0..3 {
            p.push(Counted);
        }
        drop(p);
        drop(rings);
        assert_eq!(DROPS.load(Ordering::SeqCst), 9, "the three left in the ring");
    }
}
