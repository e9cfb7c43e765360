//! The sampling settings themselves, as one collector holds them. Apart from `sampling.rs`,
//! whose functions reach the process's collector, so that the collector names a part that
//! imports nothing above it (decision 66). The values are what the run's settings say
//! (`settings.rs` resolves them once, decision 70), else the defaults.

use crate::pipeline::Sinks;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// The default threshold: calls shorter than this are only aggregated.
pub(crate) const DEFAULT_THRESHOLD_US: u64 = 100;

/// The sampling settings and the floor they make; owned by the
/// [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Settings {
    threshold_ns: AtomicU64,
    trace_all: AtomicBool,
    /// Whether the run's settings were resolved: until then the floor is 0, so that no call is
    /// skipped by a default the settings may lower.
    settled: AtomicBool,
    /// Raw clock ticks below which a call of a site that uses the global threshold is not
    /// exported: a host scope that ends sooner is counted without converting its clock or
    /// reading the settings. 0 until the settings are resolved, and whenever a setting exports every
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
            settled: AtomicBool::new(false),
            floor_ticks: AtomicU64::new(0),
            floor_lock: Mutex::new(()),
        }
    }

    /// The global threshold in ticks (0 when everything is traced, a sink wants every record,
    /// or the settings are not resolved yet).
    fn update_floor(&self, sinks: &Sinks) {
        let _held = self.floor_lock.lock().unwrap_or_else(|e| e.into_inner());
        let every = !self.settled.load(Relaxed) || self.trace_all.load(Relaxed) || sinks.wants_every_call();
        let floor_ns = if every { 0 } else { self.threshold_ns.load(Relaxed) };
        self.floor_ticks.store(crate::clock::ticks_below_ns(floor_ns), Relaxed);
    }

    /// A sink that wants every record came or went: the floor follows.
    pub(crate) fn refresh_floor(&self, sinks: &Sinks) {
        self.update_floor(sinks);
    }

    /// See [`crate::sampling::below_floor`].
    #[inline(always)]
    pub(crate) fn below_floor(&self, ticks: u64) -> bool {
        ticks < self.floor_ticks.load(Relaxed)
    }

    /// The run's settings, resolved (`settings.rs`): each one given replaces the default, and
    /// the floor is made from them (it stays 0 until then).
    pub(crate) fn settle(&self, threshold_us: Option<u64>, trace_all: Option<bool>, sinks: &Sinks) {
        if let Some(us) = threshold_us {
            self.threshold_ns.store(us.saturating_mul(1000), Relaxed);
        }
        if let Some(on) = trace_all {
            self.trace_all.store(on, Relaxed);
        }
        self.settled.store(true, Relaxed);
        self.update_floor(sinks);
    }

    /// The global threshold (µs) and trace-all in force.
    pub(crate) fn in_force(&self) -> (u64, bool) {
        (self.threshold_ns.load(Relaxed) / 1000, self.trace_all.load(Relaxed))
    }

    /// The threshold in force for a site, in nanoseconds.
    pub(crate) fn threshold_ns(&self, site: &crate::Site) -> u64 {
        site.desc.threshold_us.map_or_else(|| self.threshold_ns.load(Relaxed), |us| us.saturating_mul(1000))
    }

    /// Whether a call of `site` lasting `duration_ns` is exported.
    #[inline]
    pub(crate) fn is_sampled_duration(&self, site: &crate::Site, duration_ns: u64) -> bool {
        self.trace_all.load(Relaxed) || site.desc.trace_all || duration_ns >= self.threshold_ns(site)
    }
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
        let sink: std::sync::Arc<dyn crate::pipeline::Sink> = std::sync::Arc::new(EveryRecord);
        c.add_sink(sink.clone());
        c.remove_sink(&sink);
        assert_eq!(
            c.sampling.floor_ticks.load(Relaxed),
            0,
            "no floor from the defaults before the settings are resolved"
        );
        c.sampling.settle(Some(100), Some(false), &c.sinks);
        c.add_sink(sink.clone());
        assert_eq!(c.sampling.floor_ticks.load(Relaxed), 0, "no call is short enough to skip that sink");
        assert!(!c.sampling.below_floor(0));
        c.remove_sink(&sink);
        let floor = c.sampling.floor_ticks.load(Relaxed);
        assert_eq!(floor, crate::clock::ticks_below_ns(100_000));
        assert!(floor > 0, "a 100 us threshold is some ticks");
        assert!(c.sampling.below_floor(floor - 1) && !c.sampling.below_floor(floor));
        assert!(crate::clock::ticks_to_ns(floor - 1) < 100_000);
        c.sampling.settle(None, Some(true), &c.sinks);
        assert_eq!(c.sampling.floor_ticks.load(Relaxed), 0, "every call is exported");
    }
}
