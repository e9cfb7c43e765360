//! Which measured calls become exported spans and timeline events. Decided after the timing is
//! known; aggregates count every call whatever this says. The settings are the collector's
//! part (`sampling/state.rs`); these are the process's entry points to them.

use crate::collector::collector;

pub(crate) mod state;
pub(crate) use state::DEFAULT_THRESHOLD_US;

/// Whether a call `ticks` long (raw clock) of a site on the global floor (`Site::on_global_floor`,
/// which the caller checks) is too short for any export and no sink wants it: one load and a
/// compare. `false` means "ask [`state::Settings::is_sampled_duration`]".
#[inline(always)]
pub(crate) fn below_floor(ticks: u64) -> bool {
    collector().sampling.below_floor(ticks)
}

/// The threshold in force for a site, in nanoseconds.
pub(crate) fn threshold_ns(site: &crate::Site) -> u64 {
    collector().sampling.threshold_ns(site)
}

/// The global threshold (µs) and trace-all in force: the run's settings (`settings.rs`), else
/// the defaults. What a capture's header states.
pub(crate) fn in_force() -> (u64, bool) {
    collector().sampling.in_force()
}
