//! Causality: a call's GPU work cannot start before the call did. Every GPU interval mapped onto
//! the host clock is checked against that lower bound before the record reaches aggregates or
//! sinks; one that falls before it is shifted forward (the mapping is wrong for that record; the
//! GPU's own durations are kept) and the correction counted per timing source for the trust
//! report. The record keeps the clock error it stated before the check, so that a correction
//! larger than it (a bound that was not one) stays visible: counted, and testable as
//! `clock_corrected_ns > clock_error_ns`. Backends that place records from host facts (wgpu,
//! `wgpu/backend/bounds.rs`) never need this; it is the last resort for those that cannot.

use crate::record::TimingSource;

// Everything only the instrumented build uses: the check and its counters.
#[cfg(feature = "enabled")]
pub(crate) mod imp;

/// What the causality check did for one timing source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trust {
    /// The GPU timing source.
    pub source: TimingSource,
    /// Records whose GPU interval was checked.
    pub checked: u64,
    /// Records whose GPU interval started before their call and was moved to its start.
    pub corrected: u64,
    /// The largest such move, in ns.
    pub worst_ns: u64,
    /// Corrections larger than the clock error the record stated: placements whose bound was
    /// not a bound.
    pub beyond_bound: u64,
    /// Records whose stated clock error is wider than their own GPU time: where they lie is
    /// known less well than how long they took, which the summary says.
    pub loose: u64,
}

impl Trust {
    /// "GPU clock (cupti): 3 of 1204 records placed before their call and corrected, worst
    /// 41.0 µs, 1 beyond its stated bound".
    pub fn line(&self) -> String {
        let worst = if self.corrected > 0 {
            format!(
                ", worst {}, {} beyond its stated bound",
                crate::export::format::duration(self.worst_ns),
                self.beyond_bound
            )
        } else {
            String::new()
        };
        let loose = if self.loose > 0 {
            format!("; {} placed with a clock error wider than their own GPU time", self.loose)
        } else {
            String::new()
        };
        format!(
            "GPU clock ({}): {} of {} records placed before their call and corrected{worst}{loose}",
            self.source.as_str(),
            self.corrected,
            self.checked
        )
    }
}
