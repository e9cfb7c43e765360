//! What NVIDIA GPUs the machine has: identity, memory, compute capability, driver versions, the
//! PCIe link and the NVLinks, read once through NVML. The links' peaks are what transfer
//! efficiency is measured against. NVML's part of the vendor layer (`super::vendor`).

use super::library::call_error;
use super::sampler::NvmlReader;
use super::vendor::{DeviceLibrary, DeviceReader};
use super::{GpuInfo, MonitorError, NvLink, NvLinkRemote, PcieLink};
use crate::diagnostics::note_once;
use nvml_wrapper::{Device, Nvml};
use std::time::Duration;

impl DeviceLibrary for Nvml {
    fn discover(&self) -> Result<Vec<GpuInfo>, MonitorError> {
        discover(self)
    }

    fn reader(&self, index: u32, interval: Duration) -> Result<Box<dyn DeviceReader + '_>, MonitorError> {
        let device = self.device_by_index(index).map_err(|e| call_error("nvmlDeviceGetHandleByIndex", e))?;
        Ok(Box::new(NvmlReader::new(device, self, interval)))
    }

    fn memory_used(&self) -> Option<u64> {
        let mut used = 0;
        for i in 0..self.device_count().ok()? {
            used += self.device_by_index(i).ok()?.memory_info().ok()?.used;
        }
        Some(used)
    }
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
        (false, _) => {
            place_nvlinks(nvml, &mut gpus);
            Ok(gpus)
        }
    }
}

/// Once every GPU is known: a link's far end that is none of them is a switch (NVSwitch on HGX
/// boards), and each GPU learns which others NVML says it reaches over NVLink.
fn place_nvlinks(nvml: &Nvml, gpus: &mut [GpuInfo]) {
    use super::matching::PciAddress;
    use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus};
    let buses: Vec<Option<PciAddress>> = gpus.iter().map(|g| PciAddress::parse(&g.pci_bus_id)).collect();
    let any_links = gpus.iter().any(|g| !g.nvlinks.is_empty());
    for g in gpus.iter_mut() {
        for l in &mut g.nvlinks {
            if let NvLinkRemote::Gpu(bus) = &l.remote {
                let remote = PciAddress::parse(bus);
                if remote.is_some() && !buses.contains(&remote) {
                    l.remote = NvLinkRemote::Switch;
                }
            }
        }
    }
    let handles: Vec<Option<Device<'_>>> = gpus.iter().map(|g| nvml.device_by_index(g.index).ok()).collect();
    let all: Vec<String> = gpus.iter().map(|g| g.pci_bus_id.clone()).collect();
    for (i, g) in gpus.iter_mut().enumerate() {
        if !any_links {
            g.nvlink_peers = Some(Vec::new()); // no NVLink anywhere: nothing to ask
            continue;
        }
        let mut peers = Some(Vec::new());
        for (j, other) in handles.iter().enumerate() {
            if i == j {
                continue;
            }
            let status = match (&handles[i], other) {
                (Some(a), Some(b)) => a.p2p_status(b, P2pCapabilitiesIndex::NvLink).ok(),
                _ => None,
            };
            match (status, peers.as_mut()) {
                (Some(P2pStatus::Ok), Some(p)) => p.push(all[j].clone()),
                (Some(_), _) => {}
                (None, _) => peers = None,
            }
        }
        g.nvlink_peers = peers;
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
        nvlinks: nvlinks(&d),
        nvlink_peers: None, // set by `place_nvlinks` once every GPU is known
    })
}

/// The GPU's active NVLinks with their far ends (as PCI bus ids, placed by `place_nvlinks`) and
/// speeds. NVML's per-link speed fields cover links 0–11; for the others (an H100 or H200 has 18)
/// the common speed of the active links is used, which NVML reports for that purpose. Every query
/// may fail (no NVLink, a virtual GPU): what fails is left out or `Unknown`, never guessed.
fn nvlinks(d: &Device<'_>) -> Vec<NvLink> {
    use nvml_wrapper::enums::device::SampleValue;
    use nvml_wrapper::structs::device::FieldId;
    use nvml_wrapper::sys_exports::field_id::*;
    /// `NVML_NVLINK_MAX_LINKS` of NVML's header (CUDA 12 and 13).
    const MAX_LINKS: u32 = 18;
    let active: Vec<u32> = (0..MAX_LINKS).filter(|&l| d.link_wrapper_for(l).is_active().unwrap_or(false)).collect();
    if active.is_empty() {
        return Vec::new();
    }
    let per_link = [
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L0,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L1,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L2,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L3,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L4,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L5,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L6,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L7,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L8,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L9,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L10,
        NVML_FI_DEV_NVLINK_SPEED_MBPS_L11,
    ];
    // `NVLINK_GET_SPEED` last: the field NVML answers on boards whose per-link speed fields are
    // 0 (read with scope 0, link 0's speed: the links of one GPU run at one speed).
    let ids: Vec<FieldId> = per_link
        .iter()
        .chain([&NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON, &NVML_FI_DEV_NVLINK_GET_SPEED])
        .map(|&id| FieldId(id))
        .collect();
    // NVML gives MB/s (10^6 bytes) in one direction; 0 means not reported.
    let speeds: Vec<Option<f64>> = match d.field_values_for(&ids) {
        Ok(values) => values
            .into_iter()
            .map(|v| {
                let mb = match v.ok()?.value.ok()? {
                    SampleValue::U32(x) => f64::from(x),
                    SampleValue::U64(x) => x as f64,
                    SampleValue::I64(x) => x as f64,
                    SampleValue::F64(x) => x,
                };
                (mb > 0.0).then_some(mb * 1e6)
            })
            .collect(),
        Err(_) => vec![None; ids.len()],
    };
    let common = speeds[per_link.len()].or(speeds[per_link.len() + 1]);
    active
        .into_iter()
        .map(|link| {
            // nvml-wrapper 0.13's `remote_device_type` returns `Unknown` whatever NVML says, so
            // the far end is told by its PCI address instead (see `place_nvlinks`).
            let remote = d
                .link_wrapper_for(link)
                .remote_pci_info()
                .map_or(NvLinkRemote::Unknown, |p| NvLinkRemote::Gpu(p.bus_id));
            let own = if (link as usize) < per_link.len() { speeds[link as usize] } else { None };
            NvLink { link, remote, bytes_per_s: own.or(common) }
        })
        .collect()
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
