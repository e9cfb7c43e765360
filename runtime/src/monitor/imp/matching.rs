//! Which monitored device (NVML's or ROCm SMI's) a record ran on, and which one a wgpu adapter is.
//!
//! NVML numbers GPUs in PCI bus order; CUDA numbers them fastest first (and renumbers them under
//! `CUDA_VISIBLE_DEVICES`); wgpu has no number at all. So devices are matched by identity: UUID
//! or PCI address where the backend reports one, then PCI vendor/device id, then the name when
//! exactly one GPU bears it. A device that cannot be told apart is left unmatched, never guessed.
//! Where the backend knows the device's PCI vendor (wgpu's adapter, CUDA's NVIDIA devices) only
//! the GPUs of that vendor's library are candidates: an AMD adapter is matched among ROCm SMI's
//! GPUs, an NVIDIA one among NVML's, and an Intel or Apple one among none.

use super::vendor::Vendor;
use super::GpuInfo;
use crate::record::Record;

/// A PCI address, `domain:bus:device.function`, whatever the notation (NVML pads the domain to
/// eight digits, Vulkan to four, some tools leave it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PciAddress {
    domain: u32,
    bus: u32,
    device: u32,
    function: u32,
}

impl PciAddress {
    pub(super) fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (rest, function) = s.rsplit_once('.')?;
        let mut parts = rest.rsplit(':');
        let device = u32::from_str_radix(parts.next()?, 16).ok()?;
        let bus = u32::from_str_radix(parts.next()?, 16).ok()?;
        let domain = match parts.next() {
            Some(d) => u32::from_str_radix(d, 16).ok()?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(PciAddress { domain, bus, device, function: u32::from_str_radix(function, 16).ok()? })
    }
}

/// How a device was matched, for messages and attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MatchedBy {
    Uuid,
    PciAddress,
    PciId,
    Name,
}

/// What a backend knows about one of its devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Identity {
    pub uuid: Option<String>,
    pub pci: Option<PciAddress>,
    /// (vendor id, device id).
    pub pci_id: Option<(u32, u32)>,
    pub name: Option<String>,
    /// The PCI vendor id, where the backend knows it.
    pub vendor: Option<u32>,
}

/// The position in `gpus` of the device `identity` describes, trying the surest key first.
pub(super) fn find<'a>(
    identity: &Identity,
    gpus: impl Iterator<Item = &'a GpuInfo> + Clone,
) -> Option<(usize, MatchedBy)> {
    // The vendor's library's GPUs only; none for a vendor no library reads.
    let library_vendor = identity.vendor.map(|id| Vendor::from_pci_id(id).gpu_vendor());
    let candidate = move |g: &GpuInfo| library_vendor.is_none_or(|v| v == Some(g.vendor));
    let unique = |pred: &dyn Fn(&GpuInfo) -> bool| {
        let mut hits = gpus.clone().enumerate().filter(|(_, g)| candidate(g) && pred(g)).map(|(i, _)| i);
        let first = hits.next()?;
        hits.next().is_none().then_some(first)
    };
    if let Some(uuid) = &identity.uuid {
        if let Some(i) = unique(&|g| g.uuid.eq_ignore_ascii_case(uuid)) {
            return Some((i, MatchedBy::Uuid));
        }
    }
    if let Some(pci) = identity.pci {
        if let Some(i) = unique(&|g| PciAddress::parse(&g.pci_bus_id) == Some(pci)) {
            return Some((i, MatchedBy::PciAddress));
        }
    }
    if let Some((vendor, device)) = identity.pci_id {
        if let Some(i) = unique(&|g| g.pci_device_id == (device << 16 | vendor & 0xffff)) {
            return Some((i, MatchedBy::PciId));
        }
    }
    let name = normalize(identity.name.as_deref()?);
    unique(&|g| normalize(&g.name) == name).map(|i| (i, MatchedBy::Name))
}

fn normalize(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase()
}

/// The position in `gpus` of the device `record` ran on, if it can be told.
pub(super) fn device_of<'a>(record: &Record, gpus: impl Iterator<Item = &'a GpuInfo> + Clone) -> Option<usize> {
    let label = record.gpu.as_ref()?.device.as_ref()?;
    label_of(label, record.site.desc.backend, gpus)
}

