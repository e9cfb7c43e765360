//! Link efficiency: the bandwidth of copies between host and device against the peak of the
//! device's PCIe link as the capture's device monitor knew it (format 3), per transfer row, and
//! a finding for large copies far below it.
//!
//! Only copies the GPU reported (CUPTI memcpy activities) count: they carry their device and
//! their own GPU interval. A transfer timed on the host or by a queue bracket includes other
//! waits, so a ratio of it to the link's peak would say nothing of the link.

use crate::analysis::Index;
use crate::report::Finding;
use crate::table;
use gpuspan_capture::{Activity, ActivityKind, DeviceLink, Direction, LinkPeak, MemoryKind, Record};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// Copies of at least this many bytes are judged: a smaller one is dominated by its fixed cost,
/// whatever the link.
pub const LARGE_COPY_BYTES: u64 = 1 << 20;

/// A large copy below this fraction of its link's peak is a finding.
pub const LOW_EFFICIENCY: f64 = 0.25;

/// Host↔device copies of one transfer row, per device: (bytes, GPU ns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sums(BTreeMap<u32, (u64, u64)>);

impl Sums {
    pub fn add(&mut self, device: u32, bytes: u64, ns: u64) {
        let e = self.0.entry(device).or_default();
        e.0 += bytes;
        e.1 += ns;
    }

    pub fn merge(&mut self, other: &Sums) {
        for (&device, &(bytes, ns)) in &other.0 {
            self.add(device, bytes, ns);
        }
    }

    /// (efficiency, peak in bytes/s) over the copies on devices whose peak is known: the bytes
    /// moved over the bytes the links could have moved in the copies' time. With one device
    /// that is the bandwidth over the peak; the peak is then the device's (else the time-weighted
    /// mean of the devices').
    pub fn efficiency(&self, links: &Builder) -> Option<(f64, f64)> {
        let (mut bytes, mut ns, mut could) = (0u64, 0u64, 0f64);
        for (&device, &(b, n)) in &self.0 {
            if let Some(peak) = links.pcie_peak(device) {
                bytes += b;
                ns += n;
                could += n as f64 * peak / 1e9;
            }
        }
        (ns > 0 && could > 0.0).then(|| (bytes as f64 / could, could * 1e9 / ns as f64))
    }
}

/// The large copies of one direction on one device whose peak was known when they were read.
#[derive(Debug, Clone, Copy, Default)]
struct Large {
    count: u64,
    /// Those below [`LOW_EFFICIENCY`] of the peak, their bytes and GPU time, and how many of
    /// them had pageable host memory on one side.
    low: u64,
    low_bytes: u64,
    low_ns: u64,
    low_pageable: u64,
}

/// Judges copies as they are read. Feed the link frames read so far ([`Builder::links`]) before
/// each record: a large copy read before its device's peak cannot be judged, and
/// [`Builder::needs_second_pass`] then says whether a pass with every peak known would judge it.
#[derive(Debug, Default)]
pub struct Builder {
    peaks: HashMap<u32, LinkPeak>,
    fed: usize,
    large: BTreeMap<(Direction, u32), Large>,
    /// Large copies read before their device's peak, by device.
    unjudged: BTreeMap<u32, u64>,
    /// Host↔device copies, by device.
    copies: BTreeMap<u32, u64>,
}

impl Builder {
    /// A builder that knows these peaks from the start.
    pub fn new(links: &[DeviceLink]) -> Builder {
        let mut b = Builder::default();
        b.links(links);
        b
    }

    /// Adds the link frames of `all` not fed yet (`all` grows as a file is read).
    pub fn links(&mut self, all: &[DeviceLink]) {
        for l in all.get(self.fed..).unwrap_or_default() {
            self.peaks.insert(l.device, l.peak);
        }
        self.fed = all.len();
    }

    /// Bytes per second the device's PCIe link carries at its peak, if the capture says.
    pub fn pcie_peak(&self, device: u32) -> Option<f64> {
        self.peaks.get(&device)?.pcie_bytes_per_s.filter(|p| *p > 0.0)
    }

