//! The device side of the picture (feature `nvml`): which GPUs the machine has, and how busy,
//! full, hot and power-hungry they are while the program runs.
//!
//! NVML (`libnvidia-ml`, NVIDIA GPUs) and ROCm SMI (`librocm_smi64`, AMD GPUs) are loaded at run
//! time, both tried (`vendor.rs` is the layer between them and the monitor), so a program built
//! with `nvml` still runs where there is no GPU driver: the absence is said once and everything
//! else goes on.
//!
//! - [`ready`] describes every GPU: name, UUID, PCI bus id, VRAM, compute capability, driver
//!   and CUDA driver versions, and the PCIe link with its peak bandwidth.
//! - [`MonitorConfig::start`] (which [`crate::init`] calls) runs a background sampler (default
//!   every 100 ms) that keeps a bounded history per device: utilization, VRAM, temperature,
//!   power, clocks, PCIe throughput, throttle reasons. The summary table shows its peak/mean
//!   rows, an exporter of metrics (the OTLP export) its `hw.gpu.*` metrics.
//! - Kernel and transfer spans over the threshold carry the sample nearest their time, read from
//!   that history: no device library call on the program's path.
//!
//! The monitor is a leaf: `init` registers what it adds to records, to the summary and to the
//! metrics, and it reads the device memory of `track_memory` sites. It also lends its own
//! diagnostics to `gpuspan-testing` (`testing_api`: `discover`, `sampler_stats`,
//! `device_summaries`, `describe_adapter`).
//!
//! ```no_run
//! let _guard = gpuspan::init();
//! gpuspan::monitor::MonitorConfig::from_env().start().ok();
//! // ... GPU work ...
//! let gpus = gpuspan::monitor::ready(std::time::Duration::from_secs(1)).unwrap_or_default();
//! let names: Vec<(u32, String)> = gpus.into_iter().map(|gpu| (gpu.index, gpu.name)).collect();
//! # drop(names);
//! ```
//!
//! docs/monitor.md explains the choices and what was measured.
//!
//! Without the `enabled` feature the data types are the same and nothing is loaded or sampled:
//! each function says what it returns then.

mod types;
// What `gpuspan-testing` lends out (through `crate::__testing`).
pub(crate) mod testing_api;
// The sampler, the vendor libraries and what plugs them into the core: the instrumented build's.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::{register_hooks, start_from_env};

pub use types::{GpuInfo, MonitorConfig, MonitorError, NvLink, NvLinkRemote, PcieLink, Sample};

use std::time::Duration;

impl MonitorConfig {
    /// Defaults, then the `GPUSPAN_MONITOR_*` variables (a malformed one is said once and ignored).
    /// Without the `enabled` feature the defaults: no variable is read.
    pub fn from_env() -> Self {
        #[cfg(feature = "enabled")]
        return imp::config_from_env();
        #[cfg(not(feature = "enabled"))]
        MonitorConfig::default()
    }

    /// Starts the sampler thread and returns at once: NVML is loaded and the devices discovered
    /// on that thread, never on the caller's. Where NVML is missing the thread says so once and
    /// ends; [`ready`] waits for the outcome. One sampler runs per process. Without the `enabled`
    /// feature it does nothing: no sampler is started.
    pub fn start(self) -> Result<(), MonitorError> {
        #[cfg(feature = "enabled")]
        return imp::start(self);
        #[cfg(not(feature = "enabled"))]
        Ok(())
    }
}

/// Stops the sampler, waiting at most one second for its current round. The history stays
/// readable (summary, spans resolved later). Returns whether the thread ended in time; a thread
/// that did not ends by itself after its round and touches nothing of the program's. Without the
/// `enabled` feature there is no sampler to stop: `true`.
pub fn stop() -> bool {
    #[cfg(feature = "enabled")]
    return imp::stop();
    #[cfg(not(feature = "enabled"))]
    true
}

/// Waits at most `timeout` for the sampler to load NVML and discover the devices. `Ok` holds the
/// devices; `Err` says why there are none. With no sampler started, discovers synchronously.
/// Without the `enabled` feature no devices: NVML is not loaded to look.
pub fn ready(timeout: Duration) -> Result<Vec<GpuInfo>, MonitorError> {
    #[cfg(feature = "enabled")]
    return imp::ready(timeout);
    #[cfg(not(feature = "enabled"))]
    {
        let _ = timeout;
        Ok(Vec::new())
    }
}

/// The samples kept for the GPU with this NVML index, oldest first (none without the `enabled`
/// feature: nothing is sampled).
pub fn history(index: u32) -> Vec<Sample> {
    #[cfg(feature = "enabled")]
    return imp::history(index);
    #[cfg(not(feature = "enabled"))]
    {
        let _ = index;
        Vec::new()
    }
}

/// The newest sample of the GPU with this NVML index (`None` without the `enabled` feature:
/// nothing is sampled).
pub fn latest(index: u32) -> Option<Sample> {
    #[cfg(feature = "enabled")]
    return imp::latest(index);
    #[cfg(not(feature = "enabled"))]
    {
        let _ = index;
        None
    }
}
