//! Which measured calls become exported spans and timeline events. Decided after the timing is
//! known; aggregates count every call whatever this says.

use crate::record::Record;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, Once};

/// The default threshold: calls shorter than this are only aggregated.
pub(crate) const DEFAULT_THRESHOLD_US: u64 = 100;

static THRESHOLD_NS: AtomicU64 = AtomicU64::new(DEFAULT_THRESHOLD_US * 1000);
static TRACE_ALL: AtomicBool = AtomicBool::new(false);
static FROM_ENV: Once = Once::new();
/// Raw clock ticks below which a call of a site that uses the global threshold is not exported:
/// a host scope that ends sooner is counted without converting its clock or reading the
/// settings. 0 until the settings are read, and whenever a setting exports every call or a sink
/// wants every record (so the caller's test is this one compare).
static FLOOR_TICKS: AtomicU64 = AtomicU64::new(0);
/// Serialises [`update_floor`], so that the last setting changed is the one the floor shows.
static FLOOR_LOCK: Mutex<()> = Mutex::new(());

/// Reads `GPUSPAN_THRESHOLD_US` and `GPUSPAN_TRACE_ALL` once.
pub(crate) fn load_env() {
    FROM_ENV.call_once(|| {
        if let Some(us) = crate::env::threshold_us() {
            THRESHOLD_NS.store(us.saturating_mul(1000), Relaxed);
        }
        if let Some(on) = crate::env::trace_all() {
            TRACE_ALL.store(on, Relaxed);
        }
        update_floor();
    });
}

/// The global threshold in ticks (0 when everything is traced or a sink wants every record).
fn update_floor() {
    let _held = FLOOR_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let every = TRACE_ALL.load(Relaxed) || crate::pipeline::wants_every_call();
    let floor_ns = if every { 0 } else { THRESHOLD_NS.load(Relaxed) };
    FLOOR_TICKS.store(crate::clock::ticks_below_ns(floor_ns), Relaxed);
}

/// A sink that wants every record came or went: the floor follows.
pub(crate) fn refresh_floor() {
    load_env();
    update_floor();
}

/// Whether a call `ticks` long (raw clock) of a site on the global floor (`Site::on_global_floor`,
/// which the caller checks) is too short for any export and no sink wants it: one load and a
/// compare. `false` means "ask [`is_sampled_duration`]".
#[inline(always)]
pub(crate) fn below_floor(ticks: u64) -> bool {
    ticks < FLOOR_TICKS.load(Relaxed)
}

pub(crate) fn set_threshold_us(us: u64) {
    load_env();
    THRESHOLD_NS.store(us.saturating_mul(1000), Relaxed);
    update_floor();
}

pub(crate) fn set_trace_all(on: bool) {
    load_env();
    TRACE_ALL.store(on, Relaxed);
    update_floor();
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

#[cfg(test)]
mod tests {
    use super::{below_floor, load_env, FLOOR_TICKS, THRESHOLD_NS, TRACE_ALL};
    use std::sync::atomic::Ordering::Relaxed;

    #[derive(Debug)]
    struct EveryRecord;
    impl crate::pipeline::Sink for EveryRecord {
        fn accept(&self, _: &crate::record::Record) {}
        fn wants_all(&self) -> bool {
            true
        }
    }

    /// One test, so that no other changes the floor meanwhile.
    #[test]
    fn the_floor_is_the_global_threshold_in_ticks_and_zero_while_a_sink_wants_every_record() {
        load_env();
        let sink: std::sync::Arc<dyn crate::pipeline::Sink> = std::sync::Arc::new(EveryRecord);
        crate::pipeline::add_sink(sink.clone());
        assert_eq!(FLOOR_TICKS.load(Relaxed), 0, "no call is short enough to skip that sink");
        assert!(!below_floor(0));
        crate::pipeline::remove_sink(&sink);
        let every = TRACE_ALL.load(Relaxed) || crate::pipeline::wants_every_call();
        let expected = if every { 0 } else { crate::clock::ticks_below_ns(THRESHOLD_NS.load(Relaxed)) };
        let floor = FLOOR_TICKS.load(Relaxed);
        assert_eq!(floor, expected);
        if floor > 0 {
            assert!(below_floor(floor - 1) && !below_floor(floor));
            assert!(crate::clock::ticks_to_ns(floor - 1) < THRESHOLD_NS.load(Relaxed));
        }
    }
}