/// The position in `gpus` of the device `backend` calls `label`, if it can be told.
pub(super) fn label_of<'a>(
    label: &crate::record::DeviceLabel,
    backend: crate::site::Backend,
    gpus: impl Iterator<Item = &'a GpuInfo> + Clone,
) -> Option<usize> {
    use crate::site::Backend;
    // Each backend numbers its devices its own way (CUDA ordinals, wgpu registration ids) and
    // only its API reads their PCI identity: one arm per backend, the monitor's (a leaf) only
    // names of backends besides `cuda_ordinal`'s.
    let registered = match backend {
        Backend::Cuda => cuda::identity(label.id),
        #[cfg(feature = "_wgpu")]
        Backend::Wgpu => wgpu_adapters::wgpu_identity(label.id),
        _ => None,
    };
    let name = if backend == Backend::Wgpu { strip_backend(&label.name) } else { &label.name };
    let identity = registered.unwrap_or_else(|| name_only(name));
    find(&identity, gpus).map(|(i, _)| i)
}

/// This process's CUDA ordinal for the NVML device at `index` in `gpus`, in a process that
/// times CUDA (the driver is not loaded for this alone).
pub(super) fn cuda_ordinal<'a>(index: usize, gpus: impl Iterator<Item = &'a GpuInfo> + Clone) -> Option<u32> {
    if !cuda::watching() {
        return None;
    }
    let ordinal =
        (0u32..).map_while(cuda::identity).position(|id| find(&id, gpus.clone()).map(|(i, _)| i) == Some(index));
    ordinal.map(|o| o as u32)
}

fn name_only(name: &str) -> Identity {
    Identity { name: Some(name.to_owned()), ..Identity::default() }
}

