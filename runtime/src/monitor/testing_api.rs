//! What `gpuspan-testing` lends out of the device monitor (through `crate::__testing`): its
//! discovery on demand, the sampler's cost, the per-device summaries and, with a wgpu backend,
//! how an adapter was matched. Programs ask `ready` and read the summary instead.

pub use imp::*;

/// The instrumented build's monitor.
#[cfg(feature = "enabled")]
mod imp {
    #[cfg(feature = "_wgpu")]
    pub use crate::monitor::imp::matching::wgpu_adapters::{describe_adapter, AdapterDescription};
    pub use crate::monitor::imp::sampler::{QueryStats, SamplerStats};
    pub use crate::monitor::imp::summary::{device_summaries, DeviceSummary, Peak};
    use crate::monitor::{GpuInfo, MonitorError};

    /// Describes every GPU now, on the calling thread (NVML is loaded on the first call: tens
    /// of milliseconds). Does not need the sampler.
    pub fn discover() -> Result<Vec<GpuInfo>, MonitorError> {
        crate::monitor::imp::discover_now()
    }

    /// What the sampler did and what it cost; `None` when none was started (the summary shows
    /// it).
    pub fn sampler_stats() -> Option<SamplerStats> {
        crate::monitor::imp::sampler_stats()
    }
}

/// Without instrumentation nothing is loaded: no devices.
#[cfg(not(feature = "enabled"))]
mod imp {
    use crate::monitor::{GpuInfo, MonitorError};

    /// No devices: nothing is loaded.
    pub fn discover() -> Result<Vec<GpuInfo>, MonitorError> {
        Ok(Vec::new())
    }
}
