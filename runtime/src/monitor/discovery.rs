//! What GPUs the machine has: identity, memory, compute capability, driver versions and the PCIe
//! link, read once through NVML. The link's peak is what transfer efficiency is measured against.

use super::library::call_error;
use super::MonitorError;
use crate::diagnostics::note_once;
use nvml_wrapper::{Device, Nvml};

/// One GPU as NVML describes it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GpuInfo {
    /// NVML's index (PCI bus order; CUDA's ordinals may differ, see docs/monitor.md).
    pub index: u32,
    /// Exactly as `nvidia-smi` prints it, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `NVIDIA` (`hw.vendor`).
    pub vendor: &'static str,
    /// `GPU-xxxxxxxx-...`: unique on the host, used as `hw.id`.
    pub uuid: String,
    /// NVML's form, `00000000:18:00.0`.
    pub pci_bus_id: String,
    /// PCI device id in the high 16 bits, vendor id in the low 16 bits.
    pub pci_device_id: u32,
    /// Device memory in total.
    pub memory_total_bytes: u64,
    /// CUDA compute capability (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// The NVIDIA driver's version, e.g. `580.159.04`.
    pub driver_version: String,
    /// The CUDA version the driver supports (major, minor).
    pub cuda_driver_version: Option<(u32, u32)>,
    /// The PCIe link to the host.
    pub pcie: PcieLink,
}

/// A PCIe link's generation and width: the most the device and slot allow, and what the link
/// runs at now (GPUs drop to a lower generation when idle to save power).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PcieLink {
    /// The highest generation the device and slot allow.
    pub max_generation: Option<u32>,
    /// The most lanes the device and slot allow.
    pub max_width: Option<u32>,
    /// The generation the link runs at now.
    pub current_generation: Option<u32>,
    /// The lanes the link uses now.
    pub current_width: Option<u32>,
}

impl PcieLink {
    /// Bytes per second the link can carry in one direction at its maximum generation and width:
    /// the figure transfer efficiency is measured against.
    pub fn peak_bytes_per_s(&self) -> Option<f64> {
        Some(lane_bytes_per_s(self.max_generation?)? * f64::from(self.max_width?))
    }

    /// The same at the generation and width the link runs at now.
    pub fn current_bytes_per_s(&self) -> Option<f64> {
        Some(lane_bytes_per_s(self.current_generation?)? * f64::from(self.current_width?))
    }
}

/// Usable bytes per second of one PCIe lane in one direction: the transfer rate times the line
/// code's efficiency (8b/10b for generations 1–2, 128b/130b for 3–5, 242/256 FLIT for 6–7).
/// Packet overhead is not subtracted, so large copies reach about 80–90 % of it.
pub(crate) fn lane_bytes_per_s(generation: u32) -> Option<f64> {
    let (transfers_per_s, code): (f64, f64) = match generation {
        1 => (2.5e9, 8.0 / 10.0),
        2 => (5e9, 8.0 / 10.0),
        3 => (8e9, 128.0 / 130.0),
        4 => (16e9, 128.0 / 130.0),
        5 => (32e9, 128.0 / 130.0),
        6 => (64e9, 242.0 / 256.0),
        7 => (128e9, 242.0 / 256.0),
        _ => return None,
    };
    Some(transfers_per_s * code / 8.0)
}

/// Describes every GPU NVML sees. A GPU that cannot be described (fallen off the bus, say) is
/// said once and left out; no GPU at all is an error.
pub(super) fn discover(nvml: &Nvml) -> Result<Vec<GpuInfo>, MonitorError> {
    let count = nvml.device_count().map_err(|e| call_error("nvmlDeviceGetCount", e))?;
    let driver_version = nvml.sys_driver_version().map_err(|e| call_error("nvmlSystemGetDriverVersion", e))?;
    let cuda_driver_version = nvml.sys_cuda_driver_version().ok().and_then(|v| {
        let v = u32::try_from(v).ok()?;
        Some((v / 1000, (v % 1000) / 10))
    });
    let mut gpus = Vec::new();
    let mut first_error = None;
    for index in 0..count {
        match describe(nvml, index, &driver_version, cuda_driver_version) {
            Ok(g) => gpus.push(g),
            Err(e) => {
                note_once(format_args!("GPU {index} is left out of device monitoring: {e}"));
                first_error.get_or_insert(e);
            }
        }
    }
    match (gpus.is_empty(), first_error) {
        (true, Some(e)) => Err(e),
        (true, None) => Err(MonitorError::NoDevices),
        (false, _) => Ok(gpus),
    }
}

fn describe(
    nvml: &Nvml,
    index: u32,
    driver_version: &str,
    cuda_driver_version: Option<(u32, u32)>,
) -> Result<GpuInfo, MonitorError> {
    let d = nvml.device_by_index(index).map_err(|e| call_error("nvmlDeviceGetHandleByIndex", e))?;
    let pci = d.pci_info().map_err(|e| call_error("nvmlDeviceGetPciInfo", e))?;
    Ok(GpuInfo {
        index,
        name: d.name().map_err(|e| call_error("nvmlDeviceGetName", e))?,
        vendor: "NVIDIA",
        uuid: d.uuid().map_err(|e| call_error("nvmlDeviceGetUUID", e))?,
        pci_bus_id: pci.bus_id,
        pci_device_id: pci.pci_device_id,
        memory_total_bytes: d.memory_info().map_err(|e| call_error("nvmlDeviceGetMemoryInfo", e))?.total,
        compute_capability: d
            .cuda_compute_capability()
            .ok()
            .and_then(|c| Some((u32::try_from(c.major).ok()?, u32::try_from(c.minor).ok()?))),
        driver_version: driver_version.to_owned(),
        cuda_driver_version,
        pcie: link(&d),
    })
}

/// The link as it is now; every part is optional (virtual GPUs and some boards report none).
pub(super) fn link(d: &Device<'_>) -> PcieLink {
    PcieLink {
        max_generation: d.max_pcie_link_gen().ok(),
        max_width: d.max_pcie_link_width().ok(),
        current_generation: d.current_pcie_link_gen().ok(),
        current_width: d.current_pcie_link_width().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen5_x16_peaks_at_63_gb_per_s() {
        let link = PcieLink { max_generation: Some(5), max_width: Some(16), ..PcieLink::default() };
        let peak = link.peak_bytes_per_s().expect("known generation");
        assert!((peak - 63.015e9).abs() < 0.01e9, "{peak}");
        assert_eq!(link.current_bytes_per_s(), None);
    }

    #[test]
    fn line_codes_per_generation() {
        assert_eq!(lane_bytes_per_s(1), Some(250e6));
        assert_eq!(lane_bytes_per_s(2), Some(500e6));
        assert!((lane_bytes_per_s(3).unwrap() - 984.6e6).abs() < 0.1e6);
        assert!((lane_bytes_per_s(4).unwrap() * 16.0 - 31.5e9).abs() < 0.01e9);
        assert!((lane_bytes_per_s(6).unwrap() * 16.0 - 121e9).abs() < 0.01e9);
        assert_eq!(lane_bytes_per_s(0), None);
        assert_eq!(lane_bytes_per_s(9), None);
    }
}
