//! AMD GPUs through ROCm SMI (`librocm_smi64`), loaded at run time: ROCm SMI's part of the
//! vendor layer (`super::vendor`). Signatures, enum values and units are those of ROCm's
//! `include/rocm_smi/rocm_smi.h` (rocm_smi_lib 7.3, ROCm 6.2); only the calls below are made.
//! Nothing here has run on AMD hardware: it is tested against a fake library
//! (tests/fixtures/rocm/fake_rocm_smi.c).

mod library;
mod reader;

pub(super) use library::{load, Rocm};

use super::vendor::{DeviceLibrary, DeviceReader};
use super::{GpuInfo, MonitorError, PcieLink};
use crate::diagnostics::note_once;
use library::{MEM_TYPE_VRAM, SW_COMP_DRIVER};
use std::time::Duration;

impl DeviceLibrary for Rocm {
    /// Every GPU ROCm SMI monitors. One that cannot be described (no PCI address or VRAM size)
    /// is said once and left out; none at all is an error.
    fn discover(&self) -> Result<Vec<GpuInfo>, MonitorError> {
        let count = self.device_count()?;
        let driver_version = self.version_str(SW_COMP_DRIVER).unwrap_or_else(|_| "unknown".into());
        let mut gpus = Vec::new();
        let mut first_error = None;
        for index in 0..count {
            match self.describe(index, &driver_version) {
                Ok(g) => gpus.push(g),
                Err(e) => {
                    note_once(format_args!("AMD GPU {index} is left out of device monitoring: {e}"));
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

    fn reader(&self, index: u32, interval: Duration) -> Result<Box<dyn DeviceReader + '_>, MonitorError> {
        Ok(Box::new(reader::RocmReader::new(self, index, interval)))
    }

    fn memory_used(&self) -> Option<u64> {
        let mut used = 0;
        for i in 0..self.device_count().ok()? {
            used += self.memory_usage(i, MEM_TYPE_VRAM).ok()?;
        }
        Some(used)
    }
}

impl Rocm {
    fn describe(&self, index: u32, driver_version: &str) -> Result<GpuInfo, MonitorError> {
        let pci_bus_id = bus_id(self.pci_id(index)?);
        let vendor = self.vendor_id(index).unwrap_or(0);
        let device = self.device_id(index).unwrap_or(0);
        // rocm-smi prints the unique id as hex; where the GPU has none the PCI address (unique on
        // the host too) stands in.
        let uuid = self.unique_id(index).map_or_else(|_| pci_bus_id.clone(), |id| format!("{id:#x}"));
        Ok(GpuInfo {
            index,
            name: self.name(index).unwrap_or_else(|_| format!("AMD GPU {pci_bus_id}")),
            vendor: "AMD",
            uuid,
            pci_device_id: u32::from(device) << 16 | u32::from(vendor),
            memory_total_bytes: self.memory_total(index, MEM_TYPE_VRAM)?,
            compute_capability: None,
            driver_version: driver_version.to_owned(),
            cuda_driver_version: None,
            // ROCm SMI gives the link as a table of transfer rates, not a generation: not read.
            pcie: PcieLink::default(),
            nvlinks: Vec::new(),
            // XGMI links are not read: which GPUs reach each other directly cannot be said.
            nvlink_peers: None,
            pci_bus_id,
        })
    }
}

/// ROCm SMI's BDFID as a PCI address in NVML's form (`00000000:C1:00.0`): domain in bits
/// 63–32, a partition number in 31–28 (not part of the address), bus 15–8, device 7–3,
/// function 2–0 (rocm_smi.h, `rsmi_dev_pci_id_get`).
fn bus_id(bdfid: u64) -> String {
    let domain = bdfid >> 32;
    let bus = (bdfid >> 8) & 0xff;
    let device = (bdfid >> 3) & 0x1f;
    let function = bdfid & 0x7;
    format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::imp::matching::PciAddress;

    #[test]
    fn a_bdfid_is_a_pci_address_without_its_partition() {
        let bdfid = (0x0001u64 << 32) | (0x3 << 28) | (0xc1 << 8) | (0x02 << 3) | 0x1;
        assert_eq!(bus_id(bdfid), "00000001:C1:02.1");
        assert_eq!(PciAddress::parse(&bus_id(bdfid)), PciAddress::parse("0001:c1:02.1"));
        assert_eq!(bus_id(0x0300), "00000000:03:00.0");
    }

    #[test]
    fn a_missing_library_is_an_error_that_names_the_path() {
        let e = load(Some(std::ffi::OsStr::new("/nonexistent/librocm_smi64.so"))).expect_err("no such file");
        match &e {
            MonitorError::LibraryMissing { tried } => assert!(tried.contains("/nonexistent/librocm_smi64.so"), "{e}"),
            other => panic!("expected LibraryMissing, got {other:?}"),
        }
    }
}
