//! The resolver's side of attribution by thread and time: the windows of ended synchronous
//! scopes per OS thread, and the API calls that wait for theirs.
//!
//! A synchronous scope records its OS thread and CUPTI's clock when it opened and closed
//! (`window.rs`). Every API record carries the same thread id and clock, so the call belongs
//! to the innermost window of its thread that holds its start. A call that no ended window
//! holds is *undecided* while a scope that could hold it is still open on its thread: each
//! thread publishes when its outermost open window began, read in a [`Snapshot`] before the
//! resolver drains its channel. Once no open window can hold the call, it was made outside
//! every scope.
//!
//! Cost: a thread's windows are nested or disjoint, so they are kept as a tree (each level
//! ordered by start): a lookup descends it, one range query per level of nesting, however many
//! windows wait. A window arriving adopts the top-level windows inside it (they ended first);
//! a resolved top-level window leaves with its subtree (its fence passed, so no call can still
//! fall in any of them). An undecided call is looked at again only when a window that may hold
//! it arrives or its thread's published start moves past it, and then it is decided. Nothing
//! scans every scope or every call per poll.

use super::records::RawApi;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A synchronous scope's stretch of its thread's time, on CUPTI's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The OS thread id (`gettid`), as CUPTI writes it in API records.
    pub thread: u32,
    /// CUPTI's clock when the scope opened.
    pub start: u64,
    /// CUPTI's clock when it closed.
    pub end: u64,
}

/// Which threads had a window open, read before the resolver drains its channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// CUPTI's clock when the snapshot was taken (before the threads were read).
    pub now: u64,
    /// `(thread, start of its outermost open window)` for every thread with one open.
    pub open: Vec<(u32, u64)>,
}

/// Who made an API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// The scope with this id.
    Scope(u64),
    /// No scope: the call was made outside every annotated function.
    Outside,
    /// Not known yet: a window that may hold it is still open.
    Undecided,
}

/// Ended windows, by `(start, scope id)`: siblings are disjoint; of two windows with one start,
/// the inner one has the larger scope id (ids grow in opening order on a thread).
type Level = BTreeMap<(u64, u64), Node>;

#[derive(Debug)]
struct Node {
    end: u64,
    inner: Level,
}

#[derive(Debug, Default)]
struct PerThread {
    /// Ended windows whose outermost one is not resolved yet, as a tree.
    windows: Level,
    /// Start of the outermost open window, 0 if none (from the last snapshot).
    open_since: u64,
    /// Calls waiting for a window: `(API start, correlation id)` → record.
    undecided: BTreeMap<(u64, u32), RawApi>,
    /// Ranges of API start times to look at again at the next [`ThreadIndex::decidable`].
    retry: Vec<(u64, u64)>,
}

/// The windows and undecided calls of every thread.
#[derive(Debug, Default)]
pub(super) struct ThreadIndex {
    threads: HashMap<u32, PerThread>,
    /// The last snapshot's clock; `None` before any (replays of captures without windows:
    /// every call without an external id is then outside).
    now: Option<u64>,
    /// Correlation ids of the undecided calls.
    ids: HashSet<u32>,
    /// Threads with something in `retry`.
    dirty: HashSet<u32>,
}

impl ThreadIndex {
    /// A scope's window ended: calls on its thread inside it are now decidable.
    pub(super) fn add(&mut self, scope_id: u64, w: Window) {
        let t = self.threads.entry(w.thread).or_default();
        // Windows of a thread arrive in the order they ended: the top-level ones that started
        // inside this one ended inside it.
        let inside: Vec<(u64, u64)> = t.windows.range((w.start, 0)..=(w.end, u64::MAX)).map(|(k, _)| *k).collect();
        let mut inner = Level::new();
        for k in inside {
            if let Some(n) = t.windows.remove(&k) {
                inner.insert(k, n);
            }
        }
        t.windows.insert((w.start, scope_id), Node { end: w.end, inner });
        if !t.undecided.is_empty() {
            t.retry.push((w.start, w.end));
            self.dirty.insert(w.thread);
        }
    }

    /// The scope resolved: every call its window can hold has been seen (its fence passed), and
    /// so have those of every window inside it. A nested window leaves with its outermost one.
    pub(super) fn remove(&mut self, scope_id: u64, w: &Window) {
        if let Some(t) = self.threads.get_mut(&w.thread) {
            t.windows.remove(&(w.start, scope_id));
        }
    }

