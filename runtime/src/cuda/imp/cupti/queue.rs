//! How a thread hands its ended CUDA scopes to the resolver: a queue per thread with one
//! producer (the thread) and one consumer (the resolver), instead of a shared channel. A push is
//! a slot write and a release store (the channel's send cost ~140 ns on an H100).
//!
//! The queue is a chain of fixed segments. A producer that fills its segment links the next
//! one behind it and goes on there: it never waits and nothing is dropped (decision 42). The
//! consumer hands an emptied segment back as the *spare*, which the producer takes before
//! allocating, so a queue that the resolver keeps up with lives in two segments; a segment is
//! allocated (and counted) only while the resolver is more than a segment behind.
//!
//! The producer asks for the consumer (a wake) at a quarter of each segment and when it
//! allocates: the resolver does not need a scope until its CUPTI buffers come back, and it looks
//! at the queues on every poll anyway.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex, MutexGuard};

struct Segment<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Slots the producer has filled; stored with release after each write.
    written: AtomicUsize,
    /// The segment after this one, linked (release) once this one is full.
    next: AtomicPtr<Segment<T>>,
}

impl<T> Segment<T> {
    fn boxed(len: usize) -> *mut Segment<T> {
        Box::into_raw(Box::new(Segment {
            slots: (0..len).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect(),
            written: AtomicUsize::new(0),
            next: AtomicPtr::new(ptr::null_mut()),
        }))
    }
}

/// One thread's queue, shared by its producer and the registry.
struct Queue<T> {
    /// The consumer's place: the segment it reads and the next slot in it. Touched only by the
    /// consumer, which holds its registry's `consuming` lock.
    read_segment: UnsafeCell<*mut Segment<T>>,
    read: UnsafeCell<usize>,
    /// An emptied segment for the producer to reuse (null if none).
    spare: AtomicPtr<Segment<T>>,
    segment_len: usize,
    /// Segments allocated past the first (the resolver was more than a segment behind).
    grown: AtomicU64,
    /// The producer is gone (its thread ended): the registry drops the queue once it is empty.
    closed: AtomicBool,
    /// Who produces (an OS thread id), handed with each item so that items need not carry it.
    owner: u32,
}

// SAFETY: a slot is written once by the producer before `written` covers it (release) and read
// once by the one consumer after (acquire); segments pass between them only through `next` and
// `spare` (release/acquire). Items cross threads, so `T: Send`.
unsafe impl<T: Send> Sync for Queue<T> {}
unsafe impl<T: Send> Send for Queue<T> {}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        // `&mut self`: producer and consumer are gone. Drop what was never read, then free.
        let (mut seg, mut from) = (*self.read_segment.get_mut(), *self.read.get_mut());
        while !seg.is_null() {
            // SAFETY: every segment of the chain came from `Segment::boxed` and is owned here.
            let s = unsafe { Box::from_raw(seg) };
            for slot in &s.slots[from..s.written.load(Relaxed)] {
                // SAFETY: slots below `written` and past the reader were written and not read.
                unsafe { (*slot.get()).assume_init_drop() };
            }
            seg = s.next.load(Relaxed);
            from = 0;
        }
        let spare = *self.spare.get_mut();
        if !spare.is_null() {
            // SAFETY: as above; a spare holds no items.
            drop(unsafe { Box::from_raw(spare) });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a push asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Nothing: the consumer will find it at its next look.
    Quiet,
    /// Wake the consumer: a segment filled to its wake mark, or one was allocated.
    Wake,
}

/// The owning thread's end of a queue. Not `Sync` (`Cell`): one thread pushes.
pub(super) struct Producer<T> {
    queue: Arc<Queue<T>>,
    segment: Cell<*mut Segment<T>>,
    pos: Cell<usize>,
    _one_thread: PhantomData<Cell<()>>,
}

impl<T> Producer<T> {
    /// Adds `item` behind everything this producer pushed before.
    #[inline]
    pub(super) fn push(&self, item: T) -> Pushed {
        self.push_with(|| item)
    }

    /// [`push`](Self::push) of an item built by `make` in its slot rather than moved there (a
    /// scope's ~100-byte end, `scripts/count-window`). `make` must not push to this producer:
    /// the slot is chosen before it runs and published after.
    #[inline]
    pub(super) fn push_with(&self, make: impl FnOnce() -> T) -> Pushed {
        let len = self.queue.segment_len;
        let mut pos = self.pos.get();
        let mut asked = Pushed::Quiet;
        if pos == len {
            asked = self.next_segment();
            pos = 0;
        }
        let seg = self.segment.get();
        // SAFETY: the producer owns `seg` past `written` (`pos` is its `written`), and `pos < len`.
        unsafe {
            (*(*seg).slots[pos].get()).write(make());
            (*seg).written.store(pos + 1, Release);
        }
        self.pos.set(pos + 1);
        if pos + 1 == (len / 4).max(1) {
            asked = Pushed::Wake;
        }
        asked
    }

