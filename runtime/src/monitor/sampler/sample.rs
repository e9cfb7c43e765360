//! What one round reads from one GPU, and NVML's throttle reasons by name.

use super::super::ring::Timed;

/// One round's reading of one GPU. A field is `None` where the device does not report it; the
/// power limit and link state are held from their last reading (at most a second old).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// When it was taken, on gpuspan's host clock (Unix-epoch ns, like every record).
    pub time_ns: u64,
    /// Percent of the last sample period (1/6 s to 1 s, by product) in which a kernel ran.
    pub gpu_utilization_pct: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub memory_utilization_pct: Option<u32>,
    /// Device memory in use.
    pub memory_used_bytes: Option<u64>,
    /// Device memory free.
    pub memory_free_bytes: Option<u64>,
    /// GPU die temperature, °C.
    pub temperature_c: Option<u32>,
    /// Power drawn, W.
    pub power_w: Option<f64>,
    /// The enforced power limit.
    pub power_limit_w: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub memory_clock_mhz: Option<u32>,
    /// Bytes per second the GPU sent over PCIe (to the host), averaged since the previous PCIe
    /// reading (GPM, counters) or over a 20 ms look (windowed).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Bytes per second the GPU received over PCIe (from the host), likewise.
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// The link's generation and width (read at most once a second).
    pub pcie_generation: Option<u32>,
    /// The link's width in lanes (read at most once a second).
    pub pcie_width: Option<u32>,
    /// NVML's clock throttle reason bits (spans and the summary show them by name).
    pub throttle_reasons: Option<u64>,
}

impl Timed for Sample {
    fn time_ns(&self) -> u64 {
        self.time_ns
    }
}

/// NVML's clock throttle reasons (`nvmlClocksThrottleReason*`, stable values) and their names.
pub(crate) const THROTTLE_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in `bits` (unknown bits are left out).
pub(crate) fn throttle_reason_names(bits: u64) -> Vec<&'static str> {
    THROTTLE_REASONS.iter().filter(|(bit, _)| bits & bit != 0).map(|(_, name)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_bits_read_as_names() {
        assert_eq!(throttle_reason_names(0), Vec::<&str>::new());
        assert_eq!(throttle_reason_names(0x1 | 0x4), ["gpu_idle", "sw_power_cap"]);
        assert_eq!(throttle_reason_names(0x8000_0000), Vec::<&str>::new());
    }
}