    /// Takes in which threads have a window open; applied to calls at the next
    /// [`ThreadIndex::decidable`].
    pub(super) fn observe(&mut self, s: &Snapshot) {
        let open: HashMap<u32, u64> = s.open.iter().copied().collect();
        self.threads.retain(|id, t| {
            t.open_since = open.get(id).copied().unwrap_or(0);
            if !t.undecided.is_empty() {
                // Every call that started before now and before the open window is decidable.
                let limit = if t.open_since == 0 { s.now } else { t.open_since.min(s.now) };
                t.retry.push((0, limit.saturating_sub(1)));
                self.dirty.insert(*id);
            }
            !(t.windows.is_empty() && t.undecided.is_empty() && t.open_since == 0)
        });
        for (id, since) in open {
            self.threads.entry(id).or_default().open_since = since;
        }
        self.now = Some(s.now);
    }

    /// Who made the call that started at `start` on `thread`.
    pub(super) fn owner(&self, thread: u32, start: u64) -> Owner {
        let t = self.threads.get(&thread);
        if let Some(t) = t {
            // At each level only the last sibling that opened before `start` can hold it.
            let (mut level, mut found) = (&t.windows, None);
            while let Some((&(_, scope), n)) = level.range(..=(start, u64::MAX)).next_back() {
                if n.end < start {
                    break;
                }
                (level, found) = (&n.inner, Some(scope));
            }
            if let Some(scope) = found {
                return Owner::Scope(scope);
            }
        }
        let Some(now) = self.now else { return Owner::Outside };
        let since = t.map_or(0, |t| t.open_since);
        if start < now && (since == 0 || since > start) {
            Owner::Outside
        } else {
            Owner::Undecided
        }
    }

    /// Keeps a call until a window or a snapshot decides it.
    pub(super) fn hold(&mut self, api: RawApi) {
        self.ids.insert(api.correlation_id);
        self.threads.entry(api.thread_id).or_default().undecided.insert((api.start, api.correlation_id), api);
    }

    /// Whether the call with this correlation id waits for its window.
    pub(super) fn is_undecided(&self, correlation_id: u32) -> bool {
        self.ids.contains(&correlation_id)
    }

    /// The held calls that the windows and the snapshot seen so far decide, with their owner.
    pub(super) fn decidable(&mut self) -> Vec<(RawApi, Owner)> {
        let mut out = Vec::new();
        for id in std::mem::take(&mut self.dirty) {
            let Some(t) = self.threads.get_mut(&id) else { continue };
            let retry = std::mem::take(&mut t.retry);
            let mut keys = Vec::new();
            for (lo, hi) in retry {
                if lo <= hi {
                    keys.extend(t.undecided.range((lo, 0)..=(hi, u32::MAX)).map(|(k, _)| *k));
                }
            }
            for k in keys {
                let owner = self.owner(id, k.0);
                if owner == Owner::Undecided {
                    continue;
                }
                let Some(t) = self.threads.get_mut(&id) else { break };
                if let Some(api) = t.undecided.remove(&k) {
                    self.ids.remove(&api.correlation_id);
                    out.push((api, owner));
                }
            }
        }
        out
    }

    /// Held calls that only wait for the clock to pass them (no open window can hold them):
    /// they are decided at the next snapshot. Calls held by an open scope are not counted.
    pub(super) fn waiting(&self) -> usize {
        self.threads
            .values()
            .map(|t| {
                let below = if t.open_since == 0 { u64::MAX } else { t.open_since };
                t.undecided.range(..(below, 0)).count()
            })
            .sum()
    }

