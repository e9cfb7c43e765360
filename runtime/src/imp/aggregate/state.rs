//! What the collector and a site's `static` hold of the aggregates: the histogram, a site's
//! index, the per-thread shards' counters and the registry that finds them. Apart from
//! `aggregate.rs`, which counts into them and reaches the process's collector (the registry, a
//! fresh site index), so that the collector and the sites name a part that imports nothing above
//! them.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex};

/// Sub-buckets per power of two: quantiles are within 1/16 (6.25 %) of the true value.
const SUB_BITS: u32 = 4;
pub(super) const SUB: usize = 1 << SUB_BITS;
pub(crate) const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// The histogram bucket a duration falls into (for counts kept elsewhere: a capture window's).
pub(crate) fn bucket_of(v: u64) -> usize {
    Histogram::index(v)
}

/// A log-linear histogram of nanosecond durations with atomic buckets.
#[derive(Debug)]
pub(crate) struct Histogram {
    pub(super) buckets: [AtomicU32; BUCKETS],
}

impl Histogram {
    pub(crate) const fn new() -> Self {
        Histogram { buckets: [const { AtomicU32::new(0) }; BUCKETS] }
    }

    /// Below `SUB`, the value itself; above, `SUB` buckets per power of two. With `shift` the
    /// bits below the top `SUB_BITS + 1` (0 below `SUB`), `v >> shift` is `SUB + sub-bucket`, so
    /// the index is `shift * SUB + (v >> shift)`: no branch, as the ring's counting wants.
    #[inline(always)]
    pub(super) fn index(v: u64) -> usize {
        let exp = 63 - (v | 1).leading_zeros();
        let shift = exp.saturating_sub(SUB_BITS);
        shift as usize * SUB + (v >> shift) as usize
    }

    /// The smallest value that falls into bucket `i`, and the bucket's width.
    pub(super) fn bounds(i: usize) -> (u64, u64) {
        if i < SUB {
            return (i as u64, 1);
        }
        let exp = (i / SUB) as u32 + SUB_BITS - 1;
        let sub = (i % SUB) as u64;
        let width = 1u64 << (exp - SUB_BITS);
        ((1u64 << exp) + sub * width, width)
    }
}

/// The `q`-quantile of histogram bucket counts, as the midpoint of the bucket holding it.
pub(crate) fn quantile_of(counts: &[u64], q: f64) -> Option<u64> {
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
    pub(super) index: AtomicU32,
}

/// One thread's counts for one site. Written only by its thread; read by anyone.
#[derive(Debug)]
pub(super) struct Shard {
    pub(super) site: usize,
    pub(super) calls: AtomicU64,
    pub(super) errors: AtomicU64,
    /// Sum of the measured durations (GPU time where a GPU source exists, else host time).
    pub(super) total_ns: AtomicU64,
    pub(super) min_ns: AtomicU64,
    pub(super) max_ns: AtomicU64,
    /// Sum of the host-side durations of the calls (encoding, launching, waiting).
    pub(super) host_total_ns: AtomicU64,
    pub(super) bytes: AtomicU64,
    /// Bit set of the `TimingSource`s the durations came from.
    pub(super) sources: AtomicU8,
    /// Bit set of how the records' GPU work was attributed (`Attributed::bit`).
    pub(super) attributed: AtomicU8,
    /// Some durations were brackets around submissions (upper bounds), not exact queries.
    pub(super) bracketed: AtomicBool,
    /// Some of those brackets closed at the function's exit (no submission of the call seen):
    /// they also hold the host work after the last submission.
    pub(super) bracket_at_exit: AtomicBool,
    /// Largest growth of device memory / RSS over one call (`track_memory` sites; i64::MIN: none).
    pub(super) device_delta_max: AtomicI64,
    pub(super) rss_delta_max: AtomicI64,
    pub(super) histogram: Histogram,
}

impl Shard {
    pub(super) fn new(site: usize) -> Self {
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
            attributed: AtomicU8::new(0),
            bracketed: AtomicBool::new(false),
            bracket_at_exit: AtomicBool::new(false),
            device_delta_max: AtomicI64::new(i64::MIN),
            rss_delta_max: AtomicI64::new(i64::MIN),
            histogram: Histogram::new(),
        }
    }
}

/// Site indices and the shards of every site; owned by the
/// [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Registry {
    pub(super) next_site: AtomicU32,
    pub(super) shards: Mutex<Shards>,
}

impl Registry {
    pub(crate) const fn new() -> Self {
        Registry { next_site: AtomicU32::new(1), shards: Mutex::new(Shards { live: Vec::new(), retired: Vec::new() }) }
    }
}

/// Where summaries find the counts: the shards of live threads, and per site one shard holding
/// what threads that ended had counted. A thread's shards are folded into the latter and freed
/// when it exits, so memory stays flat however many threads come and go.
#[derive(Debug)]
pub(super) struct Shards {
    pub(super) live: Vec<Arc<Shard>>,
    /// By site index.
    pub(super) retired: Vec<Option<Box<Shard>>>,
}

impl SiteStats {
    pub(crate) const fn new() -> Self {
        SiteStats { index: AtomicU32::new(0) }
    }
}

impl Default for SiteStats {
    fn default() -> Self {
        Self::new()
    }
}
