//! What the crate `gpuspan-testing` reaches: the record model, the clock records are on,
//! `Capture`, and the backends' and the monitor's diagnostics. Not a stable API, and not a
//! program's: `gpuspan-testing` gives the documented one (docs/decisions.md, 72). Present in
//! every feature set; without `enabled` each item does nothing, as the off build's public
//! items do.

pub use crate::capture::Capture;

/// The record model (`crate::record`).
pub mod record {
    pub use crate::record::*;
}

/// Memory around a call (`crate::memory`).
pub mod memory {
    pub use crate::memory::*;
}

/// The clock records are on.
pub mod clock {
    pub use crate::clock::now_ns;
}

/// The real pipeline behind one an instrumented wgpu 30 device made.
#[cfg(all(feature = "enabled", feature = "wgpu-30"))]
pub mod wgpu30 {
    pub use crate::wgpu::v30::backend::instrument::real_compute_pipeline;
}

/// The real pipeline behind one an instrumented wgpu 29 device made.
#[cfg(all(feature = "enabled", feature = "wgpu-29"))]
pub mod wgpu29 {
    pub use crate::wgpu::v29::backend::instrument::real_compute_pipeline;
}

/// CUPTI replay and counts, whether CUDA timing started.
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use crate::cuda::testing_api::*;
}

/// The device monitor's discovery, costs and summaries.
#[cfg(feature = "nvml")]
pub mod monitor {
    pub use crate::monitor::testing_api::*;
}

/// Exports one built record through `otlp` now, as spans, whatever the sampling says; does
/// nothing without the `enabled` feature or when `otlp` exports no traces.
#[cfg(feature = "otlp")]
pub fn otlp_export(otlp: &crate::otlp::Otlp, record: &crate::record::Record) {
    otlp.export_record(record);
}
