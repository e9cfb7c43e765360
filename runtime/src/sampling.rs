//! Which measured calls become exported spans and timeline events. Decided after the timing is
//! known; aggregates count every call whatever this says.

use crate::record::Record;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Once;

/// The default threshold: calls shorter than this are only aggregated.
pub(crate) const DEFAULT_THRESHOLD_US: u64 = 100;

static THRESHOLD_NS: AtomicU64 = AtomicU64::new(DEFAULT_THRESHOLD_US * 1000);
static TRACE_ALL: AtomicBool = AtomicBool::new(false);
static FROM_ENV: Once = Once::new();

/// Reads `GPUSPAN_THRESHOLD_US` and `GPUSPAN_TRACE_ALL` once.
pub(crate) fn load_env() {
    FROM_ENV.call_once(|| {
        if let Some(us) = crate::env::threshold_us() {
            THRESHOLD_NS.store(us.saturating_mul(1000), Relaxed);
        }
        if let Some(on) = crate::env::trace_all() {
            TRACE_ALL.store(on, Relaxed);
        }
    });
}

pub(crate) fn set_threshold_us(us: u64) {
    load_env();
    THRESHOLD_NS.store(us.saturating_mul(1000), Relaxed);
}

pub(crate) fn set_trace_all(on: bool) {
    load_env();
    TRACE_ALL.store(on, Relaxed);
}

/// The threshold in force for a site, in nanoseconds.
pub(crate) fn threshold_ns(site: &crate::Site) -> u64 {
    site.desc.threshold_us.map_or_else(|| THRESHOLD_NS.load(Relaxed), |us| us.saturating_mul(1000))
}

/// Whether a record is exported as a span / timeline event.
pub(crate) fn is_sampled(record: &Record) -> bool {
    is_sampled_duration(record.site, record.duration_ns())
}

/// Whether a call of `site` lasting `duration_ns` is exported.
#[inline]
pub(crate) fn is_sampled_duration(site: &crate::Site, duration_ns: u64) -> bool {
    load_env();
    TRACE_ALL.load(Relaxed) || site.desc.trace_all || duration_ns >= threshold_ns(site)
}
