//! Per-site aggregates: every call is counted here, sampled or not, so fast kernels called a
//! million times are never invisible.
//!
//! Everything is a relaxed atomic living inside the site's `static`, so updating needs no lock
//! and no allocation, and the aggregates of a site that was never reached cost only zeroed memory.

use crate::record::{Record, TimingSource};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

/// Sub-buckets per power of two: quantiles are within 1/16 (6.25 %) of the true value.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// A log-linear histogram of nanosecond durations with atomic buckets.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU32; BUCKETS],
}

impl Histogram {
    pub const fn new() -> Self {
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

    pub fn record(&self, v: u64) {
        self.buckets[Self::index(v)].fetch_add(1, Relaxed);
    }

    /// The `q`-quantile (0..=1), as the midpoint of the bucket holding it; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| u64::from(b.load(Relaxed))).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = Self::bounds(i);
                return Some(lo + width / 2);
            }
        }
        None
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// What is known about every call of one site.
#[derive(Debug)]
pub struct SiteStats {
    pub(crate) calls: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// Sum of the measured durations (GPU time where a GPU source exists, else host time).
    pub(crate) total_ns: AtomicU64,
    pub(crate) min_ns: AtomicU64,
    pub(crate) max_ns: AtomicU64,
    /// Sum of the host-side durations of the calls (encoding, launching, waiting).
    pub(crate) host_total_ns: AtomicU64,
    pub(crate) bytes: AtomicU64,
    /// Bit set of the `TimingSource`s the site's durations came from.
    pub(crate) sources: AtomicU8,
    /// Some durations were brackets around submissions (upper bounds), not exact queries.
    pub(crate) bracketed: AtomicBool,
    pub(crate) histogram: Histogram,
}

impl SiteStats {
    pub const fn new() -> Self {
        SiteStats {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
            host_total_ns: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            sources: AtomicU8::new(0),
            bracketed: AtomicBool::new(false),
            histogram: Histogram::new(),
        }
    }

    pub(crate) fn add(&self, record: &Record) {
        let d = record.duration_ns();
        self.calls.fetch_add(1, Relaxed);
        if record.error {
            self.errors.fetch_add(1, Relaxed);
        }
        self.total_ns.fetch_add(d, Relaxed);
        self.min_ns.fetch_min(d, Relaxed);
        self.max_ns.fetch_max(d, Relaxed);
        self.host_total_ns.fetch_add(record.host.duration_ns(), Relaxed);
        if let Some(b) = record.bytes {
            self.bytes.fetch_add(b, Relaxed);
        }
        self.sources.fetch_or(record.source().bit(), Relaxed);
        if record.gpu.as_ref().is_some_and(|g| g.bracketed) {
            self.bracketed.store(true, Relaxed);
        }
        self.histogram.record(d);
    }

    pub(crate) fn sources(&self) -> Vec<TimingSource> {
        let bits = self.sources.load(Relaxed);
        TimingSource::ALL.into_iter().filter(|s| bits & s.bit() != 0).collect()
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
