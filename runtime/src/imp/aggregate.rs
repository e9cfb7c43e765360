//! Per-site aggregates: every call is counted here, sampled or not, so fast kernels called a
//! million times are never invisible.
//!
//! A site's `static` holds only its index; the counts live in per-thread shards written with
//! plain loads and stores, so a call takes no lock and no locked instruction, and a site that
//! was never reached costs four bytes. When a thread ends, its shards are folded into per-site
//! totals of ended threads and freed (about 4 KiB each, the histogram).

use crate::record::{attributed_of_bits, Attributed, Bits, Record, TimingSource};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

pub(crate) mod state;
pub(crate) use state::{bucket_of, quantile_of, SiteStats, BUCKETS};
use state::{Histogram, Shard, Shards};

/// Adds to a counter only its own thread writes: a load and a store, no atomic read-modify-write.
#[inline(always)]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

impl Shard {
    #[inline]
    fn add(&self, record: &Record) {
        self.add_parts(
            record.duration_ns(),
            record.host.duration_ns(),
            record.error,
            record.bytes,
            record.source().bit(),
            record.gpu.as_ref().is_some_and(|g| g.bracketed),
        );
        let how = record.attributed.map_or(0, Attributed::bit);
        if self.attributed.load(Relaxed) & how != how {
            self.attributed.store(self.attributed.load(Relaxed) | how, Relaxed);
        }
        if record.gpu.as_ref().is_some_and(|g| g.bracket_at_exit) && !self.bracket_at_exit.load(Relaxed) {
            self.bracket_at_exit.store(true, Relaxed);
        }
        if let Some((before, after)) = &record.memory {
            let grow = |max: &AtomicI64, b: Option<u64>, a: Option<u64>| {
                if let (Some(b), Some(a)) = (b, a) {
                    let d = a as i64 - b as i64;
                    if d > max.load(Relaxed) {
                        max.store(d, Relaxed);
                    }
                }
            };
            grow(&self.device_delta_max, before.device_used_bytes, after.device_used_bytes);
            grow(&self.rss_delta_max, before.process_rss_bytes, after.process_rss_bytes);
        }
    }

    #[inline]
    fn add_parts(&self, d: u64, host_ns: u64, error: bool, bytes: Option<u64>, source_bit: u8, bracketed: bool) {
        bump(&self.calls, 1);
        if error {
            bump(&self.errors, 1);
        }
        bump(&self.total_ns, d);
        if d < self.min_ns.load(Relaxed) {
            self.min_ns.store(d, Relaxed);
        }
        if d > self.max_ns.load(Relaxed) {
            self.max_ns.store(d, Relaxed);
        }
        bump(&self.host_total_ns, host_ns);
        if let Some(b) = bytes {
            bump(&self.bytes, b);
        }
        let sources = self.sources.load(Relaxed);
        if sources & source_bit == 0 {
            self.sources.store(sources | source_bit, Relaxed);
        }
        if bracketed {
            self.bracketed.store(true, Relaxed);
        }
        let bucket = &self.histogram.buckets[Histogram::index(d)];
        bucket.store(bucket.load(Relaxed).wrapping_add(1), Relaxed);
    }
}

impl Shard {
    /// Adds host-timed calls (duration, bytes; 0 for none) of this shard's site: the counters are
    /// summed in registers and stored once, only the histogram is touched per call.
    /// Returns how many calls it counted.
    #[inline]
    fn add_host_all(&self, calls: impl Iterator<Item = (u64, u64)>) -> usize {
        let (mut n, mut sum, mut min, mut max, mut bytes) = (0u64, 0u64, u64::MAX, 0u64, 0u64);
        for (d, b) in calls {
            n += 1;
            sum = sum.wrapping_add(d);
            min = min.min(d);
            max = max.max(d);
            bytes = bytes.wrapping_add(b);
            // SAFETY: `index` is below `BUCKETS` for every u64 (u64::MAX: 59 * 16 + 31 = 975).
            let bucket = unsafe { self.histogram.buckets.get_unchecked(Histogram::index(d)) };
            bucket.store(bucket.load(Relaxed).wrapping_add(1), Relaxed);
        }
        if n == 0 {
            return 0;
        }
        bump(&self.calls, n);
        bump(&self.total_ns, sum);
        bump(&self.host_total_ns, sum);
        bump(&self.bytes, bytes);
        if min < self.min_ns.load(Relaxed) {
            self.min_ns.store(min, Relaxed);
        }
        if max > self.max_ns.load(Relaxed) {
            self.max_ns.store(max, Relaxed);
        }
        let host = TimingSource::Host.bit();
        let sources = self.sources.load(Relaxed);
        if sources & host == 0 {
            self.sources.store(sources | host, Relaxed);
        }
        n as usize
    }

