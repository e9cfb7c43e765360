//! A span instance's entered stretches, kept without a lock (decision 71): its entry and exit on
//! any thread are one compare-and-swap each, plus the clock and a slot's writes when the count
//! of threads it is entered on leaves or reaches 0.
//!
//! The count and the number of stretches share one atomic word, so the thread whose entry takes
//! the count from 0 to 1 also claims the next slot, and the thread whose exit takes it back to 0
//! knows which slot to close: one writer per slot at a time, in the order the word's changes
//! make. Slots live in chunks that double in size and are never moved or freed before the log,
//! so a reader (the resolver's lookups by time) walks them while they are written: a slot not
//! written yet (its chunk not there, or its end still 0) is not entered.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Slots in the first chunk; chunk `k` holds `FIRST << k`.
const FIRST: usize = 16;
/// Chunks: room for `FIRST << CHUNKS` stretches, more than the 2³² the word counts.
const CHUNKS: usize = 29;

#[derive(Debug, Default)]
struct Slot {
    start: AtomicU64,
    /// `u64::MAX` while open; 0 until the slot is written.
    end: AtomicU64,
}

/// The stretches of host time (ns) a span instance was entered on at least one thread.
#[derive(Debug)]
pub(crate) struct Stretches {
    /// Threads it is entered on now (low 32 bits) and slots claimed (high 32 bits).
    word: AtomicU64,
    chunks: [AtomicPtr<Slot>; CHUNKS],
}

/// Slot `i`'s chunk and its place there.
fn place(i: usize) -> (usize, usize) {
    let pos = i + FIRST;
    let k = (pos.ilog2() - FIRST.ilog2()) as usize;
    (k, pos - (FIRST << k))
}

const ONE_SLOT: u64 = 1 << 32;

impl Stretches {
    pub(crate) const fn new() -> Stretches {
        Stretches { word: AtomicU64::new(0), chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS] }
    }

    /// Entered on one more thread; `now` (host clock) is read only when it opens a stretch.
    /// True when it did (the count left 0).
    #[inline]
    pub(crate) fn enter(&self, now: impl FnOnce() -> u64) -> bool {
        let before = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(if w as u32 == 0 { (w + ONE_SLOT) | 1 } else { w + 1 })
            })
            .unwrap_or_else(|w| w);
        if before as u32 != 0 {
            return false;
        }
        let slot = self.slot_to_write((before >> 32) as usize);
        slot.start.store(now(), Ordering::Relaxed);
        // After the start: a reader that sees the end sees the start.
        slot.end.store(u64::MAX, Ordering::Release);
        true
    }

    /// Exited on one thread; `now` is read only when it closes the stretch (the count reached
    /// 0). True when it did. An exit without an entry changes nothing.
    #[inline]
    pub(crate) fn exit(&self, now: impl FnOnce() -> u64) -> bool {
        let Ok(before) =
            self.word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| (w as u32 != 0).then(|| w - 1))
        else {
            return false;
        };
        if before as u32 != 1 {
            return false;
        }
        // The stretch this thread closes is the last claimed: no entry can claim another before
        // the word left 1, and the one that opened it wrote it before its own exit.
        let claimed = (before >> 32) as usize;
        if let Some(slot) = self.slot((claimed).wrapping_sub(1)) {
            slot.end.store(now().max(1), Ordering::Release);
        }
        true
    }

    /// Whether it was entered at instant `t` (host clock, ns).
    pub(crate) fn entered_at(&self, t: u64) -> bool {
        self.each().any(|(s, e)| s <= t && t < e)
    }

    /// The end of the last stretch (`u64::MAX` while open), if it was ever entered.
    pub(crate) fn last_end(&self) -> Option<u64> {
        self.each().last().map(|(_, e)| e)
    }

    /// Every stretch written so far, as `(start, end)`.
    fn each(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let claimed = (self.word.load(Ordering::Acquire) >> 32) as usize;
        (0..claimed).filter_map(|i| {
            let slot = self.slot(i)?;
            let end = slot.end.load(Ordering::Acquire);
            (end != 0).then(|| (slot.start.load(Ordering::Relaxed), end))
        })
    }

    /// Slot `i`, if its chunk is there.
    fn slot(&self, i: usize) -> Option<&Slot> {
        if i >= FIRST << CHUNKS {
            return None;
        }
        let (k, at) = place(i);
        let chunk = self.chunks[k].load(Ordering::Acquire);
        // SAFETY: a chunk of `FIRST << k` slots, published once and freed only with `self`.
        (!chunk.is_null()).then(|| unsafe { &*chunk.add(at) })
    }

    /// Slot `i` for the one thread that claimed it, its chunk made if it is the chunk's first.
    fn slot_to_write(&self, i: usize) -> &Slot {
        let (k, at) = place(i.min((FIRST << CHUNKS) - 1));
        let mut chunk = self.chunks[k].load(Ordering::Acquire);
        if chunk.is_null() {
            // Only the claimer of a chunk's first slot gets here (claims are ordered), so no
            // other thread makes this chunk.
            let slots: Box<[Slot]> = (0..FIRST << k).map(|_| Slot::default()).collect();
            chunk = Box::into_raw(slots).cast::<Slot>();
            self.chunks[k].store(chunk, Ordering::Release);
        }
        // SAFETY: as in `slot`.
        unsafe { &*chunk.add(at) }
    }
}

