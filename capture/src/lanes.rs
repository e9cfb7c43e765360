//! Lanes of a timeline track, for the two writers of Chrome Trace Event JSON (the runtime's
//! timeline and `gpuspan timeline`). Complete events on one track must nest or follow one
//! another: Perfetto drops one that overlaps another without nesting
//! (`slice_drop_overlapping_complete_event`). Such events are real: two tasks' async calls take
//! turns on one tokio worker, two threads' calls overlap on one device's call track. Each event
//! gets the first lane of its track it nests in; lane 0 is the track itself and the writer draws
//! lane n as a track of its own beside it.

use std::cmp::Reverse;
use std::collections::BTreeMap;

/// The most lanes of a track searched for room: an event that fits none of the first
/// `SEARCH_LANES` gets a new lane, so placing `n` events costs O(n × SEARCH_LANES) however many
/// overlap (calls that each overlap the next without nesting make a lane each; without the
/// bound every event looked at every lane, n² / 2 looks).
pub const SEARCH_LANES: usize = 256;

/// The lane of each event, in the order given: `(track, start, end)` with `start <= end`. An
/// event goes on the first lane where every event still open at its start encloses it, among
/// the first [`SEARCH_LANES`], else on a new one; an event that ends when the next starts
/// leaves room for it.
pub fn assign<K: Ord + Copy>(events: &[(K, u64, u64)]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    // By track, then start, the longer first (it encloses the other), then input order.
    order.sort_by_key(|&i| {
        let (track, start, end) = events[i];
        (track, start, Reverse(end), i)
    });
    let mut lane = vec![0; events.len()];
    // Per track: per lane, the ends of the events open on it, innermost last.
    let mut open: BTreeMap<K, Vec<Vec<u64>>> = BTreeMap::new();
    for i in order {
        let (track, start, end) = events[i];
        let lanes = open.entry(track).or_default();
        let mut fits = None;
        for (n, ends) in lanes.iter_mut().enumerate().take(SEARCH_LANES) {
            while ends.last().is_some_and(|&e| e <= start) {
                ends.pop();
            }
            if ends.last().is_none_or(|&e| e >= end) {
                fits = Some(n);
                break;
            }
        }
        let n = fits.unwrap_or_else(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[n].push(end);
        lane[i] = n as u32;
    }
    lane
}

/// Each event's track id as a writer draws it, handed out in the order of the events given to
/// [`Placer::new`]: the event's own track for lane 0, else a track for that lane of it, the
/// lanes' ids numbered from `first` in order of first use.
#[derive(Debug)]
pub struct Placer<K> {
    lanes: std::vec::IntoIter<u32>,
    extra: BTreeMap<(K, u32), u64>,
    first: u64,
}

impl<K: Ord + Copy> Placer<K> {
    pub fn new(events: &[(K, u64, u64)], first: u64) -> Placer<K> {
        Placer { lanes: assign(events).into_iter(), extra: BTreeMap::new(), first }
    }

    /// The next event's lane track, on `track`; `None`: lane 0, the track itself.
    pub fn next(&mut self, track: K) -> Option<u64> {
        match self.lanes.next() {
            Some(lane) if lane > 0 => {
                let id = self.first + self.extra.len() as u64;
                Some(*self.extra.entry((track, lane)).or_insert(id))
            }
            _ => None,
        }
    }

    /// The tracks of lanes past the first: (track, lane, id).
    pub fn lanes(self) -> impl Iterator<Item = (K, u32, u64)> {
        self.extra.into_iter().map(|((track, lane), id)| (track, lane, id))
    }
}

/// The name of a lane's track, beside the track named `track`.
pub fn lane_name(track: &str, lane: u32) -> String {
    format!("{track} (overlapping {lane})")
}

/// Two events on one track that overlap without one enclosing the other, if any: what Perfetto
/// would drop. For checking a written trace.
pub fn overlapping<K: Ord + Copy>(events: &[(K, u64, u64)]) -> Option<(usize, usize)> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| {
        let (track, start, end) = events[i];
        (track, start, Reverse(end), i)
    });
    // Per track, the events open at the current start, innermost last.
    let mut open: Vec<usize> = Vec::new();
    let mut track = None;
    for i in order {
        let (t, start, end) = events[i];
        if track != Some(t) {
            open.clear();
            track = Some(t);
        }
        while open.last().is_some_and(|&o| events[o].2 <= start) {
            open.pop();
        }
        if let Some(&o) = open.last() {
            if events[o].2 < end {
                return Some((o, i));
            }
        }
        open.push(i);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_sequential_events_share_a_lane_and_overlapping_ones_do_not() {
        let events = [
            ("main", 0, 100),   // outer
            ("main", 10, 20),   // inside it
            ("main", 20, 30),   // after the previous, touching
            ("main", 50, 150),  // overlaps the outer: lane 1
            ("main", 60, 70),   // inside both: the first lane it nests in
            ("main", 90, 120),  // overlaps the outer on lane 0, inside the lane-1 event
            ("gpu", 5, 95),     // another track
            ("main", 140, 160), // overlaps the lane-1 event only: lane 0 is free again
            ("main", 149, 155), // overlaps the lane-1 event, inside the previous one
        ];
        assert_eq!(assign(&events), [0, 0, 0, 1, 0, 1, 0, 0, 0]);
        assert!(assign::<u8>(&[]).is_empty());
        assert_eq!(overlapping(&events), Some((0, 3)));
        assert_eq!(overlapping(&[(1, 0, 10), (1, 0, 10), (1, 10, 12), (2, 5, 20)]), None, "equal, touching");
    }

    #[test]
    fn every_lane_holds_only_nesting_or_disjoint_events() {
        // Interleaved async calls: n overlapping chains, each event on a lane with no partial
        // overlap, and no more lanes than events overlapping at one instant.
        let mut events = Vec::new();
        for k in 0..40u64 {
            events.push((1u8, k * 7, k * 7 + 20 + (k % 5) * 3));
        }
        let lanes = assign(&events);
        assert!(overlapping(&events).is_some(), "the events do overlap on their track");
        let on_lanes: Vec<((u8, u32), u64, u64)> =
            events.iter().zip(&lanes).map(|(&(t, s, e), &lane)| ((t, lane), s, e)).collect();
        assert_eq!(overlapping(&on_lanes), None);
        let depth = (0..events.len() as u64 * 7 + 40)
            .map(|t| events.iter().filter(|e| e.1 <= t && t < e.2).count())
            .max()
            .unwrap();
        let used = *lanes.iter().max().unwrap() as usize + 1;
        assert!(used <= depth, "{used} lanes for {depth} events open at once");
    }
}
