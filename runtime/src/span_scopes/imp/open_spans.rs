//! Which selected spans were open when, and the rule of attribution by time (decision 55).
//!
//! A framework's own thread (cubecl's device thread, an executor's worker) launches the work a
//! caller's span asked for without ever entering that span: nothing on the launching thread says
//! whose the work is. What is known is *when* it was launched. Each selected span instance keeps
//! the stretches of host time during which it was entered on at least one thread; work whose
//! launching thread had no scope of its own goes to the innermost selected span entered at its
//! launch ([`OpenSpans::at`]) when that is one span (one chain of nested spans: its innermost),
//! and to nobody's in particular ("during several spans") when several unrelated ones were.
//!
//! Cost: a selected span's entry and exit are one atomic operation each on its own stretch log
//! (`stretches.rs`: no lock), and read the clock when the count of threads it is entered on goes
//! from 0 to 1 or back (and count the
//! spans entered anywhere then, [`OpenSpans::enter`]); the process-wide list is locked once per
//! span instance (at its first entry), and by the lookups, which run on the backends' resolver
//! threads, except the lookup for work launched now ([`OpenSpans::work_now`]), which runs per
//! pass on the thread that encodes: one atomic load while no selected span is entered.

// The lookup's consumers are the backends that attribute work by time: CUPTI and wgpu's
// instrumented passes; without them the log is kept and only its tests read it.
#![cfg_attr(not(any(feature = "cuda", feature = "_wgpu")), allow(dead_code))]

use super::stretches::Stretches;
use crate::backends::SpanWork;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How long a closed span stays in the log for late lookups: CUPTI delivers a launch's records
/// up to a few seconds after it (a buffer fills or a flush asks), well within this.
const RETAIN_NS: u64 = 120_000_000_000;

/// The same for the census of unselected spans (`selected.rs`), which may see every span of a
/// busy program: it only names work, so a record delivered later than this goes unnamed.
const CENSUS_RETAIN_NS: u64 = 10_000_000_000;

/// Whose, by time, the work launched at an instant is (CUPTI's question; wgpu asks
/// [`OpenSpans::work_at`]).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ByTime {
    /// No selected span was entered anywhere then.
    Nobody,
    /// The innermost span of the one chain entered then: its scope id.
    One(u64),
    /// Several unrelated spans were entered then: their names, sorted, each with how many of
    /// its instances were (`forward_pass ×2, train_step`).
    Several(Arc<str>),
}

/// [`ByTime`] for a backend that gathers a span's work itself: the span's work.
#[cfg_attr(not(feature = "_wgpu"), allow(dead_code))]
#[derive(Debug)]
pub(crate) enum WorkByTime {
    Nobody,
    One(SpanWork),
    Several(Arc<str>),
}

/// Whether anything reads how many instances are entered now ([`OpenSpans::work_now`], for
/// wgpu's instrumented passes): where nothing does, a stretch's opening and closing keep no
/// count (a locked operation on one process-wide word each, for no reader).
const COUNTS_ENTERED: bool = cfg!(any(test, feature = "_wgpu"));