    /// The current segment is full: links the spare, or a new segment, behind it.
    #[cold]
    #[inline(never)]
    fn next_segment(&self) -> Pushed {
        let q = &*self.queue;
        let spare = q.spare.swap(ptr::null_mut(), Acquire);
        let (next, asked) = if spare.is_null() {
            q.grown.fetch_add(1, Relaxed);
            (Segment::boxed(q.segment_len), Pushed::Wake)
        } else {
            // SAFETY: the consumer gave the spare up (release swap) and no longer reads it.
            unsafe {
                (*spare).written.store(0, Relaxed);
                (*spare).next.store(ptr::null_mut(), Relaxed);
            }
            (spare, Pushed::Quiet)
        };
        // SAFETY: the current segment is alive until the consumer has read past it, which needs
        // this link. Release: the reset above is seen by a consumer that follows the link.
        unsafe { (*self.segment.get()).next.store(next, Release) };
        self.segment.set(next);
        self.pos.set(0);
        asked
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.queue.closed.store(true, Release);
    }
}

/// Every thread's queue of one kind of item, and the one consumer's drain.
pub(super) struct Queues<T> {
    queues: Mutex<Vec<Arc<Queue<T>>>>,
    /// Held by the consumer: one drain at a time.
    consuming: Mutex<()>,
    /// Segments grown by queues already dropped.
    grown_before: AtomicU64,
}

impl<T> Queues<T> {
    pub(super) const fn new() -> Self {
        Queues { queues: Mutex::new(Vec::new()), consuming: Mutex::new(()), grown_before: AtomicU64::new(0) }
    }

    /// A new queue for the calling thread, `owner`, in segments of `segment_len` items.
    pub(super) fn producer(&self, segment_len: usize, owner: u32) -> Producer<T> {
        let segment_len = segment_len.max(1);
        let first = Segment::boxed(segment_len);
        let queue = Arc::new(Queue {
            read_segment: UnsafeCell::new(first),
            read: UnsafeCell::new(0),
            spare: AtomicPtr::new(ptr::null_mut()),
            segment_len,
            grown: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            owner,
        });
        lock(&self.queues).push(queue.clone());
        Producer { queue, segment: Cell::new(first), pos: Cell::new(0), _one_thread: PhantomData }
    }

    /// Hands every item pushed so far to `f` with its queue's owner, each queue's in push
    /// order; drops the queues of threads that ended. Returns how many items it handed over.
    pub(super) fn drain(&self, mut f: impl FnMut(u32, T)) -> usize {
        let _one = lock(&self.consuming);
        let queues: Vec<Arc<Queue<T>>> = lock(&self.queues).clone();
        let mut n = 0;
        let mut ended = Vec::new();
        for q in &queues {
            // Read first: everything pushed before the producer closed is visible below.
            let closed = q.closed.load(Acquire);
            // SAFETY: this thread holds `consuming`.
            n += unsafe { take(q, &mut f) };
            if closed {
                ended.push(q.clone());
            }
        }
        if !ended.is_empty() {
            let mut all = lock(&self.queues);
            all.retain(|q| !ended.iter().any(|e| Arc::ptr_eq(q, e)));
            let grown: u64 = ended.iter().map(|q| q.grown.load(Relaxed)).sum();
            self.grown_before.fetch_add(grown, Relaxed);
        }
        n
    }

    /// Segments allocated past each queue's first, over all threads: how often a thread's
    /// scopes got more than a segment ahead of the resolver.
    pub(super) fn grown(&self) -> u64 {
        let live: u64 = lock(&self.queues).iter().map(|q| q.grown.load(Relaxed)).sum();
        live + self.grown_before.load(Relaxed)
    }
}