    /// One copy activity of `record`: the device whose host link it crossed, if it did (a copy
    /// between host and device, on a device the capture names).
    pub fn copy(&mut self, record: &Record, a: &Activity) -> Option<u32> {
        let ActivityKind::Copy { bytes, direction: Some(d @ (Direction::CpuToGpu | Direction::GpuToCpu)), src, dst } =
            a.kind
        else {
            return None;
        };
        let device = a.device.or_else(|| record.gpu.as_ref()?.device)?;
        *self.copies.entry(device).or_default() += 1;
        if bytes < LARGE_COPY_BYTES {
            return Some(device);
        }
        let Some(peak) = self.pcie_peak(device) else {
            *self.unjudged.entry(device).or_default() += 1;
            return Some(device);
        };
        let ns = a.interval.duration_ns();
        let e = self.large.entry((d, device)).or_default();
        e.count += 1;
        // A copy of no measured length is not slow.
        if ns > 0 && (bytes as f64 * 1e9 / ns as f64) < LOW_EFFICIENCY * peak {
            e.low += 1;
            e.low_bytes += bytes;
            e.low_ns += ns;
            e.low_pageable += u64::from(src == MemoryKind::Pageable || dst == MemoryKind::Pageable);
        }
        Some(device)
    }

    /// Some large copies were read before their device's peak, which is known now: a second
    /// pass with [`Builder::new`] and every link frame judges them.
    pub fn needs_second_pass(&self) -> bool {
        self.unjudged.keys().any(|d| self.pcie_peak(*d).is_some())
    }

    /// One finding per direction and device with large copies below [`LOW_EFFICIENCY`].
    pub fn findings(&self, index: &Index<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        for (&(direction, device), l) in &self.large {
            let Some(peak) = self.pcie_peak(device).filter(|_| l.low > 0) else { continue };
            let link = self.peaks.get(&device).map_or_else(String::new, |p| match (p.pcie_generation, p.pcie_width) {
                (Some(g), Some(w)) => format!("PCIe gen {g} x{w}, "),
                _ => "PCIe, ".to_owned(),
            });
            let mut message = format!(
                "{} of {} {} copies of {} or more on {} ran below {:.0} % of the link's peak ({link}{})",
                l.low,
                l.count,
                direction.as_str(),
                table::bytes(LARGE_COPY_BYTES),
                index.device_label(Some(device)),
                LOW_EFFICIENCY * 100.0,
                table::bandwidth(peak),
            );
            if let Some(bw) = table::rate(l.low_bytes, l.low_ns) {
                let _ = write!(
                    message,
                    ": they moved {} at {}, {:.1} % of the peak",
                    table::bytes(l.low_bytes),
                    table::bandwidth(bw),
                    bw / peak * 100.0
                );
            }
            if l.low_pageable > 0 {
                let _ = write!(
                    message,
                    "; {} of them from or to pageable host memory, which the driver stages through a pinned buffer: pin it",
                    l.low_pageable
                );
            } else {
                message.push_str(
                    "; with pinned memory, look for other traffic on the link and its current generation and width (nvidia-smi -q)",
                );
            }
            out.push(Finding { kind: "low_link_efficiency".into(), message });
        }
        out
    }

    /// What keeps this capture from answering, if anything: no peak for a device that copied,
    /// no peak at all, or no copy the GPU reported.
    pub fn limit(&self, index: &Index<'_>) -> Option<String> {
        let unknown: Vec<String> = self
            .copies
            .keys()
            .filter(|d| self.pcie_peak(**d).is_none())
            .map(|d| index.device_label(Some(*d)))
            .collect();
        let none_known = self.peaks.values().all(|p| p.pcie_bytes_per_s.is_none());
        if none_known {
            Some("link efficiency: the link's peak is unknown: the capture holds none (captures of format 1 and 2 cannot; from format 3 a device monitor, the `nvml` feature, writes each GPU's)".into())
        } else if !unknown.is_empty() {
            Some(format!("link efficiency: the link's peak is unknown for {}", unknown.join(", ")))
        } else if self.copies.is_empty() {
            Some("link efficiency: no copy between host and device reported by the GPU (CUPTI); transfers timed on the host or by queue brackets get none".into())
        } else {
            None
        }
    }
}
