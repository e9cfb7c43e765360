//! The CUDA API without the `enabled` feature: the same calls, loading nothing (no driver, no
//! CUPTI), timing nothing.
//!
//! `Timing` and `CudaError` repeat the instrumented module's (`cuda/mod.rs`) so that matches on
//! them compile either way; keep the two in step (or move both into a file shared by the two
//! builds, as `resources.rs` is).

use crate::record::DeviceLabel;

#[allow(dead_code)]
#[path = "../cuda/resources.rs"]
pub(crate) mod resources;

pub use resources::AsStream;

/// What times CUDA sites in this process: [`Timing::Host`] without the `enabled` feature, where
/// nothing is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// CUPTI activity records: every kernel, copy and set inside the call, with GPU timestamps.
    Cupti,
    /// CUDA events around the call on its stream.
    CudaEvent,
    /// No usable CUDA device: the host clock.
    Host,
}

/// Why a better timing source is not used. Never produced without the `enabled` feature.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver found: CUDA sites are timed on the host")]
    NoDriver,
    #[error("no CUDA device found ({0}): CUDA sites are timed on the host")]
    NoDevice(String),
    #[error("CUPTI (libcupti) not found: CUDA sites are timed with CUDA events on their stream")]
    NoCupti,
    #[error("{path} has no `{symbol}` (CUPTI older than CUDA 12.5): CUDA sites are timed with CUDA events")]
    CuptiTooOld { path: String, symbol: &'static str },
    #[error("CUPTI refused `{call}`: {message}; CUDA sites are timed with CUDA events")]
    Cupti { call: &'static str, message: String },
    #[error("GPUSPAN_CUPTI=off: CUDA sites are timed with CUDA events on their stream")]
    CuptiOff,
    #[error("could not start gpuspan's CUPTI thread ({0}): CUDA sites are timed with CUDA events")]
    Thread(String),
}

/// `Ok` with no devices without the `enabled` feature: gpuspan loads no driver to look.
pub fn probe() -> Result<&'static [DeviceLabel], &'static CudaError> {
    Ok(&[])
}

/// [`Timing::Host`] without the `enabled` feature: CUPTI is not started.
pub fn start() -> Timing {
    Timing::Host
}

/// Always `None` without the `enabled` feature: nothing was started.
pub fn timing() -> Option<Timing> {
    None
}

/// Does nothing without the `enabled` feature.
pub fn attach(_stream: &std::sync::Arc<cudarc::driver::CudaStream>) {}

/// Always `None` without the `enabled` feature: CUPTI never times this process.
pub fn cupti_counts() -> Option<resolve::Counts> {
    None
}

/// Always `None` without the `enabled` feature: CUPTI never times this process.
pub fn cupti_clock_offset() -> Option<(i64, u64)> {
    None
}

/// Does nothing without the `enabled` feature: there is no CUPTI dump.
pub fn dump_note(_text: impl Into<String>) {}

/// CUPTI attribution. Without the `enabled` feature only the counts' type, for
/// [`cupti_counts`]; the replay machinery is part of the instrumented build.
pub mod resolve {
    /// Counts of what a resolver did, for tests and the GPU report.
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    pub struct Counts {
        pub scopes_resolved: u64,
        pub unattributed_activities: u64,
        pub stale_scopes: u64,
        /// Activities without valid timestamps (incomplete records from a forced flush).
        pub invalid_activities: u64,
    }
}
