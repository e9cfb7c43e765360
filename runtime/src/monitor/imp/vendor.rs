//! The vendor layer: what the monitor asks of a device library (NVML for NVIDIA GPUs, ROCm SMI
//! for AMD ones), every loaded library's GPUs as one list, and which library a GPU's PCI vendor
//! id belongs to.
//!
//! Both libraries are tried, NVML first; a machine with both gets both sets of devices,
//! numbered NVML's first. A library that is missing on a machine whose GPUs another library
//! reads is not an error: an AMD machine has no NVML. Only when no library finds a GPU is one
//! error said, naming what was tried.

use super::library::{libraries, Libraries};
use super::sampler::Schedule;
use super::{GpuInfo, MonitorError, Sample};
use std::time::Duration;

/// One vendor's device library, loaded: the calls discovery, the sampler and `track_memory`
/// make. Indices are the library's own.
pub(super) trait DeviceLibrary: Sync {
    /// Every GPU the library sees, described once, with the library's indices.
    fn discover(&self) -> Result<Vec<GpuInfo>, MonitorError>;
    /// A reader of the GPU the library numbers `index`, made on the sampler's thread.
    fn reader(&self, index: u32, interval: Duration) -> Result<Box<dyn DeviceReader + '_>, MonitorError>;
    /// Device memory in use now on every GPU of the library, summed.
    fn memory_used(&self) -> Option<u64>;
}

/// Reads one GPU round after round, each kind of reading on its own schedule.
pub(super) trait DeviceReader {
    /// One sample at grid step `step`, and the bytes sent and received over PCIe since the
    /// previous PCIe reading (0 where the library has no PCIe throughput).
    fn read(&mut self, step: u64) -> (Sample, f64, f64);
    /// Each kind of reading by name, with what it cost so far.
    fn query_stats(&self) -> Vec<(&'static str, Schedule)>;
    /// Where PCIe throughput comes from (`none` where the library has none).
    fn pcie_source(&self) -> &'static str;
}

/// A GPU found by one of the libraries: its description (`index` is the monitor's) and how to
/// reach it again.
pub(super) struct Found {
    pub(super) info: GpuInfo,
    pub(super) library: &'static dyn DeviceLibrary,
    /// The library's own index of the GPU.
    pub(super) local_index: u32,
}

/// Every GPU of every loaded library, NVML's first (with NVML's indices), then ROCm SMI's
/// (numbered on from NVML's highest). No GPU at all is one error: every library missing is
/// [`MonitorError::LibraryMissing`] naming everything tried, otherwise the first library's
/// failure that is not a missing file.
pub(super) fn discover() -> Result<Vec<Found>, MonitorError> {
    discover_in(libraries())
}

fn discover_in(libs: &'static Libraries) -> Result<Vec<Found>, MonitorError> {
    let mut found: Vec<Found> = Vec::new();
    let mut errors = Vec::new();
    for (name, library) in libs.each() {
        let gpus = match library {
            Ok(library) => library.discover().map(|gpus| (library, gpus)),
            Err(e) => Err(e.clone()),
        };
        match gpus {
            Ok((library, gpus)) => {
                let offset = found.iter().map(|f| f.info.index + 1).max().unwrap_or(0);
                found.extend(gpus.into_iter().map(|mut info| {
                    let local_index = info.index;
                    info.index += offset;
                    Found { info, library, local_index }
                }));
            }
            Err(e) => errors.push((name, e)),
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let missing: Vec<String> = errors
        .iter()
        .filter_map(|(name, e)| match e {
            MonitorError::LibraryMissing { tried } => Some(format!("{name}: {}", condensed(tried))),
            _ => None,
        })
        .collect();
    match errors.into_iter().find(|(_, e)| !matches!(e, MonitorError::LibraryMissing { .. })) {
        Some((_, e)) => Err(e),
        None if missing.is_empty() => Err(MonitorError::NoDevices),
        None => Err(MonitorError::LibraryMissing { tried: missing.join("; ") }),
    }
}

/// The loader's messages for the files tried, `; `-separated, with the common "no such file"
/// said once: `a, b not found` (each message kept where any other reason is given).
fn condensed(tried: &str) -> String {
    const NOT_FOUND: &str = ": cannot open shared object file: No such file or directory";
    let files: Option<Vec<&str>> = tried.split("; ").map(|t| t.strip_suffix(NOT_FOUND)).collect();
    match files {
        Some(files) => format!("{} not found", files.join(", ")),
        None => tried.to_owned(),
    }
}

/// Device memory in use now, summed over every GPU of every loaded library; `None` when no
/// library is loaded or one could not answer.
pub(super) fn memory_used() -> Option<u64> {
    let mut total = None;
    for (_, library) in libraries().each() {
        if let Ok(library) = library {
            total = Some(total.unwrap_or(0) + library.memory_used()?);
        }
    }
    total
}

/// The library a monitored GPU is read through, by its vendor.
pub(super) fn library_of(gpu: &GpuInfo) -> &'static str {
    if gpu.vendor == "AMD" {
        "ROCm SMI"
    } else {
        "NVML"
    }
}

/// A GPU maker, from the PCI vendor id that wgpu's `AdapterInfo::vendor` (and every PCI
/// device) carries; which device library reads its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Vendor {
    Nvidia,
    Amd,
    Intel,
    Apple,
    /// Any other id (ARM, Qualcomm, Mesa's software devices, ...).
    Other(u32),
}

impl Vendor {
    pub(super) fn from_pci_id(id: u32) -> Self {
        match id {
            0x10de => Vendor::Nvidia,
            // 0x1022 is AMD's id for its CPUs' integrated devices.
            0x1002 | 0x1022 => Vendor::Amd,
            0x8086 => Vendor::Intel,
            0x106b => Vendor::Apple,
            other => Vendor::Other(other),
        }
    }

