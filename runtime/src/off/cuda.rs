//! The CUDA API without the `enabled` feature: the same calls, loading nothing (no driver, no
//! CUPTI), timing nothing.
//!
//! `Timing` and `CudaError` (`cuda/timing.rs`) and the stream traits (`cuda/resources.rs`) are
//! the instrumented build's own files, so that matches and impls compile either way.

use crate::record::DeviceLabel;

#[allow(dead_code, unreachable_pub)]
#[path = "../cuda/resources.rs"]
pub(crate) mod resources;

pub use resources::AsStream;

#[allow(dead_code)] // never produced here
#[path = "../cuda/timing.rs"]
mod timing;

pub use timing::{CudaError, Timing};

/// `Ok` with no devices without the `enabled` feature: gpuspan loads no driver to look.
pub fn probe() -> Result<&'static [DeviceLabel], &'static CudaError> {
    Ok(&[])
}

/// [`Timing::Host`] without the `enabled` feature: CUPTI is not started.
pub fn start() -> Timing {
    Timing::Host
}

/// Always `None` without the `enabled` feature: nothing was started.
#[cfg(feature = "testing")]
pub fn timing() -> Option<Timing> {
    None
}

/// Does nothing without the `enabled` feature.
pub fn attach(_stream: &std::sync::Arc<cudarc::driver::CudaStream>) {}

/// Always `None` without the `enabled` feature: CUPTI never times this process.
#[cfg(feature = "testing")]
pub fn cupti_counts() -> Option<replay::Counts> {
    None
}

/// Always `None` without the `enabled` feature: CUPTI never times this process.
#[cfg(feature = "testing")]
pub fn cupti_clock_offset() -> Option<(i64, u64)> {
    None
}

/// Always 0 without the `enabled` feature: no scope is handed to a resolver.
#[cfg(feature = "testing")]
pub fn cupti_queue_grown() -> u64 {
    0
}

/// Always `false` without the `enabled` feature: CUPTI never times this process.
#[cfg(feature = "testing")]
pub fn cupti_windows_read_realtime() -> bool {
    false
}

/// Does nothing without the `enabled` feature: there is no CUPTI dump.
#[cfg(feature = "testing")]
pub fn dump_note(_text: impl Into<String>) {}

/// CUPTI replay. Without the `enabled` feature only the counts' type, for [`cupti_counts`]; the
/// decoder and the attribution are part of the instrumented build.
#[cfg(feature = "testing")]
pub mod replay {
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
    }
}
