//! The check itself and its counts (the instrumented build's part of [`super`]).

use super::Trust;
use crate::record::Record;
use crate::record::TimingSource;
use std::sync::atomic::{AtomicU64, Ordering};

/// Checks and corrections of one timing source.
#[derive(Debug)]
struct Counters {
    checked: AtomicU64,
    corrected: AtomicU64,
    worst_ns: AtomicU64,
    beyond_bound: AtomicU64,
    loose: AtomicU64,
}

impl Counters {
    const fn new() -> Self {
        Counters {
            checked: AtomicU64::new(0),
            corrected: AtomicU64::new(0),
            worst_ns: AtomicU64::new(0),
            beyond_bound: AtomicU64::new(0),
            loose: AtomicU64::new(0),
        }
    }
}

/// The checks' counts, by [`TimingSource`] discriminant (the host source is never checked);
/// owned by the [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Checks([Counters; TimingSource::ALL.len()]);

impl Checks {
    pub(crate) const fn new() -> Self {
        Checks([const { Counters::new() }; TimingSource::ALL.len()])
    }
}

impl Checks {
    /// The trust report: one entry per GPU timing source that produced records.
    pub(crate) fn report(&self) -> Vec<Trust> {
        TimingSource::ALL
            .into_iter()
            .filter(|s| *s != TimingSource::Host)
            .map(|source| {
                let c = &self.0[source as usize];
                Trust {
                    source,
                    checked: c.checked.load(Ordering::Relaxed),
                    corrected: c.corrected.load(Ordering::Relaxed),
                    worst_ns: c.worst_ns.load(Ordering::Relaxed),
                    beyond_bound: c.beyond_bound.load(Ordering::Relaxed),
                    loose: c.loose.load(Ordering::Relaxed),
                }
            })
            .filter(|t| t.checked > 0)
            .collect()
    }

    /// Enforces the lower bound on `record`'s GPU work: the start of its call.
    pub(crate) fn enforce(&self, record: &mut Record) {
        let lower = record.host.start_ns;
        let Some(gpu) = record.gpu.as_mut() else { return };
        let c = &self.0[gpu.source as usize];
        c.checked.fetch_add(1, Ordering::Relaxed);
        if gpu.clock_error_ns > gpu.interval.duration_ns() {
            c.loose.fetch_add(1, Ordering::Relaxed);
        }
        let earliest = record.activities.iter().map(|a| a.interval.start_ns).fold(gpu.interval.start_ns, u64::min);
        if earliest >= lower {
            return;
        }
        let shift = lower - earliest;
        gpu.interval.start_ns += shift;
        gpu.interval.end_ns += shift;
        for a in &mut record.activities {
            a.interval.start_ns += shift;
            a.interval.end_ns += shift;
        }
        // The stated error stays what the mapping claimed: a shift beyond it is the violation the
        // trust report and the tests look for.
        if shift > gpu.clock_error_ns {
            c.beyond_bound.fetch_add(1, Ordering::Relaxed);
        }
        record.clock_corrected_ns = shift;
        c.corrected.fetch_add(1, Ordering::Relaxed);
        c.worst_ns.fetch_max(shift, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Activity, ActivityKind, GpuTiming, Interval, KernelGeometry};
    use crate::site::{Backend, Site, SiteKind};

    static SITE: Site = Site::new(crate::site::site_desc!("causality", SiteKind::Kernel, Backend::Cuda));

    fn record(host_start: u64, gpu_start: u64, error_ns: u64) -> Record {
        let mut r = Record::new(&SITE, 1, 1, Interval { start_ns: host_start, end_ns: host_start + 1_000 });
        r.gpu = Some(GpuTiming {
            interval: Interval { start_ns: gpu_start, end_ns: gpu_start + 500 },
            busy_ns: 400,
            source: TimingSource::CudaEvent,
            clock_error_ns: error_ns,
            bracketed: false,
            bracket_at_exit: false,
            device: None,
        });
        r.activities.push(Activity {
            name: "k".into(),
            interval: Interval { start_ns: gpu_start + 50, end_ns: gpu_start + 450 },
            kind: ActivityKind::Kernel(KernelGeometry::default()),
            stream: None,
            device: None,
            src_device: None,
            dst_device: None,
        });
        r
    }

    #[test]
    fn work_placed_before_its_call_is_moved_to_its_start_keeping_durations() {
        let checks = Checks::new();
        let mut r = record(10_000, 9_800, 75);
        checks.enforce(&mut r);
        let gpu = r.gpu.as_ref().expect("gpu");
        assert_eq!(gpu.interval, Interval { start_ns: 10_000, end_ns: 10_500 });
        assert_eq!(r.activities[0].interval, Interval { start_ns: 10_050, end_ns: 10_450 });
        assert_eq!((gpu.busy_ns, r.clock_corrected_ns), (400, 200));
        assert_eq!(gpu.clock_error_ns, 75, "the record keeps the bound it stated");
        assert!(r.clock_corrected_ns > gpu.clock_error_ns, "which the correction shows was no bound");

        let mut fine = record(10_000, 10_000, 75);
        checks.enforce(&mut fine);
        assert_eq!(fine.gpu.as_ref().map(|g| (g.interval.start_ns, g.clock_error_ns)), Some((10_000, 75)));
        assert_eq!(fine.clock_corrected_ns, 0);

        let [after] = checks.report()[..] else { panic!("one source: {:?}", checks.report()) };
        assert_eq!(after.source, TimingSource::CudaEvent);
        assert_eq!((after.checked, after.corrected, after.worst_ns, after.beyond_bound), (2, 1, 200, 1), "{after:?}");
        assert!(after.line().contains("corrected, worst"), "{}", after.line());
    }

    #[test]
    fn a_clock_error_wider_than_the_work_is_counted_and_said() {
        let checks = Checks::new();
        let mut tight = record(10_000, 10_100, 499);
        checks.enforce(&mut tight);
        let mut loose = record(10_000, 10_100, 501);
        checks.enforce(&mut loose);
        let [after] = checks.report()[..] else { panic!("one source: {:?}", checks.report()) };
        assert_eq!((after.checked, after.loose), (2, 1), "a 501 ns bound on 500 ns of work: {after:?}");
        assert!(after.line().contains("placed with a clock error wider than their own GPU time"), "{}", after.line());
    }

    #[test]
    fn host_records_are_not_checked() {
        let checks = Checks::new();
        let mut r = Record::new(&SITE, 2, 1, Interval { start_ns: 5, end_ns: 9 });
        checks.enforce(&mut r);
        assert_eq!(r.clock_corrected_ns, 0);
        assert!(checks.report().is_empty(), "nothing checked");
    }
}