    /// Adds another shard's counts of the same site to this one. The caller is the only writer
    /// of `self` (it holds the registry's lock).
    fn absorb(&self, other: &Shard) {
        bump(&self.calls, other.calls.load(Relaxed));
        bump(&self.errors, other.errors.load(Relaxed));
        bump(&self.total_ns, other.total_ns.load(Relaxed));
        self.min_ns.store(self.min_ns.load(Relaxed).min(other.min_ns.load(Relaxed)), Relaxed);
        self.max_ns.store(self.max_ns.load(Relaxed).max(other.max_ns.load(Relaxed)), Relaxed);
        bump(&self.host_total_ns, other.host_total_ns.load(Relaxed));
        bump(&self.bytes, other.bytes.load(Relaxed));
        self.sources.store(self.sources.load(Relaxed) | other.sources.load(Relaxed), Relaxed);
        self.attributed.store(self.attributed.load(Relaxed) | other.attributed.load(Relaxed), Relaxed);
        if other.bracketed.load(Relaxed) {
            self.bracketed.store(true, Relaxed);
        }
        let most =
            |mine: &AtomicI64, theirs: &AtomicI64| mine.store(mine.load(Relaxed).max(theirs.load(Relaxed)), Relaxed);
        most(&self.device_delta_max, &other.device_delta_max);
        most(&self.rss_delta_max, &other.rss_delta_max);
        for (mine, theirs) in self.histogram.buckets.iter().zip(&other.histogram.buckets) {
            mine.store(mine.load(Relaxed).wrapping_add(theirs.load(Relaxed)), Relaxed);
        }
    }
}

fn registry() -> std::sync::MutexGuard<'static, Shards> {
    // The registry holds plain counts: a panic elsewhere while it was locked leaves them usable.
    crate::collector::collector().registry.shards.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shards {
    fn retired(&mut self, site: usize) -> &Shard {
        if self.retired.len() <= site {
            self.retired.resize_with(site + 1, || None);
        }
        self.retired[site].get_or_insert_with(|| Box::new(Shard::new(site)))
    }
}

/// A thread's shards, by site index; folded into the registry's retired counts when the thread
/// ends. (The registry's per-site "retired" shard also takes the calls that other threads drain
/// out of a live thread's ring: see `ring.rs`.)
struct Local(UnsafeCell<Vec<Option<Arc<Shard>>>>);

impl Drop for Local {
    fn drop(&mut self) {
        let shards = std::mem::take(self.0.get_mut());
        if shards.iter().all(Option::is_none) {
            return;
        }
        let mut r = registry();
        for shard in shards.into_iter().flatten() {
            if let Some(i) = r.live.iter().position(|s| Arc::ptr_eq(s, &shard)) {
                r.live.swap_remove(i);
            }
            r.retired(shard.site).absorb(&shard);
        }
    }
}

thread_local! {
    /// This thread's shards, by site index. Only [`SiteStats::with_shard`] touches it, and
    /// nothing it runs while holding the reference can reach it again (no re-entry), so the
    /// borrow needs no run-time flag.
    static LOCAL: Local = const { Local(UnsafeCell::new(Vec::new())) };
}

/// Everything known about a site's calls, added up over all threads.
#[derive(Debug, Clone)]
pub(crate) struct Totals {
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub host_total_ns: u64,
    pub bytes: u64,
    pub sources: Vec<TimingSource>,
    /// How the records' GPU work was attributed, where that was a question.
    pub attributed: Option<Attributed>,
    pub bracketed: bool,
    pub bracket_at_exit: bool,
    pub device_delta_max: Option<i64>,
    pub rss_delta_max: Option<i64>,
    buckets: Vec<u64>,
}

impl Totals {
    /// The `q`-quantile, clamped to the exact min and max (bucket midpoints can fall outside).
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        quantile_of(&self.buckets, q).map(|v| v.clamp(self.min_ns, self.max_ns))
    }

    /// The histogram's counts by bucket. Counts only grow, so the difference of two totals'
    /// counts is the histogram of the calls between them (the live feed's window).
    pub(crate) fn buckets(&self) -> &[u64] {
        &self.buckets
    }
}

impl SiteStats {
    #[inline]
    fn index(&self) -> usize {
        match self.index.load(Relaxed) {
            0 => self.assign_index(),
            i => i as usize,
        }
    }

    #[cold]
    fn assign_index(&self) -> usize {
        let fresh = crate::collector::collector().registry.next_site.fetch_add(1, Relaxed);
        match self.index.compare_exchange(0, fresh, Relaxed, Relaxed) {
            Ok(_) => fresh as usize,
            Err(won) => won as usize,
        }
    }

