//! What CUPTI attribution did: plain data, compiled without the `enabled` feature too, so that
//! `cupti_counts` has its type there (always `None` then).

/// Counts of what a resolver did, for tests and the GPU report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// Scopes handed on with their activities.
    pub scopes_resolved: u64,
    /// Activities no scope claimed: recorded under the `unattributed` site.
    pub unattributed_activities: u64,
    /// Scopes resolved with what they had once their records stopped coming.
    pub stale_scopes: u64,
    /// Activities without valid timestamps (incomplete records from a forced flush).
    pub invalid_activities: u64,
    /// Scopes attributed by their thread's time window (synchronous scopes).
    pub window_scopes: u64,
    /// Scopes decided at a flush's deadline before all their records had come.
    pub deadline_scopes: u64,
    /// Calls made outside every scope that went to the one selected span entered then (by time).
    pub calls_by_time: u64,
    /// Activities launched outside every scope while several unrelated selected spans were
    /// entered: recorded under `during several spans`.
    pub during_several_activities: u64,
    /// Calls found a selected span's by time after its record was handed on: unattributed.
    pub late_by_time: u64,
    /// Windows of a selected span's entries that came after its record was handed on: their
    /// calls go by time (decision 71).
    pub late_span_windows: u64,
}