/// One selected span instance's life: the stretches it was entered on some thread.
#[derive(Debug)]
pub(crate) struct Life {
    name: &'static str,
    /// The nearest selected span it was made in.
    parent: Option<Arc<Life>>,
    /// What backends gather for the span (an instrumented device's passes), so that work found
    /// to be the span's by time joins it.
    #[cfg_attr(not(feature = "_wgpu"), allow(dead_code))] // only wgpu gathers work per span
    work: SpanWork,
    /// Its scope's id (0 until its first entry opened it).
    scope_id: AtomicU64,
    /// Host clock (ns) stretches, kept without a lock: each entry and exit is one atomic
    /// operation (`stretches.rs`, decision 71).
    stretches: Stretches,
    closed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Life {
    /// A span instance's life; `work` is the instance's own (the span layer's `Instance`).
    pub(crate) fn with_work(name: &'static str, parent: Option<Arc<Life>>, work: SpanWork) -> Arc<Life> {
        Arc::new(Life {
            name,
            parent,
            work,
            scope_id: AtomicU64::new(0),
            stretches: Stretches::new(),
            closed: AtomicBool::new(false),
        })
    }

    /// Entered on one more thread at `now` (host clock, ns; read only when needed).
    #[inline]
    pub(crate) fn enter(&self, now: impl FnOnce() -> u64) {
        self.stretches.enter(now);
    }

    /// Exited on one thread.
    #[inline]
    pub(crate) fn exit(&self, now: impl FnOnce() -> u64) {
        self.stretches.exit(now);
    }

    /// The span closed: no stretch will open again.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) ran: its registry id may be a new span's since.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // only ByTime names a scope
    fn scope_id(&self) -> u64 {
        self.scope_id.load(Ordering::Acquire)
    }

    /// Entered at instant `t`.
    fn entered_at(&self, t: u64) -> bool {
        self.stretches.entered_at(t)
    }

    /// Closed and out of every stretch before instant `before`.
    fn gone_before(&self, before: u64) -> bool {
        self.closed.load(Ordering::Acquire) && self.stretches.last_end().is_none_or(|end| end < before)
    }
}

/// The process's selected span instances, from their first entry until [`RETAIN_NS`] after
/// they closed. Owned by the span layer's state (`Selected`).
#[derive(Debug)]
pub(crate) struct OpenSpans {
    lives: Mutex<Vec<Arc<Life>>>,
    /// How long a closed span stays for late lookups.
    retain_ns: u64,
    /// The log is pruned when it reaches this length (twice what the last pruning left), so
    /// that an instance's first entry costs O(1) amortized.
    prune_at: Mutex<usize>,
    /// Instances entered on at least one thread now ([`OpenSpans::enter`], where
    /// [`COUNTS_ENTERED`]): none, and no work launched now is anyone's by time, without a lock.
    entered: AtomicUsize,
}

impl OpenSpans {
    pub(crate) const fn new() -> Self {
        OpenSpans {
            lives: Mutex::new(Vec::new()),
            retain_ns: RETAIN_NS,
            prune_at: Mutex::new(64),
            entered: AtomicUsize::new(0),
        }
    }

    /// The log of the census of unselected spans: kept for a shorter time.
    pub(crate) const fn census() -> Self {
        OpenSpans {
            lives: Mutex::new(Vec::new()),
            retain_ns: CENSUS_RETAIN_NS,
            prune_at: Mutex::new(64),
            entered: AtomicUsize::new(0),
        }
    }

    /// A span instance's scope opened (its first entry) with id `scope_id`: it is in the log
    /// from now on. Those gone for longer than its retention ([`RETAIN_NS`]) leave it.
    pub(crate) fn opened(&self, life: &Arc<Life>, scope_id: u64, now_ns: u64) {
        life.scope_id.store(scope_id, Ordering::Release);
        let mut lives = lock(&self.lives);
        let mut prune_at = lock(&self.prune_at);
        if lives.len() >= *prune_at {
            let horizon = now_ns.saturating_sub(self.retain_ns);
            lives.retain(|l| !l.gone_before(horizon));
            *prune_at = (2 * lives.len()).max(64);
        }
        lives.push(life.clone());
    }

    /// `life`, one of this log's, is entered on one more thread at `now`: counted among the
    /// instances entered now before its stretch opens, so that a lookup that finds none entered
    /// ([`OpenSpans::work_now`]) is right for the instant it looked.
    pub(crate) fn enter(&self, life: &Life, now: impl FnOnce() -> u64) {
        life.enter(|| {
            if COUNTS_ENTERED {
                self.entered.fetch_add(1, Ordering::SeqCst);
            }
            now()
        });
    }

    /// `life` is exited on one thread: no longer counted once its stretch closed.
    pub(crate) fn exit(&self, life: &Life, now: impl FnOnce() -> u64) {
        life.exit(|| {
            let t = now();
            if COUNTS_ENTERED {
                self.entered.fetch_sub(1, Ordering::SeqCst);
            }
            t
        });
    }

    /// [`OpenSpans::work_at`] for work launched now (an instrumented device's pass beginning):
    /// one atomic load, without the log's lock, while no selected span is entered anywhere.
    #[cfg_attr(not(feature = "_wgpu"), allow(dead_code))] // wgpu's lookup
    pub(crate) fn work_now(&self) -> WorkByTime {
        if self.entered.load(Ordering::SeqCst) == 0 {
            return WorkByTime::Nobody;
        }
        self.work_at(crate::clock::now_ns())
    }

    /// The rule, at host-clock instant `t` (ns): the spans entered then, less every one that is
    /// an ancestor of another; one left is the owner, several are not guessed between.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // CUPTI's lookup
    pub(crate) fn at(&self, t: u64) -> ByTime {
        match self.choice_at(t) {
            Choice::Nobody => ByTime::Nobody,
            Choice::One(life) => ByTime::One(life.scope_id()),
            Choice::Several(names) => ByTime::Several(names),
        }
    }