    /// The vendor name [`GpuInfo::vendor`] holds for GPUs of this maker, where a library reads them.
    pub(super) fn gpu_vendor(self) -> Option<&'static str> {
        match self {
            Vendor::Nvidia => Some("NVIDIA"),
            Vendor::Amd => Some("AMD"),
            _ => None,
        }
    }

    /// The device library that reads this maker's GPUs, or why there is none.
    #[cfg_attr(not(feature = "_wgpu"), allow(dead_code))]
    pub(super) fn library(self) -> Result<&'static str, String> {
        match self {
            Vendor::Nvidia => Ok("NVML"),
            Vendor::Amd => Ok("ROCm SMI"),
            Vendor::Intel => Err("no device library is read for Intel GPUs (gpuspan reads NVML for NVIDIA and ROCm SMI for AMD), so it has no device metrics".into()),
            Vendor::Apple => Err("no device library is read for Apple GPUs (gpuspan reads NVML for NVIDIA and ROCm SMI for AMD), so it has no device metrics".into()),
            Vendor::Other(id) => Err(format!(
                "no device library is read for PCI vendor {id:#06x} (gpuspan reads NVML for NVIDIA and ROCm SMI for AMD), so it has no device metrics"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_not_found_are_listed_once_and_other_reasons_kept() {
        let none = "a.so: cannot open shared object file: No such file or directory; \
                    /x/b.so: cannot open shared object file: No such file or directory";
        assert_eq!(condensed(none), "a.so, /x/b.so not found");
        let other = "a.so: cannot open shared object file: No such file or directory; b.so: wrong ELF class";
        assert_eq!(condensed(other), other);
    }

    #[test]
    fn vendors_by_pci_id_and_their_libraries() {
        assert_eq!(Vendor::from_pci_id(0x10de).library(), Ok("NVML"));
        assert_eq!(Vendor::from_pci_id(0x1002).library(), Ok("ROCm SMI"));
        assert_eq!(Vendor::from_pci_id(0x1002).gpu_vendor(), Some("AMD"));
        let intel = Vendor::from_pci_id(0x8086).library().expect_err("no Intel library");
        assert!(intel.contains("Intel GPUs"), "{intel}");
        assert!(Vendor::from_pci_id(0x106b).library().expect_err("no Apple library").contains("Apple"));
        let mesa = Vendor::from_pci_id(0x10005);
        assert_eq!(mesa, Vendor::Other(0x10005));
        assert!(mesa.library().expect_err("none").contains("0x10005"));
        assert_eq!(mesa.gpu_vendor(), None);
    }
}