    pub(crate) fn add(&self, record: &Record) {
        self.with_shard(|shard| shard.add(record));
    }

    /// A host-timed call that produced no record (not sampled, no error).
    #[inline]
    pub(crate) fn add_host(&self, duration_ns: u64, bytes: Option<u64>) {
        self.with_shard(|shard| {
            shard.add_parts(duration_ns, duration_ns, false, bytes, TimingSource::Host.bit(), false)
        });
    }

    /// Host-timed calls (duration, bytes; 0 for none) that produced no record, counted together:
    /// a run of this site's calls in the calling thread's ring.
    /// Returns how many it counted.
    pub(crate) fn add_host_all(&self, calls: impl Iterator<Item = (u64, u64)>) -> usize {
        self.with_shard(|shard| shard.add_host_all(calls))
    }

    /// The same, counted on a thread other than the one that made the calls (a reader draining
    /// that thread's ring): into the site's totals of other threads, never into the caller's
    /// shards, which only their own thread writes.
    pub(crate) fn add_host_all_elsewhere(&self, calls: impl Iterator<Item = (u64, u64)>) -> usize {
        let site = self.index();
        registry().retired(site).add_host_all(calls)
    }

    /// Runs `f` on this thread's shard of the site. `f` only updates the shard's counters.
    #[inline]
    fn with_shard<R>(&self, f: impl FnOnce(&Shard) -> R) -> R {
        let site = self.index();
        // SAFETY: the only reference to this thread's table while it lives (see `LOCAL`); the
        // shard pointer stays valid while the table holds its `Arc`, which outlives this call.
        let shard = LOCAL.try_with(|local| {
            unsafe { &*local.0.get() }
                .get(site)
                .and_then(Option::as_deref)
                .map_or(std::ptr::null(), |s| s as *const Shard)
        });
        match shard {
            Ok(shard) => match unsafe { shard.as_ref() } {
                Some(shard) => f(shard),
                None => Self::first_call_on_this_thread(site, f),
            },
            Err(_) => Self::thread_ending(site, f),
        }
    }

    /// Makes this thread's shard of the site (once per thread and site).
    #[cold]
    #[inline(never)]
    fn first_call_on_this_thread<R>(site: usize, f: impl FnOnce(&Shard) -> R) -> R {
        let shard = Arc::new(Shard::new(site));
        let counted = f(&shard);
        let kept = LOCAL.try_with(|local| {
            // SAFETY: as in `with_shard`.
            let local = unsafe { &mut *local.0.get() };
            if local.len() <= site {
                local.resize(site + 1, None);
            }
            local[site] = Some(shard.clone());
        });
        let mut r = registry();
        match kept {
            Ok(()) => r.live.push(shard),
            // The thread's table went away meanwhile: count the call with the ended threads.
            Err(_) => r.retired(site).absorb(&shard),
        }
        counted
    }

    /// A call on a thread whose table is gone (an annotated function called from another
    /// thread-local's destructor): counted straight into the ended threads' shard, under the
    /// registry's lock, instead of touching the destroyed table (which would abort).
    #[cold]
    #[inline(never)]
    fn thread_ending<R>(site: usize, f: impl FnOnce(&Shard) -> R) -> R {
        f(registry().retired(site))
    }

