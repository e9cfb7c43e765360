//! Per-site aggregates: every call is counted here, sampled or not, so fast kernels called a
//! million times are never invisible.
//!
//! A site's `static` holds only its index; the counts live in per-thread shards written with
//! plain loads and stores, so a call takes no lock and no locked instruction, and a site that
//! was never reached costs four bytes.

use crate::record::{Record, TimingSource};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Sub-buckets per power of two: quantiles are within 1/16 (6.25 %) of the true value.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// A log-linear histogram of nanosecond durations with atomic buckets.
#[derive(Debug)]
pub(crate) struct Histogram {
    buckets: [AtomicU32; BUCKETS],
}

impl Histogram {
    pub(crate) const fn new() -> Self {
        Histogram { buckets: [const { AtomicU32::new(0) }; BUCKETS] }
    }

    fn index(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (exp - SUB_BITS)) as usize & (SUB - 1);
        ((exp - SUB_BITS + 1) as usize) * SUB + sub
    }

    /// The smallest value that falls into bucket `i`, and the bucket's width.
    fn bounds(i: usize) -> (u64, u64) {
        if i < SUB {
            return (i as u64, 1);
        }
        let exp = (i / SUB) as u32 + SUB_BITS - 1;
        let sub = (i % SUB) as u64;
        let width = 1u64 << (exp - SUB_BITS);
        ((1u64 << exp) + sub * width, width)
    }

    #[cfg(test)]
    pub(crate) fn record(&self, v: u64) {
        self.buckets[Self::index(v)].fetch_add(1, Relaxed);
    }

    /// The `q`-quantile (0..=1), as the midpoint of the bucket holding it; `None` when empty.
    #[cfg(test)]
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| u64::from(b.load(Relaxed))).collect();
        quantile_of(&counts, q)
    }
}

/// The `q`-quantile of histogram bucket counts, as the midpoint of the bucket holding it.
fn quantile_of(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (lo, width) = Histogram::bounds(i);
            return Some(lo + width / 2);
        }
    }
    None
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// The aggregates of one site, as its `static` holds them: only a dense index, assigned on the
/// first call. The counts live in per-thread shards, so that a call updates memory no other
/// thread writes (plain loads and stores, no locked instructions, no shared cache lines); a
/// summary adds the shards up.
#[derive(Debug)]
pub(crate) struct SiteStats {
    index: AtomicU32,
}

/// One thread's counts for one site. Written only by its thread; read by anyone.
#[derive(Debug)]
struct Shard {
    site: usize,
    calls: AtomicU64,
    errors: AtomicU64,
    /// Sum of the measured durations (GPU time where a GPU source exists, else host time).
    total_ns: AtomicU64,
    min_ns: AtomicU64,
    max_ns: AtomicU64,
    /// Sum of the host-side durations of the calls (encoding, launching, waiting).
    host_total_ns: AtomicU64,
    bytes: AtomicU64,
    /// Bit set of the `TimingSource`s the durations came from.
    sources: AtomicU8,
    /// Some durations were brackets around submissions (upper bounds), not exact queries.
    bracketed: AtomicBool,
    /// Largest growth of device memory / RSS over one call (`track_memory` sites; i64::MIN: none).
    device_delta_max: AtomicI64,
    rss_delta_max: AtomicI64,
    histogram: Histogram,
}

/// Adds to a counter only its own thread writes: a load and a store, no atomic read-modify-write.
#[inline(always)]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

impl Shard {
    fn new(site: usize) -> Self {
        Shard {
            site,
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
            host_total_ns: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            sources: AtomicU8::new(0),
            bracketed: AtomicBool::new(false),
            device_delta_max: AtomicI64::new(i64::MIN),
            rss_delta_max: AtomicI64::new(i64::MIN),
            histogram: Histogram::new(),
        }
    }

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

static NEXT_SITE: AtomicU32 = AtomicU32::new(1);
/// Every shard ever made, for summaries; shards outlive their threads.
static SHARDS: Mutex<Vec<Arc<Shard>>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's shards, by site index. Only [`SiteStats::with_shard`] touches it, and
    /// nothing it runs while holding the reference can reach it again (no re-entry), so the
    /// borrow needs no run-time flag.
    static LOCAL: UnsafeCell<Vec<Option<Arc<Shard>>>> = const { UnsafeCell::new(Vec::new()) };
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
    pub bracketed: bool,
    pub device_delta_max: Option<i64>,
    pub rss_delta_max: Option<i64>,
    buckets: Vec<u64>,
}

impl Totals {
    /// The `q`-quantile, clamped to the exact min and max (bucket midpoints can fall outside).
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        quantile_of(&self.buckets, q).map(|v| v.clamp(self.min_ns, self.max_ns))
    }
}

impl SiteStats {
    pub(crate) const fn new() -> Self {
        SiteStats { index: AtomicU32::new(0) }
    }

    #[inline]
    fn index(&self) -> usize {
        match self.index.load(Relaxed) {
            0 => self.assign_index(),
            i => i as usize,
        }
    }

    #[cold]
    fn assign_index(&self) -> usize {
        let fresh = NEXT_SITE.fetch_add(1, Relaxed);
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

    /// Runs `f` on this thread's shard of the site. `f` only updates the shard's counters.
    #[inline]
    fn with_shard(&self, f: impl FnOnce(&Shard)) {
        let site = self.index();
        // SAFETY: the only reference to this thread's table while it lives (see `LOCAL`); the
        // shard pointer stays valid while the table holds its `Arc`, which outlives this call.
        let shard = LOCAL.with(|local| {
            unsafe { &*local.get() }
                .get(site)
                .and_then(Option::as_deref)
                .map_or(std::ptr::null(), |s| s as *const Shard)
        });
        match unsafe { shard.as_ref() } {
            Some(shard) => f(shard),
            None => Self::first_call_on_this_thread(site, f),
        }
    }

    /// Makes this thread's shard of the site (once per thread and site).
    #[cold]
    #[inline(never)]
    fn first_call_on_this_thread(site: usize, f: impl FnOnce(&Shard)) {
        let shard = Arc::new(Shard::new(site));
        f(&shard);
        LOCAL.with(|local| {
            // SAFETY: as in `with_shard`.
            let local = unsafe { &mut *local.get() };
            if local.len() <= site {
                local.resize(site + 1, None);
            }
            local[site] = Some(shard.clone());
        });
        if let Ok(mut all) = SHARDS.lock() {
            all.push(shard);
        }
    }

    /// The site's counts over every thread.
    pub(crate) fn totals(&self) -> Totals {
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
            bracketed: false,
            device_delta_max: None,
            rss_delta_max: None,
            buckets: vec![0; BUCKETS],
        };
        let mut source_bits = 0u8;
        if site != 0 {
            let shards = SHARDS.lock().map(|s| s.clone()).unwrap_or_default();
            for s in shards.iter().filter(|s| s.site == site) {
                t.calls += s.calls.load(Relaxed);
                t.errors += s.errors.load(Relaxed);
                t.total_ns += s.total_ns.load(Relaxed);
                t.min_ns = t.min_ns.min(s.min_ns.load(Relaxed));
                t.max_ns = t.max_ns.max(s.max_ns.load(Relaxed));
                t.host_total_ns += s.host_total_ns.load(Relaxed);
                t.bytes += s.bytes.load(Relaxed);
                source_bits |= s.sources.load(Relaxed);
                t.bracketed |= s.bracketed.load(Relaxed);
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
        t
    }
}

impl Default for SiteStats {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    #[test]
    fn empty_histogram_has_no_quantile() {
        assert_eq!(Histogram::new().quantile(0.5), None);
    }
}
