//! What GPUs the machine has: identity, memory, compute capability, driver versions and the PCIe
//! link, read once through NVML. The link's peak is what transfer efficiency is measured against.

use super::library::call_error;
use super::{GpuInfo, MonitorError, PcieLink};
use crate::diagnostics::note_once;
use nvml_wrapper::{Device, Nvml};

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
    use crate::monitor::types::lane_bytes_per_s;

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