    /// Every held call, whatever holds it.
    pub(super) fn held(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::records::ApiDomain;
    use super::*;

    fn api(thread: u32, start: u64, correlation_id: u32) -> RawApi {
        RawApi {
            domain: ApiDomain::Driver,
            cbid: 0,
            start,
            end: start + 10,
            thread_id: thread,
            correlation_id,
            return_value: 0,
        }
    }

    #[test]
    fn the_innermost_window_of_the_calling_thread_owns_a_call() {
        let mut x = ThreadIndex::default();
        x.observe(&Snapshot { now: 1_000, open: vec![] });
        // A thread's windows arrive in the order they ended: inner ones before their outer one.
        x.add(2, Window { thread: 7, start: 200, end: 300 });
        x.add(3, Window { thread: 7, start: 350, end: 400 });
        x.add(1, Window { thread: 7, start: 100, end: 500 });
        x.add(9, Window { thread: 8, start: 0, end: 900 }); // another thread
        assert_eq!(x.owner(7, 250), Owner::Scope(2));
        assert_eq!(x.owner(7, 320), Owner::Scope(1), "between two inner windows: the outer one");
        assert_eq!(x.owner(7, 360), Owner::Scope(3));
        assert_eq!(x.owner(7, 600), Owner::Outside);
        assert_eq!(x.owner(8, 600), Owner::Scope(9));
        x.remove(2, &Window { thread: 7, start: 200, end: 300 });
        assert_eq!(x.owner(7, 250), Owner::Scope(2), "a nested window stays until its outer one leaves");
        x.remove(1, &Window { thread: 7, start: 100, end: 500 });
        assert_eq!(x.owner(7, 250), Owner::Outside, "the outer window left with its inner ones");
    }

    #[test]
    fn a_call_waits_while_a_window_that_may_hold_it_is_open() {
        let mut x = ThreadIndex::default();
        // Thread 7 has a window open since 100; the clock read 1_000.
        x.observe(&Snapshot { now: 1_000, open: vec![(7, 100)] });
        assert_eq!(x.owner(7, 50), Owner::Outside, "before the open window");
        assert_eq!(x.owner(7, 150), Owner::Undecided);
        assert_eq!(x.owner(7, 1_500), Owner::Undecided, "after the snapshot's clock");
        assert_eq!(x.owner(5, 1_500), Owner::Undecided, "after the snapshot's clock, any thread");
        x.hold(api(7, 150, 1));
        x.hold(api(7, 160, 2));
        x.hold(api(5, 1_500, 3));
        assert!(x.decidable().is_empty());
        assert_eq!((x.held(), x.waiting()), (3, 1), "only the call past the clock waits for time");
        // The window closes: its calls go to it.
        x.add(4, Window { thread: 7, start: 100, end: 155 });
        let got = x.decidable();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0.correlation_id, got[0].1), (1, Owner::Scope(4)));
        assert!(x.is_undecided(2) && !x.is_undecided(1));
        // Nothing is open any more and the clock moved on: the rest was outside.
        x.observe(&Snapshot { now: 2_000, open: vec![] });
        let mut got: Vec<_> = x.decidable().into_iter().map(|(a, o)| (a.correlation_id, o)).collect();
        got.sort_by_key(|g| g.0);
        assert_eq!(got, vec![(2, Owner::Outside), (3, Owner::Outside)]);
        assert_eq!((x.held(), x.waiting()), (0, 0));
    }

    /// Many windows waiting (their kernels not in yet), calls between them and inside them: each
    /// lookup descends the tree instead of walking back over the waiting windows.
    #[test]
    fn lookups_do_not_walk_over_waiting_windows() {
        let mut x = ThreadIndex::default();
        x.observe(&Snapshot { now: u64::MAX, open: vec![] });
        let n = 200_000u64;
        for i in 0..n {
            // Scope 2i+1 inside scope 2i+2's window... and every pair disjoint from the next.
            x.add(2 * i + 1, Window { thread: 1, start: 100 * i + 20, end: 100 * i + 30 });
            x.add(2 * i + 2, Window { thread: 1, start: 100 * i + 10, end: 100 * i + 50 });
        }
        let t = std::time::Instant::now();
        for i in 0..n {
            assert_eq!(x.owner(1, 100 * i + 25), Owner::Scope(2 * i + 1));
            assert_eq!(x.owner(1, 100 * i + 40), Owner::Scope(2 * i + 2));
            assert_eq!(x.owner(1, 100 * i + 70), Owner::Outside);
        }
        // A walk back over the waiting windows would take n²/2 steps (2·10¹⁰): minutes, not this.
        assert!(t.elapsed() < std::time::Duration::from_secs(30), "{:?}", t.elapsed());
        x.remove(2, &Window { thread: 1, start: 10, end: 50 });
        assert_eq!(x.owner(1, 25), Owner::Outside, "the resolved outer window left with its inner one");
    }

    #[test]
    fn without_a_snapshot_every_call_outside_a_window_is_outside() {
        let x = ThreadIndex::default();
        assert_eq!(x.owner(1, 10), Owner::Outside);
    }
}