/// gpuspan names wgpu devices `"<adapter name> (<backend>)"`; the adapter name is the GPU's.
fn strip_backend(label: &str) -> &str {
    match label.rsplit_once(" (") {
        Some((name, backend)) if backend.ends_with(')') => name,
        _ => label,
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    //! CUDA ordinals to identities through the driver API: the UUID and PCI address of each
    //! device, read once, after gpuspan's CUDA probe found a driver (cudarc panics without one).

    use super::{Identity, PciAddress};
    use std::sync::OnceLock;

    /// Whether this process times CUDA (so its ordinals can be read without loading a driver).
    pub(super) fn watching() -> bool {
        crate::cuda::watching()
    }

    // process-wide because the CUDA ordinals are the process's (its driver context and
    // CUDA_VISIBLE_DEVICES), read once.
    static IDENTITIES: OnceLock<Vec<Identity>> = OnceLock::new();

    pub(super) fn identity(ordinal: u32) -> Option<Identity> {
        IDENTITIES.get_or_init(read).get(ordinal as usize).cloned()
    }

    fn read() -> Vec<Identity> {
        let Ok(devices) = crate::cuda::probe() else {
            return Vec::new();
        };
        let count = devices.len();
        std::panic::catch_unwind(|| (0..count).map(one).collect()).unwrap_or_default()
    }

    fn one(ordinal: usize) -> Identity {
        use cudarc::driver::result::device;
        use cudarc::driver::sys::CUdevice_attribute as A;
        let Ok(dev) = device::get(ordinal as i32) else {
            return Identity::default();
        };
        let uuid = device::get_uuid(dev).ok().map(|u| {
            let b: Vec<u8> = u.bytes.iter().map(|&c| c as u8).collect();
            let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
            format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
        });
        // SAFETY: `dev` came from cuDeviceGet.
        let attr = |a: A| unsafe { device::get_attribute(dev, a) }.ok().and_then(|v| u32::try_from(v).ok());
        let pci = (|| {
            Some(PciAddress {
                domain: attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                bus: attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                device: attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
                function: 0,
            })
        })();
        Identity { uuid, pci, pci_id: None, name: device::get_name(dev).ok(), vendor: Some(0x10de) }
    }
}

/// Without `cuda` no ordinal is CUDA's: records of CUDA sites are matched by device name.
#[cfg(not(feature = "cuda"))]
mod cuda {
    use super::Identity;

    pub(super) fn watching() -> bool {
        false
    }

    pub(super) fn identity(_ordinal: u32) -> Option<Identity> {
        None
    }
}

#[cfg(feature = "_wgpu")]
pub(crate) mod wgpu_adapters {
    //! wgpu adapters described from `AdapterInfo`, and matched to NVML devices.

    use super::{Identity, MatchedBy, PciAddress};
    use {super::find, super::Vendor, crate::monitor::GpuInfo};

    impl MatchedBy {
        /// The attribute value of how an adapter was matched.
        fn as_str(self) -> &'static str {
            match self {
                MatchedBy::Uuid => "uuid",
                MatchedBy::PciAddress => "pci_bus_id",
                MatchedBy::PciId => "pci_device_id",
                MatchedBy::Name => "name",
            }
        }
    }

    /// A wgpu adapter, the device library its vendor's GPUs are read through, and the monitored
    /// device it is when one matches: a diagnostic of the matching (lent to `gpuspan-testing`).
    #[derive(Debug, Clone, PartialEq)]
    #[non_exhaustive]
    pub struct AdapterDescription {
        /// The adapter's name.
        pub name: String,
        /// The vendor's name where the PCI vendor id is a known one, else the id in hex.
        pub vendor: String,
        /// The PCI vendor id.
        pub vendor_id: u32,
        /// The PCI device id.
        pub device_id: u32,
        /// Discrete, integrated, virtual, CPU.
        pub device_type: String,
        /// Vulkan, Metal, DX12, GL.
        pub backend: String,
        /// The driver's name.
        pub driver: String,
        /// The driver's version text.
        pub driver_info: String,
        /// Where the backend reports it (Vulkan with `VK_EXT_pci_bus_info`).
        pub pci_bus_id: Option<String>,
        /// The matching NVML device, when NVML is there and one matches (an NVIDIA adapter).
        pub nvml: Option<GpuInfo>,
        /// The matching device of whichever library reads the adapter's vendor (NVML, ROCm SMI).
        pub device: Option<GpuInfo>,
        /// How it was matched: `pci_bus_id`, `pci_device_id` or `name`.
        pub matched_by: Option<&'static str>,
        /// The device library that reads GPUs of the adapter's vendor (`NVML`, `ROCm SMI`), or
        /// why there is none (Intel, Apple and other vendors: said plainly).
        pub device_library: Result<&'static str, String>,
    }

    fn identity(info: &crate::wgpu::AdapterFacts) -> Identity {
        Identity {
            uuid: None,
            pci: PciAddress::parse(&info.pci_bus_id),
            pci_id: (info.vendor != 0 && info.device != 0).then_some((info.vendor, info.device)),
            name: Some(info.name.clone()),
            vendor: (info.vendor != 0).then_some(info.vendor),
        }
    }

    /// PCI vendor ids of GPU makers, and Vulkan's ids for vendors without one.
    fn vendor_name(id: u32) -> Option<&'static str> {
        Some(match id {
            0x10de => "NVIDIA",
            0x1002 | 0x1022 => "AMD",
            0x8086 => "Intel",
            0x106b => "Apple",
            0x13b5 => "ARM",
            0x5143 => "Qualcomm",
            0x1010 => "Imagination",
            0x14e4 => "Broadcom",
            0x144d => "Samsung",
            0x10005 => "Mesa",
            _ => return None,
        })
    }

    /// Describes `info` and finds its monitored device (the device libraries are loaded on first use).
    /// `info` is any supported wgpu major's `AdapterInfo`.
    pub fn describe_adapter(info: &impl crate::wgpu::Info) -> AdapterDescription {
        let info = &info.facts();
        let gpus = crate::monitor::imp::discover_now().unwrap_or_default();
        let found = find(&identity(info), gpus.iter());
        let device = found.map(|(i, _)| gpus[i].clone());
        AdapterDescription {
            name: info.name.clone(),
            vendor: vendor_name(info.vendor).map_or_else(|| format!("{:#06x}", info.vendor), str::to_owned),
            vendor_id: info.vendor,
            device_id: info.device,
            device_type: info.device_type.clone(),
            backend: info.backend.clone(),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            pci_bus_id: (!info.pci_bus_id.is_empty()).then(|| info.pci_bus_id.clone()),
            nvml: device.clone().filter(|d| d.vendor == "NVIDIA"),
            device,
            matched_by: found.map(|(_, by)| by.as_str()),
            device_library: Vendor::from_pci_id(info.vendor).library(),
        }
    }

    /// The identity of gpuspan's wgpu device `id`: the adapter it was registered with.
    pub(super) fn wgpu_identity(id: u32) -> Option<Identity> {
        crate::wgpu::scope::adapter_info(id).map(|info| identity(&info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::PcieLink;

    fn gpu(index: u32, name: &str, bus: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            vendor: "NVIDIA",
            uuid: format!("GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"),
            pci_bus_id: bus.into(),
            pci_device_id: 0x2330 << 16 | 0x10de,
            memory_total_bytes: 80 << 30,
            compute_capability: Some((9, 0)),
            driver_version: "580.159.04".into(),
            cuda_driver_version: Some((13, 0)),
            pcie: PcieLink::default(),
            nvlinks: Vec::new(),
            nvlink_peers: Some(Vec::new()),
        }
    }

    #[test]
    fn pci_addresses_in_every_notation() {
        let nvml = PciAddress::parse("00000000:18:00.0").unwrap();
        assert_eq!(PciAddress::parse("0000:18:00.0"), Some(nvml));
        assert_eq!(PciAddress::parse("18:00.0"), Some(nvml));
        assert_ne!(PciAddress::parse("0000:19:00.0"), Some(nvml));
        assert_eq!(PciAddress::parse(""), None);
        assert_eq!(PciAddress::parse("not:a:pci.id"), None);
        assert_eq!(PciAddress::parse("1:2:3:4.0"), None);
    }

    #[test]
    fn the_surest_key_wins_and_ambiguity_matches_nothing() {
        let gpus =
            [gpu(0, "NVIDIA H100 80GB HBM3", "00000000:18:00.0"), gpu(1, "NVIDIA H100 80GB HBM3", "00000000:2A:00.0")];
        let by_pci = Identity {
            pci: PciAddress::parse("0000:2a:00.0"),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            ..Default::default()
        };
        assert_eq!(find(&by_pci, gpus.iter()), Some((1, MatchedBy::PciAddress)));
        let by_uuid = Identity { uuid: Some(gpus[0].uuid.to_uppercase()), ..Default::default() };
        assert_eq!(find(&by_uuid, gpus.iter()), Some((0, MatchedBy::Uuid)));
        // Two GPUs of one model: neither the name nor the PCI id tells them apart.
        let by_name = Identity {
            name: Some("nvidia  h100 80gb hbm3".into()),
            pci_id: Some((0x10de, 0x2330)),
            ..Default::default()
        };
        assert_eq!(find(&by_name, gpus.iter()), None);
        assert_eq!(find(&by_name, gpus[..1].iter()), Some((0, MatchedBy::PciId)));
        let other = Identity { name: Some("llvmpipe (LLVM 15.0.6, 256 bits)".into()), ..Default::default() };
        assert_eq!(find(&other, gpus[..1].iter()), None);
    }

    #[test]
    fn the_adapters_vendor_picks_the_library_whose_gpus_it_is_matched_among() {
        let mut mi300 = gpu(1, "AMD Instinct MI300X", "00000000:C1:00.0");
        mi300.vendor = "AMD";
        mi300.pci_device_id = 0x74a1 << 16 | 0x1002;
        // An NVIDIA GPU at the same address in another notation, as a machine of both could
        // never have: the vendor alone decides between them.
        let gpus = [gpu(0, "NVIDIA H100 80GB HBM3", "0000:c1:00.0"), mi300];
        let adapter = |vendor: u32| Identity {
            pci: PciAddress::parse("0000:c1:00.0"),
            name: Some("AMD Instinct MI300X".into()),
            vendor: Some(vendor),
            ..Default::default()
        };
        assert_eq!(find(&adapter(0x1002), gpus.iter()), Some((1, MatchedBy::PciAddress)));
        assert_eq!(find(&adapter(0x10de), gpus.iter()), Some((0, MatchedBy::PciAddress)));
        assert_eq!(find(&adapter(0x8086), gpus.iter()), None, "no library reads Intel GPUs");
        assert_eq!(find(&adapter(0x106b), gpus.iter()), None, "nor Apple's");
        let unknown_vendor = Identity { vendor: None, ..adapter(0) };
        let by_name = Some((1, MatchedBy::Name));
        assert_eq!(find(&unknown_vendor, gpus.iter()), by_name, "without a vendor the address is ambiguous");
    }

    #[test]
    fn wgpu_labels_lose_their_backend_suffix() {
        assert_eq!(strip_backend("NVIDIA H200 (Vulkan)"), "NVIDIA H200");
        assert_eq!(strip_backend("llvmpipe (LLVM 15.0.6, 256 bits) (Gl)"), "llvmpipe (LLVM 15.0.6, 256 bits)");
        assert_eq!(strip_backend("wgpu device"), "wgpu device");
    }
}
