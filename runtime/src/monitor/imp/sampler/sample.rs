//! What one round reads from one GPU, and NVML's throttle reasons by name.

use super::super::ring::Timed;
use super::super::types::Sample;

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