impl Drop for Stretches {
    fn drop(&mut self) {
        for (k, chunk) in self.chunks.iter_mut().enumerate() {
            let p = *chunk.get_mut();
            if !p.is_null() {
                // SAFETY: made in `slot_to_write` as a boxed slice of `FIRST << k` slots.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, FIRST << k)) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn slots_are_placed_in_chunks_that_double() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(15), (0, 15));
        assert_eq!(place(16), (1, 0));
        assert_eq!(place(47), (1, 31));
        assert_eq!(place(48), (2, 0));
    }

    #[test]
    fn stretches_open_at_the_first_entry_and_close_at_the_last_exit() {
        let s = Stretches::new();
        assert!(!s.exit(|| unreachable!("never entered")), "an exit without an entry changes nothing");
        assert!(s.enter(|| 10));
        assert!(!s.enter(|| unreachable!("entered already")));
        assert!(!s.exit(|| unreachable!("still entered on a thread")));
        assert!(s.entered_at(10) && s.entered_at(1_000) && !s.entered_at(9));
        assert_eq!(s.last_end(), Some(u64::MAX));
        assert!(s.exit(|| 20));
        assert!(!s.entered_at(20) && s.entered_at(19));
        // Many stretches: past the first chunks.
        for i in 1..200u64 {
            assert!(s.enter(|| 100 * i));
            assert!(s.exit(|| 100 * i + 50));
        }
        assert!(s.entered_at(100 * 150 + 10) && !s.entered_at(100 * 150 + 60));
        assert_eq!(s.last_end(), Some(100 * 199 + 50));
    }

    /// Threads entering and leaving at once: whatever the interleaving, the count is never lost
    /// and every stretch written is closed once all have left.
    #[test]
    fn concurrent_entries_leave_every_stretch_closed() {
        let s = Arc::new(Stretches::new());
        let clock = Arc::new(AtomicU64::new(1));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (s, clock) = (s.clone(), clock.clone());
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        s.enter(|| clock.fetch_add(1, Ordering::Relaxed));
                        s.exit(|| clock.fetch_add(1, Ordering::Relaxed));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(s.word.load(Ordering::Relaxed) as u32, 0, "entered on no thread");
        let all: Vec<_> = s.each().collect();
        let claimed = (s.word.load(Ordering::Relaxed) >> 32) as usize;
        assert_eq!(all.len(), claimed, "every claimed slot was written");
        assert!(all.iter().all(|&(st, e)| e != u64::MAX && st < e), "all closed: {:?}", &all[..all.len().min(8)]);
        assert!(!s.entered_at(clock.load(Ordering::Relaxed)));
    }
}