    /// The same rule, for a backend that gathers the span's work itself (wgpu's instrumented
    /// passes): the one span's work, or the names of the several entered at `t`.
    #[cfg_attr(not(feature = "_wgpu"), allow(dead_code))] // wgpu's lookup
    pub(crate) fn work_at(&self, t: u64) -> WorkByTime {
        match self.choice_at(t) {
            Choice::Nobody => WorkByTime::Nobody,
            Choice::One(life) => WorkByTime::One(life.work.clone()),
            Choice::Several(names) => WorkByTime::Several(names),
        }
    }

    /// The same rule, for naming: the innermost span entered at `t`, or the several unrelated
    /// ones (`forward_pass ×2, train_step`); `None` when none was.
    pub(crate) fn names_at(&self, t: u64) -> Option<Arc<str>> {
        match self.choice_at(t) {
            Choice::Nobody => None,
            Choice::One(life) => Some(life.name.into()),
            Choice::Several(names) => Some(names),
        }
    }

    fn choice_at(&self, t: u64) -> Choice {
        let open: Vec<Arc<Life>> = lock(&self.lives).iter().filter(|l| l.entered_at(t)).cloned().collect();
        innermost(&open)
    }
}

/// [`OpenSpans::at`]'s choice, with the life it chose.
enum Choice {
    Nobody,
    One(Arc<Life>),
    Several(Arc<str>),
}

/// [`OpenSpans::at`]'s choice among the spans entered at one instant.
fn innermost(open: &[Arc<Life>]) -> Choice {
    let is_ancestor_of_another = |a: &Arc<Life>| {
        open.iter().any(|o| {
            let mut p = o.parent.as_ref();
            while let Some(l) = p {
                if Arc::ptr_eq(l, a) {
                    return true;
                }
                p = l.parent.as_ref();
            }
            false
        })
    };
    let leaves: Vec<&Arc<Life>> = open.iter().filter(|l| !is_ancestor_of_another(l)).collect();
    match leaves.as_slice() {
        [] => Choice::Nobody,
        [one] => Choice::One(Arc::clone(one)),
        several => {
            let mut names: Vec<&str> = several.iter().map(|l| l.name).collect();
            names.sort_unstable();
            let mut out: Vec<String> = Vec::new();
            for group in names.chunk_by(|a, b| a == b) {
                out.push(match group.len() {
                    1 => group[0].to_owned(),
                    n => format!("{} ×{n}", group[0]),
                });
            }
            Choice::Several(out.join(", ").into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Life {
        /// A life with no work of its own.
        fn new(name: &'static str, parent: Option<Arc<Life>>) -> Arc<Life> {
            Life::with_work(name, parent, SpanWork::default())
        }
    }

    fn opened(log: &OpenSpans, life: &Arc<Life>, id: u64, at: u64) {
        log.opened(life, id, at);
    }

    #[test]
    fn work_launched_while_one_chain_is_entered_goes_to_its_innermost_span() {
        let log = OpenSpans::new();
        let epoch = Life::new("epoch", None);
        let step = Life::new("train_step", Some(epoch.clone()));
        let fwd = Life::new("forward_pass", Some(step.clone()));
        opened(&log, &epoch, 1, 0);
        epoch.enter(|| 0);
        opened(&log, &step, 2, 10);
        step.enter(|| 10);
        opened(&log, &fwd, 3, 20);
        fwd.enter(|| 20);
        fwd.exit(|| 30);
        fwd.close();
        step.exit(|| 40);
        epoch.exit(|| 50);
        assert_eq!(log.at(5), ByTime::One(1), "only the epoch");
        assert_eq!(log.at(15), ByTime::One(2));
        assert_eq!(log.at(25), ByTime::One(3), "the innermost of the chain");
        assert_eq!(log.at(30), ByTime::One(2), "the exit ends the stretch");
        assert_eq!(log.at(45), ByTime::One(1));
        assert_eq!(log.at(50), ByTime::Nobody);
    }

    #[test]
    fn work_launched_now_is_nobodys_without_a_lookup_only_while_no_span_is_entered() {
        let log = OpenSpans::new();
        let step = Life::new("train_step", None);
        opened(&log, &step, 1, 0);
        let now = crate::clock::now_ns;
        assert!(matches!(log.work_now(), WorkByTime::Nobody), "opened, never entered");
        log.enter(&step, now);
        assert!(matches!(log.work_now(), WorkByTime::One(_)), "entered on one thread");
        log.enter(&step, || unreachable!("entered already: the count of spans entered stays"));
        log.exit(&step, || unreachable!("still entered on another thread"));
        assert!(matches!(log.work_now(), WorkByTime::One(_)), "still entered on one thread");
        log.exit(&step, now);
        assert!(matches!(log.work_now(), WorkByTime::Nobody), "exited everywhere");
        log.exit(&step, || unreachable!("an exit without an entry changes nothing"));
        assert!(matches!(log.work_now(), WorkByTime::Nobody));
        log.enter(&step, now);
        assert!(matches!(log.work_now(), WorkByTime::One(_)), "the count went back to one, not below");
    }

    #[test]
    fn two_unrelated_spans_entered_at_once_are_not_guessed_between() {
        let log = OpenSpans::new();
        let epoch = Life::new("epoch", None);
        let a = Life::new("forward_pass", Some(epoch.clone()));
        let b = Life::new("forward_pass", Some(epoch.clone()));
        let c = Life::new("train_step", None);
        for (l, id) in [(&epoch, 1), (&a, 2), (&b, 3), (&c, 4)] {
            opened(&log, l, id, 0);
        }
        epoch.enter(|| 0);
        a.enter(|| 10);
        b.enter(|| 15);
        a.exit(|| 20);
        c.enter(|| 25);
        assert_eq!(log.at(12), ByTime::One(2), "a alone under the epoch");
        assert_eq!(log.at(17), ByTime::Several("forward_pass ×2".into()), "siblings: the epoch is no answer");
        assert_eq!(log.at(30), ByTime::Several("forward_pass, train_step".into()));
    }

    #[test]
    fn names_are_the_innermost_span_or_the_unrelated_ones() {
        let log = OpenSpans::census();
        let step = Life::new("train_step", None);
        let fwd = Life::new("forward_pass", Some(step.clone()));
        let other = Life::new("serve", None);
        for (l, at) in [(&step, 0), (&fwd, 10), (&other, 30)] {
            opened(&log, l, 0, at);
            l.enter(|| at);
        }
        fwd.exit(|| 20);
        assert_eq!(log.names_at(5).as_deref(), Some("train_step"));
        assert_eq!(log.names_at(15).as_deref(), Some("forward_pass"), "the innermost of the chain");
        assert_eq!(log.names_at(25).as_deref(), Some("train_step"));
        assert_eq!(log.names_at(35).as_deref(), Some("serve, train_step"));
        assert_eq!(OpenSpans::census().names_at(5), None);
    }

    #[test]
    fn a_span_entered_on_two_threads_is_open_until_the_last_exit() {
        let log = OpenSpans::new();
        let s = Life::new("request", None);
        opened(&log, &s, 7, 0);
        s.enter(|| 0);
        s.enter(|| unreachable!("the clock is read only when the count leaves 0"));
        s.exit(|| unreachable!("still entered on one thread"));
        assert_eq!(log.at(100), ByTime::One(7));
        s.exit(|| 200);
        assert_eq!(log.at(200), ByTime::Nobody);
        // Entered again later (a future's next poll): a second stretch; the gap is nobody's.
        s.enter(|| 300);
        s.exit(|| 400);
        assert_eq!(log.at(250), ByTime::Nobody);
        assert_eq!(log.at(350), ByTime::One(7));
    }

    #[test]
    fn closed_spans_leave_the_log_long_after_they_closed() {
        let log = OpenSpans::new();
        let old = Life::new("old", None);
        opened(&log, &old, 1, 0);
        old.enter(|| 0);
        old.exit(|| 10);
        old.close();
        let open = Life::new("open", None);
        opened(&log, &open, 2, 20);
        assert_eq!(lock(&log.lives).len(), 2, "kept while a late record may still ask");
        *lock(&log.prune_at) = 2; // pruned at the next instance
        let later = Life::new("later", None);
        opened(&log, &later, 3, 10 + RETAIN_NS + 1);
        let left: Vec<_> = lock(&log.lives).iter().map(|l| l.name).collect();
        assert_eq!(left, ["open", "later"], "an unclosed span stays");
        assert_eq!(*lock(&log.prune_at), 64, "next pruning: twice what is left, at least 64");
    }
}
