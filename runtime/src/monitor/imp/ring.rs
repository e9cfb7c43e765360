//! A bounded history: the newest samples in time order, the oldest dropped when full, so memory
//! stays fixed however long the program runs.

use std::collections::VecDeque;

/// Items that carry the time they were taken, for lookups by time.
pub(super) trait Timed {
    fn time_ns(&self) -> u64;
}

#[derive(Debug)]
pub(super) struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    pub(super) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Ring { items: VecDeque::with_capacity(capacity), capacity }
    }

    pub(super) fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    pub(super) fn latest(&self) -> Option<&T> {
        self.items.back()
    }
}

impl<T: Timed> Ring<T> {
    /// The item taken nearest to `time_ns`, if one is within `tolerance_ns` of it. Items are in
    /// time order (pushed as taken), so this is a binary search.
    pub(super) fn nearest(&self, time_ns: u64, tolerance_ns: u64) -> Option<&T> {
        let after = self.items.partition_point(|s| s.time_ns() < time_ns);
        let before = after.checked_sub(1).and_then(|i| self.items.get(i));
        let candidates = [before, self.items.get(after)];
        candidates
            .into_iter()
            .flatten()
            .map(|s| (s.time_ns().abs_diff(time_ns), s))
            .filter(|(d, _)| *d <= tolerance_ns)
            .min_by_key(|(d, _)| *d)
            .map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Timed for u64 {
        fn time_ns(&self) -> u64 {
            *self
        }
    }

    #[test]
    fn keeps_the_newest() {
        let mut r = Ring::new(3);
        for t in [10u64, 20, 30, 40, 50] {
            r.push(t);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [30, 40, 50]);
        assert_eq!(r.latest(), Some(&50));
    }

    #[test]
    fn nearest_by_time_within_tolerance() {
        let mut r = Ring::new(10);
        for t in [100u64, 200, 300] {
            r.push(t);
        }
        assert_eq!(r.nearest(240, 100), Some(&200));
        assert_eq!(r.nearest(260, 100), Some(&300));
        assert_eq!(r.nearest(0, 100), Some(&100));
        assert_eq!(r.nearest(1000, 100), None);
        assert_eq!(r.nearest(450, 150), Some(&300));
        assert_eq!(Ring::<u64>::new(4).nearest(5, u64::MAX), None);
    }
}
