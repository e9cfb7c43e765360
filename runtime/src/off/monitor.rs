//! The device monitor's API without the `enabled` feature: the same calls, loading nothing (no
//! NVML), sampling nothing. The data types are the instrumented module's own file.

use std::time::Duration;

#[allow(dead_code)]
#[path = "../monitor/types.rs"]
mod types;

pub use types::{GpuInfo, MonitorConfig, MonitorError, NvLink, NvLinkRemote, PcieLink, Sample};

impl MonitorConfig {
    /// The defaults without the `enabled` feature: no variable is read.
    pub fn from_env() -> Self {
        MonitorConfig::default()
    }

    /// Does nothing without the `enabled` feature: no sampler is started.
    pub fn start(self) -> Result<(), MonitorError> {
        Ok(())
    }
}

/// Does nothing without the `enabled` feature: there is no sampler to stop.
pub fn stop() -> bool {
    true
}

/// No devices without the `enabled` feature: NVML is not loaded to look.
pub fn ready(_timeout: Duration) -> Result<Vec<GpuInfo>, MonitorError> {
    Ok(Vec::new())
}

/// No devices without the `enabled` feature (feature `testing`).
#[cfg(feature = "testing")]
pub fn discover() -> Result<Vec<GpuInfo>, MonitorError> {
    Ok(Vec::new())
}

/// Empty without the `enabled` feature: nothing is sampled.
pub fn history(_index: u32) -> Vec<Sample> {
    Vec::new()
}

/// `None` without the `enabled` feature: nothing is sampled.
pub fn latest(_index: u32) -> Option<Sample> {
    None
}