    /// The site's counts over every thread, calls still in threads' rings included.
    pub(crate) fn totals(&self) -> Totals {
        crate::ring::drain_all();
        let site = self.index.load(Relaxed) as usize;
        let mut t = Totals {
            calls: 0,
            errors: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            host_total_ns: 0,
            bytes: 0,
            sources: Vec::new(),
            attributed: None,
            bracketed: false,
            bracket_at_exit: false,
            device_delta_max: None,
            rss_delta_max: None,
            buckets: vec![0; BUCKETS],
        };
        let (mut source_bits, mut attributed_bits) = (0u8, 0u8);
        if site != 0 {
            let r = registry();
            let retired = r.retired.get(site).and_then(Option::as_deref);
            for s in r.live.iter().map(|s| &**s).filter(|s| s.site == site).chain(retired) {
                t.calls += s.calls.load(Relaxed);
                t.errors += s.errors.load(Relaxed);
                t.total_ns += s.total_ns.load(Relaxed);
                t.min_ns = t.min_ns.min(s.min_ns.load(Relaxed));
                t.max_ns = t.max_ns.max(s.max_ns.load(Relaxed));
                t.host_total_ns += s.host_total_ns.load(Relaxed);
                t.bytes += s.bytes.load(Relaxed);
                source_bits |= s.sources.load(Relaxed);
                attributed_bits |= s.attributed.load(Relaxed);
                t.bracketed |= s.bracketed.load(Relaxed);
                t.bracket_at_exit |= s.bracket_at_exit.load(Relaxed);
                let seen = |d: i64| (d != i64::MIN).then_some(d);
                let most = |a: Option<i64>, b: Option<i64>| a.max(b).or(a).or(b);
                t.device_delta_max = most(t.device_delta_max, seen(s.device_delta_max.load(Relaxed)));
                t.rss_delta_max = most(t.rss_delta_max, seen(s.rss_delta_max.load(Relaxed)));
                for (sum, b) in t.buckets.iter_mut().zip(&s.histogram.buckets) {
                    *sum += u64::from(b.load(Relaxed));
                }
            }
        }
        if t.calls == 0 {
            t.min_ns = 0;
        }
        t.sources = TimingSource::ALL.into_iter().filter(|s| source_bits & s.bit() != 0).collect();
        t.attributed = attributed_of_bits(attributed_bits);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::state::SUB;
    use super::*;

    /// The histogram written and read as a distribution, for the quantile tests.
    impl Histogram {
        fn record(&self, v: u64) {
            self.buckets[Self::index(v)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }

        /// The `q`-quantile (0..=1), as the midpoint of the bucket holding it; `None` when empty.
        fn quantile(&self, q: f64) -> Option<u64> {
            let counts: Vec<u64> =
                self.buckets.iter().map(|b| u64::from(b.load(std::sync::atomic::Ordering::Relaxed))).collect();
            quantile_of(&counts, q)
        }
    }
    use proptest::prelude::*;

    #[test]
    fn the_largest_value_has_the_last_bucket() {
        assert_eq!(Histogram::index(u64::MAX), BUCKETS - 1);
        assert_eq!((0..16).map(Histogram::index).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
        assert_eq!(Histogram::index(16), 16);
    }

    proptest! {
        #[test]
        fn every_value_lands_in_a_bucket_that_holds_it(v in any::<u64>()) {
            let (lo, width) = Histogram::bounds(Histogram::index(v));
            prop_assert!(lo <= v && v - lo < width, "v={v} lo={lo} width={width}");
        }

        #[test]
        fn quantiles_are_within_the_bucket_error(mut values in prop::collection::vec(1u64..10_000_000_000, 1..400), q in 0.0f64..=1.0) {
            let h = Histogram::new();
            values.iter().for_each(|v| h.record(*v));
            values.sort_unstable();
            let rank = ((q * values.len() as f64).ceil() as usize).max(1);
            let exact = values[rank - 1] as f64;
            let got = h.quantile(q).unwrap() as f64;
            prop_assert!((got - exact).abs() <= exact / SUB as f64 + 1.0, "q={q} exact={exact} got={got}");
        }
    }

    fn live_shards_of(stats: &SiteStats) -> usize {
        let site = stats.index.load(Relaxed) as usize;
        registry().live.iter().filter(|s| s.site == site).count()
    }

    #[test]
    fn an_ended_thread_leaves_its_counts_and_frees_its_shard() {
        static STATS: SiteStats = SiteStats::new();
        for round in 1..=50u64 {
            std::thread::spawn(|| STATS.add_host(1_000, Some(8))).join().unwrap();
            assert_eq!(STATS.totals().calls, round);
            assert_eq!(live_shards_of(&STATS), 0, "the ended thread's shard was freed");
        }
        let t = STATS.totals();
        assert_eq!((t.calls, t.bytes, t.total_ns, t.min_ns, t.max_ns), (50, 400, 50_000, 1_000, 1_000));
        assert_eq!(t.quantile(0.5), Some(1_000));
    }

    #[test]
    fn a_call_from_a_thread_local_destructor_is_counted_without_aborting() {
        static STATS: SiteStats = SiteStats::new();
        static FALLBACK_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        struct CallsOnDrop;
        impl Drop for CallsOnDrop {
            fn drop(&mut self) {
                // Thread-local destructors run in reverse order of first use: the table, first
                // used after this value, is gone by now.
                FALLBACK_USED.store(LOCAL.try_with(|_| ()).is_err(), Relaxed);
                STATS.add_host(5, None);
            }
        }
        thread_local! {
            static CALLER: CallsOnDrop = const { CallsOnDrop };
        }
        std::thread::spawn(|| {
            CALLER.with(|_| ());
            STATS.add_host(7, None);
        })
        .join()
        .unwrap();
        assert!(FALLBACK_USED.load(Relaxed), "the destructor ran after the shard table's");
        let t = STATS.totals();
        assert_eq!((t.calls, t.total_ns, t.min_ns, t.max_ns), (2, 12, 5, 7));
    }

    #[test]
    fn empty_histogram_has_no_quantile() {
        assert_eq!(Histogram::new().quantile(0.5), None);
    }
}