/// The consumer's part for one queue.
///
/// # Safety
/// The caller is the one consumer (it holds the registry's `consuming` lock).
unsafe fn take<T>(q: &Queue<T>, f: &mut impl FnMut(u32, T)) -> usize {
    // SAFETY: only the consumer touches its place.
    let (seg_at, read_at) = unsafe { (&mut *q.read_segment.get(), &mut *q.read.get()) };
    let mut n = 0;
    loop {
        let seg = *seg_at;
        // SAFETY: the consumer's segment stays alive until the consumer itself gives it up.
        let s = unsafe { &*seg };
        let written = s.written.load(Acquire);
        while *read_at < written {
            // SAFETY: written (release store of `written`, acquired above) and read once.
            f(q.owner, unsafe { (*s.slots[*read_at].get()).assume_init_read() });
            *read_at += 1;
            n += 1;
        }
        if *read_at < q.segment_len {
            return n;
        }
        let next = s.next.load(Acquire);
        if next.is_null() {
            return n; // full and read, but the producer has not moved on yet
        }
        *seg_at = next;
        *read_at = 0;
        // The producer left `seg` for good (it linked `next`): it becomes the spare.
        let old = q.spare.swap(seg, Release);
        if !old.is_null() {
            // SAFETY: a spare nobody took: neither side refers to it any more.
            drop(unsafe { Box::from_raw(old) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{lock, Pushed, Queues};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    fn drained(queues: &Queues<u64>) -> Vec<u64> {
        let mut out = Vec::new();
        queues.drain(|owner, x| {
            assert_eq!(owner, 7, "each item with its queue's owner");
            out.push(x)
        });
        out
    }

    #[test]
    fn items_come_out_in_push_order_across_drains() {
        let queues = Queues::new();
        let p = queues.producer(8, 7);
        for i in 0..5 {
            p.push(i);
        }
        assert_eq!(drained(&queues), [0, 1, 2, 3, 4]);
        assert_eq!(drained(&queues), [0u64; 0], "nothing twice");
        // Past the end of the first segment: the producer moves on to a second.
        for i in 5..12 {
            p.push(i);
        }
        assert_eq!(drained(&queues), (5..12).collect::<Vec<_>>());
        assert_eq!(queues.grown(), 1, "one segment allocated past the first");
    }

    #[test]
    fn a_full_queue_grows_counts_and_keeps_the_order_then_reuses_its_segments() {
        let queues = Queues::new();
        let p = queues.producer(4, 7);
        let asked: Vec<Pushed> = (0..10).map(|i| p.push(i)).collect();
        assert_eq!(asked[0], Pushed::Wake, "a quarter of 4 slots is one: the first push of a segment wakes");
        assert_eq!(&asked[1..4], [Pushed::Quiet; 3]);
        assert_eq!(asked[4], Pushed::Wake, "a new segment, allocated: the resolver is behind");
        assert_eq!(queues.grown(), 2, "10 items in three segments, two allocated");
        assert_eq!(drained(&queues), (0..10).collect::<Vec<_>>(), "nothing lost, in order");
        // Caught up: the emptied segments come back as the spare, nothing is allocated.
        for round in 0..5u64 {
            let items: Vec<u64> = (0..4).map(|i| 100 + 4 * round + i).collect();
            items.iter().for_each(|&i| {
                p.push(i);
            });
            assert_eq!(drained(&queues), items);
        }
        assert_eq!(queues.grown(), 2, "a queue the consumer keeps up with lives in two segments");
    }

    #[test]
    fn a_busy_producer_and_consumer_lose_and_reorder_nothing() {
        let queues = Arc::new(Queues::new());
        let (ready, wait) = mpsc::channel();
        const N: u64 = 300_000;
        let producer = {
            let queues = queues.clone();
            std::thread::spawn(move || {
                let p = queues.producer(16, 7); // small segments: the producer changes often
                ready.send(()).unwrap();
                for i in 0..N {
                    p.push(i);
                }
            })
        };
        wait.recv().unwrap();
        let mut seen = Vec::with_capacity(N as usize);
        while seen.len() < N as usize {
            queues.drain(|_, x| seen.push(x));
            std::thread::yield_now();
        }
        producer.join().unwrap();
        queues.drain(|_, x| seen.push(x));
        assert_eq!(seen.len() as u64, N);
        assert!(seen.windows(2).all(|w| w[0] + 1 == w[1]), "in push order, each once");
    }

    #[test]
    fn a_thread_that_ends_with_items_left_hands_them_over_and_its_queue_goes() {
        let queues = Arc::new(Queues::new());
        let q = queues.clone();
        std::thread::spawn(move || {
            let p = q.producer(4, 7);
            for i in 0..7 {
                p.push(i);
            }
        })
        .join()
        .unwrap();
        assert_eq!(lock(&queues.queues).len(), 1, "kept until drained");
        assert_eq!(drained(&queues), (0..7).collect::<Vec<_>>());
        assert_eq!(lock(&queues.queues).len(), 0, "an ended thread's empty queue is dropped");
        assert_eq!(queues.grown(), 1, "its growth still counted");
    }

    #[test]
    fn items_never_drained_are_dropped_with_the_queues() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        let queues = Queues::new();
        let p = queues.producer(4, 7);
        for _ in 0..6 {
            p.push(Counted);
        }
        let mut taken = 0;
        queues.drain(|_, c| {
            taken += 1;
            drop(c)
        });
        assert_eq!((taken, DROPS.load(Ordering::SeqCst)), (6, 6));
        for _ in 0..7 {
            p.push(Counted); // across a segment boundary
        }
        drop(p);
        drop(queues);
        assert_eq!(DROPS.load(Ordering::SeqCst), 13, "the seven left in the queue");
    }
}
