//! Where a device's PCIe throughput comes from: GPM where the GPU has it (the exact average
//! between two readings), else 64-bit byte counters, else NVML's windowed query (a blocking
//! 20 ms look).

use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES};
use nvml_wrapper::{Device, GpmSample};

/// Where a device's PCIe throughput comes from.
pub(super) enum Pcie<'n> {
    /// GPM (Hopper and later): the average over the period, from two performance samples; the
    /// previous sample and when it was taken.
    Gpm { previous: Option<(GpmSample<'n>, u64)> },
    /// 64-bit cumulative byte counters (field values); the previous reading (tx, rx, at ns).
    /// Drivers that give 32-bit counters are not used: those wrap every 70 ms at 63 GB/s.
    Counters(Option<(u64, u64, u64)>),
    /// `nvmlDeviceGetPcieThroughput`: a 20 ms window, blocking, read at most once a second.
    /// Where the device has not even that, the reading is marked unsupported.
    Windowed,
}

impl std::fmt::Debug for Pcie<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.source())
    }
}

impl Pcie<'_> {
    pub(super) fn source(&self) -> &'static str {
        match self {
            Pcie::Gpm { .. } => "gpm",
            Pcie::Counters(_) => "counters",
            Pcie::Windowed => "windowed",
        }
    }
}

/// The best PCIe source this device has.
pub(super) fn choose<'n>(device: &Device<'n>) -> Pcie<'n> {
    if device.gpm_support().unwrap_or(false) {
        if let Ok(sample) = device.gpm_sample() {
            return Pcie::Gpm { previous: Some((sample, crate::clock::now_ns())) };
        }
    }
    if let Some(first) = read_counters(device) {
        return Pcie::Counters(Some(first));
    }
    Pcie::Windowed
}

/// Bytes per unit of a GPM rate, from the unit NVML states (`MiB/sec` for PCIe on the drivers
/// seen so far, which is also what nvml.h documents and the default here).
pub(super) fn unit_bytes(unit: &str) -> f64 {
    let u = unit.to_ascii_lowercase();
    if u.starts_with("gib") {
        (1u64 << 30) as f64
    } else if u.starts_with("gb") {
        1e9
    } else if u.starts_with("kib") {
        1024.0
    } else if u.starts_with("kb") {
        1e3
    } else if u.starts_with("mb") {
        1e6
    } else if u.starts_with("b/") || u.starts_with("bytes") {
        1.0
    } else {
        (1u64 << 20) as f64
    }
}

/// The cumulative PCIe byte counters and their timestamp (ns), when the driver gives them as
/// 64-bit values.
pub(super) fn read_counters(device: &Device<'_>) -> Option<(u64, u64, u64)> {
    let ids = [FieldId(NVML_FI_DEV_PCIE_COUNT_TX_BYTES), FieldId(NVML_FI_DEV_PCIE_COUNT_RX_BYTES)];
    let values = device.field_values_for(&ids).ok()?;
    let mut out = [0u64; 2];
    let mut at_us = 0i64;
    for (slot, value) in out.iter_mut().zip(values) {
        let sample = value.ok()?;
        let Ok(SampleValue::U64(v)) = sample.value else { return None };
        *slot = v;
        at_us = at_us.max(sample.timestamp);
    }
    let at_ns = u64::try_from(at_us).ok().filter(|&t| t > 0)?.saturating_mul(1000);
    Some((out[0], out[1], at_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpm_units() {
        assert_eq!(unit_bytes("MiB/sec"), 1_048_576.0);
        assert_eq!(unit_bytes("MB/s"), 1e6);
        assert_eq!(unit_bytes("bytes/sec"), 1.0);
        assert_eq!(unit_bytes(""), 1_048_576.0);
    }
}
