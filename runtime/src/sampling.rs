//! Which measured calls become exported spans and timeline events. Decided after the timing is
//! known; aggregates count every call whatever this says.

use crate::collector::collector;
use crate::pipeline::Sinks;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, Once};

use crate::env::DEFAULT_THRESHOLD_US;

/// The sampling settings and the floor they make; owned by the
/// [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Settings {
    threshold_ns: AtomicU64,
    trace_all: AtomicBool,
    from_env: Once,
    /// Raw clock ticks below which a call of a site that uses the global threshold is not
    /// exported: a host scope that ends sooner is counted without converting its clock or
    /// reading the settings. 0 until the settings are read, and whenever a setting exports every
    /// call or a sink wants every record (so the caller's test is this one compare).
    floor_ticks: AtomicU64,
    /// Serialises [`Settings::update_floor`], so that the last setting changed is the one the
    /// floor shows.
    floor_lock: Mutex<()>,
}

impl Settings {
    pub(crate) const fn new() -> Self {
        Settings {
            threshold_ns: AtomicU64::new(DEFAULT_THRESHOLD_US * 1000),
            trace_all: AtomicBool::new(false),
            from_env: Once::new(),
            floor_ticks: AtomicU64::new(0),
            floor_lock: Mutex::new(()),
        }
    }

    /// Reads `GPUSPAN_THRESHOLD_US` and `GPUSPAN_TRACE_ALL` once.
    pub(crate) fn load_env(&self, sinks: &Sinks) {
        self.from_env.call_once(|| {
            if let Some(us) = crate::env::threshold_us() {
                self.threshold_ns.store(us.saturating_mul(1000), Relaxed);
            }
            if let Some(on) = crate::env::trace_all() {
                self.trace_all.store(on, Relaxed);
            }
            self.update_floor(sinks);
        });
    }

    /// The global threshold in ticks (0 when everything is traced or a sink wants every record).
    fn update_floor(&self, sinks: &Sinks) {
        let _held = self.floor_lock.lock().unwrap_or_else(|e| e.into_inner());
        let every = self.trace_all.load(Relaxed) || sinks.wants_every_call();
        let floor_ns = if every { 0 } else { self.threshold_ns.load(Relaxed) };
        self.floor_ticks.store(crate::clock::ticks_below_ns(floor_ns), Relaxed);
    }

    /// A sink that wants every record came or went: the floor follows.
    pub(crate) fn refresh_floor(&self, sinks: &Sinks) {
        self.load_env(sinks);
        self.update_floor(sinks);
    }

    /// See [`below_floor`].
    #[inline(always)]
    pub(crate) fn below_floor(&self, ticks: u64) -> bool {
        ticks < self.floor_ticks.load(Relaxed)
    }

    pub(crate) fn set_threshold_us(&self, us: u64, sinks: &Sinks) {
        self.load_env(sinks);
        self.threshold_ns.store(us.saturating_mul(1000), Relaxed);
        self.update_floor(sinks);
    }

    pub(crate) fn set_trace_all(&self, on: bool, sinks: &Sinks) {
        self.load_env(sinks);
        self.trace_all.store(on, Relaxed);
        self.update_floor(sinks);
    }

    /// The threshold in force for a site, in nanoseconds.
    pub(crate) fn threshold_ns(&self, site: &crate::Site) -> u64 {
        site.desc.threshold_us.map_or_else(|| self.threshold_ns.load(Relaxed), |us| us.saturating_mul(1000))
    }

    /// Whether a call of `site` lasting `duration_ns` is exported.
    #[inline]
    pub(crate) fn is_sampled_duration(&self, site: &crate::Site, duration_ns: u64, sinks: &Sinks) -> bool {
        self.load_env(sinks);
        self.trace_all.load(Relaxed) || site.desc.trace_all || duration_ns >= self.threshold_ns(site)
    }
}

/// Reads `GPUSPAN_THRESHOLD_US` and `GPUSPAN_TRACE_ALL` once.
pub(crate) fn load_env() {
    let c = collector();
    c.sampling.load_env(&c.sinks);
}

/// Whether a call `ticks` long (raw clock) of a site on the global floor (`Site::on_global_floor`,
/// which the caller checks) is too short for any export and no sink wants it: one load and a
/// compare. `false` means "ask [`Settings::is_sampled_duration`]".
#[inline(always)]
pub(crate) fn below_floor(ticks: u64) -> bool {
    collector().sampling.below_floor(ticks)
}

pub(crate) fn set_threshold_us(us: u64) {
    let c = collector();
    c.sampling.set_threshold_us(us, &c.sinks);
}

pub(crate) fn set_trace_all(on: bool) {
    let c = collector();
    c.sampling.set_trace_all(on, &c.sinks);
}

/// The threshold in force for a site, in nanoseconds.
pub(crate) fn threshold_ns(site: &crate::Site) -> u64 {
    collector().sampling.threshold_ns(site)
}

/// The global threshold (µs) and trace-all in force: what `init` set, else the environment's
/// (read here once), else the defaults. What a capture's header states.
pub(crate) fn in_force() -> (u64, bool) {
    let c = collector();
    c.sampling.load_env(&c.sinks);
    (c.sampling.threshold_ns.load(Relaxed) / 1000, c.sampling.trace_all.load(Relaxed))
}

#[cfg(test)]
mod tests {
    use crate::collector::Collector;
    use std::sync::atomic::Ordering::Relaxed;

    #[derive(Debug)]
    struct EveryRecord;
    impl crate::pipeline::Sink for EveryRecord {
        fn accept(&self, _: &crate::record::Record) {}
        fn wants_all(&self) -> bool {
            true
        }
    }

    #[test]
    fn the_floor_is_the_global_threshold_in_ticks_and_zero_while_a_sink_wants_every_record() {
        let c = Collector::new();
        c.sampling.set_trace_all(false, &c.sinks);
        c.sampling.set_threshold_us(100, &c.sinks);
        let sink: std::sync::Arc<dyn crate::pipeline::Sink> = std::sync::Arc::new(EveryRecord);
        c.add_sink(sink.clone());
        assert_eq!(c.sampling.floor_ticks.load(Relaxed), 0, "no call is short enough to skip that sink");
        assert!(!c.sampling.below_floor(0));
        c.remove_sink(&sink);
        let floor = c.sampling.floor_ticks.load(Relaxed);
        assert_eq!(floor, crate::clock::ticks_below_ns(100_000));
        assert!(floor > 0, "a 100 us threshold is some ticks");
        assert!(c.sampling.below_floor(floor - 1) && !c.sampling.below_floor(floor));
        assert!(crate::clock::ticks_to_ns(floor - 1) < 100_000);
        c.sampling.set_trace_all(true, &c.sinks);
        assert_eq!(c.sampling.floor_ticks.load(Relaxed), 0, "every call is exported");
    }
}
