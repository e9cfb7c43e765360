//! Peak and mean of every device quantity over the whole run (not only the history the ring
//! still holds), as data and as the lines of the summary table.

use super::sampler::THROTTLE_REASONS;
use super::GpuInfo;
use super::Sample;
use crate::export::format;

/// Peak and mean of one quantity over the samples that reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Peak {
    /// The largest sample.
    pub peak: f64,
    /// The mean of the samples.
    pub mean: f64,
    /// Samples that reported it.
    pub samples: u64,
}

/// Running sum and maximum of one quantity.
#[derive(Debug, Clone, Copy, Default)]
struct Stat {
    n: u64,
    sum: f64,
    max: f64,
}

impl Stat {
    fn add(&mut self, v: Option<f64>) {
        if let Some(v) = v {
            self.max = if self.n == 0 { v } else { self.max.max(v) };
            self.n += 1;
            self.sum += v;
        }
    }

    fn peak(&self) -> Option<Peak> {
        (self.n > 0).then(|| Peak { peak: self.max, mean: self.sum / self.n as f64, samples: self.n })
    }
}

/// Everything the summary needs from every sample of one device since the sampler started.
#[derive(Debug, Clone, Default)]
pub(super) struct Totals {
    samples: u64,
    gpu_utilization: Stat,
    memory_utilization: Stat,
    memory_used: Stat,
    temperature: Stat,
    power: Stat,
    sm_clock: Stat,
    memory_clock: Stat,
    pcie_tx: Stat,
    pcie_rx: Stat,
    power_limit_w: Option<f64>,
    /// Samples that reported throttle reasons, and how many had each reason set.
    throttle_samples: u64,
    throttled: [u64; THROTTLE_REASONS.len()],
}

impl Totals {
    pub(super) fn add(&mut self, s: &Sample) {
        let f = |v: Option<u32>| v.map(f64::from);
        self.samples += 1;
        self.gpu_utilization.add(f(s.gpu_utilization_pct));
        self.memory_utilization.add(f(s.memory_utilization_pct));
        self.memory_used.add(s.memory_used_bytes.map(|b| b as f64));
        self.temperature.add(f(s.temperature_c));
        self.power.add(s.power_w);
        self.sm_clock.add(f(s.sm_clock_mhz));
        self.memory_clock.add(f(s.memory_clock_mhz));
        self.pcie_tx.add(s.pcie_tx_bytes_per_s);
        self.pcie_rx.add(s.pcie_rx_bytes_per_s);
        self.power_limit_w = s.power_limit_w.or(self.power_limit_w);
        if let Some(bits) = s.throttle_reasons {
            self.throttle_samples += 1;
            for (count, (bit, _)) in self.throttled.iter_mut().zip(THROTTLE_REASONS) {
                *count += u64::from(bits & bit != 0);
            }
        }
    }
}

/// One device over the whole run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeviceSummary {
    /// The device.
    pub gpu: GpuInfo,
    /// Samples taken.
    pub samples: u64,
    /// Percent of time a kernel ran.
    pub gpu_utilization_pct: Option<Peak>,
    /// Percent of time device memory was read or written.
    pub memory_utilization_pct: Option<Peak>,
    /// Device memory in use.
    pub memory_used_bytes: Option<Peak>,
    /// GPU die temperature, °C.
    pub temperature_c: Option<Peak>,
    /// Power drawn, W.
    pub power_w: Option<Peak>,
    /// The last enforced power limit, W.
    pub power_limit_w: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<Peak>,
    /// Memory clock, MHz.
    pub memory_clock_mhz: Option<Peak>,
    /// PCIe throughput to the host.
    pub pcie_tx_bytes_per_s: Option<Peak>,
    /// PCIe throughput from the host.
    pub pcie_rx_bytes_per_s: Option<Peak>,
    /// Bytes the GPU sent over PCIe while the sampler ran.
    pub pcie_tx_bytes: f64,
    /// Bytes the GPU received over PCIe while the sampler ran.
    pub pcie_rx_bytes: f64,
    /// Each throttle reason seen, with the fraction of samples in which it was set.
    pub throttled: Vec<(&'static str, f64)>,
}

/// Every sampled device's peaks and means so far (empty without a sampler or without a device
/// library).
pub fn device_summaries() -> Vec<DeviceSummary> {
    summaries_of(super::current())
}

fn summaries_of(shared: Option<std::sync::Arc<super::Shared>>) -> Vec<DeviceSummary> {
    let Some(shared) = shared else {
        return Vec::new();
    };
    shared
        .devices()
        .iter()
        .map(|slot| {
            let h = slot.lock();
            let t = &h.totals;
            DeviceSummary {
                gpu: slot.info.clone(),
                samples: t.samples,
                gpu_utilization_pct: t.gpu_utilization.peak(),
                memory_utilization_pct: t.memory_utilization.peak(),
                memory_used_bytes: t.memory_used.peak(),
                temperature_c: t.temperature.peak(),
                power_w: t.power.peak(),
                power_limit_w: t.power_limit_w,
                sm_clock_mhz: t.sm_clock.peak(),
                memory_clock_mhz: t.memory_clock.peak(),
                pcie_tx_bytes_per_s: t.pcie_tx.peak(),
                pcie_rx_bytes_per_s: t.pcie_rx.peak(),
                pcie_tx_bytes: h.io_tx_bytes,
                pcie_rx_bytes: h.io_rx_bytes,
                throttled: THROTTLE_REASONS
                    .iter()
                    .zip(t.throttled)
                    .filter(|(_, n)| *n > 0)
                    .map(|((_, name), n)| (*name, n as f64 / t.throttle_samples.max(1) as f64))
                    .collect(),
            }
        })
        .collect()
}

/// The device part of the summary table: per device, peak / mean of each quantity. Empty when
/// no sampler ran or no device library was found (that is said in the notes).
pub(super) fn summary_lines(shared: Option<std::sync::Arc<super::Shared>>) -> Vec<String> {
    let (Some(stats), devices) = (shared.as_deref().map(super::stats_of), summaries_of(shared)) else {
        return Vec::new();
    };
    if devices.is_empty() {
        return Vec::new();
    }
    let cost = match stats.core_fraction() {
        Some(f) => format!("; sampler CPU {:.3} % of one core", f * 100.0),
        None => String::new(),
    };
    // The libraries read, by the vendors of the devices found.
    let mut libraries = Vec::new();
    for d in &devices {
        let library = super::vendor::library_of(&d.gpu);
        if !libraries.contains(&library) {
            libraries.push(library);
        }
    }
    let mut lines = vec![format!(
        "devices ({}: {} rounds over {:.1} s, one every {} ms on average, grid {} ms{cost}), peak / mean:",
        libraries.join(", "),
        stats.rounds,
        stats.wall.as_secs_f64(),
        stats.mean_spacing.as_millis(),
        stats.interval.as_millis(),
    )];
    for (i, d) in devices.iter().enumerate() {
        lines.extend(device_lines(d, super::matching::cuda_ordinal(i, devices.iter().map(|d| &d.gpu))));
    }
    lines
}

/// One device's lines. NVML numbers it in PCI order, the records by this process's CUDA
/// ordinal (`CUDA_VISIBLE_DEVICES` reorders them): where the two differ, both are given.
fn device_lines(d: &DeviceSummary, cuda_ordinal: Option<u32>) -> Vec<String> {
    let g = &d.gpu;
    let link = match (g.pcie.max_generation, g.pcie.max_width, g.pcie.peak_bytes_per_s()) {
        (Some(gen), Some(w), Some(peak)) => format!("PCIe gen{gen} x{w}, {} peak", format::bandwidth(peak)),
        _ => "PCIe link unknown".to_owned(),
    };
    let link = match (g.nvlinks.len(), g.nvlinks.iter().map(|l| l.bytes_per_s).sum::<Option<f64>>()) {
        (0, _) => link,
        (n, Some(total)) => format!("{link}; {n} NVLinks, {} in all", format::bandwidth(total)),
        (n, None) => format!("{link}; {n} NVLinks"),
    };
    let here = match cuda_ordinal {
        Some(o) if o != g.index => format!(" (CUDA device {o} here)"),
        _ => String::new(),
    };
    let mut lines =
        vec![format!("  GPU {}{here} {} ({link}; {}; {} samples)", g.index, g.name, g.pci_bus_id, d.samples)];
    let pair =
        |p: Option<Peak>, show: &dyn Fn(f64) -> String| p.map(|p| format!("{} / {}", show(p.peak), show(p.mean)));
    let pct = |v: f64| format!("{v:.0} %");
    let mut first = Vec::new();
    first.extend(pair(d.gpu_utilization_pct, &pct).map(|s| format!("utilization {s}")));
    first.extend(pair(d.memory_utilization_pct, &pct).map(|s| format!("memory busy {s}")));
    first.extend(
        pair(d.memory_used_bytes, &|b| format::bytes(b as u64))
            .map(|s| format!("VRAM used {s} of {}", format::bytes(g.memory_total_bytes))),
    );
    let mut second = Vec::new();
    second.extend(pair(d.temperature_c, &|v| format!("{v:.0}")).map(|s| format!("temperature {s} °C")));
    if let Some(s) = pair(d.power_w, &|v| format!("{v:.0}")) {
        let limit = d.power_limit_w.map_or_else(String::new, |l| format!(" (limit {l:.0} W)"));
        second.push(format!("power {s} W{limit}"));
    }
    second.extend(pair(d.sm_clock_mhz, &|v| format!("{v:.0}")).map(|s| format!("SM clock {s} MHz")));
    second.extend(pair(d.memory_clock_mhz, &|v| format!("{v:.0}")).map(|s| format!("memory clock {s} MHz")));
    let mut third = Vec::new();
    third.extend(pair(d.pcie_rx_bytes_per_s, &format::bandwidth).map(|s| format!("PCIe to GPU {s}")));
    third.extend(pair(d.pcie_tx_bytes_per_s, &format::bandwidth).map(|s| format!("from GPU {s}")));
    if !d.throttled.is_empty() {
        let reasons: Vec<String> = d.throttled.iter().map(|(name, f)| format!("{name} {:.0} %", f * 100.0)).collect();
        third.push(format!("clocks held back by {} of samples", reasons.join(", ")));
    }
    for part in [first, second, third] {
        if !part.is_empty() {
            lines.push(format!("    {}", part.join(", ")));
        }
    }
    lines
}

/// One line per host↔device transfer site: its bandwidth against the PCIe link's peak, when
/// the process sees exactly one GPU (with several, a site's transfers cannot be assigned to one
/// link from the aggregates; the spans carry `gpu_transfer.link_efficiency` per call instead).
pub(crate) fn transfer_efficiency_lines(devices: &[super::GpuInfo], sites: &[crate::SiteSummary]) -> Vec<String> {
    let [gpu] = devices else { return Vec::new() };
    let Some(peak) = gpu.pcie.peak_bytes_per_s() else { return Vec::new() };
    let host_device = |s: &crate::SiteSummary| {
        s.site.desc.kind == crate::SiteKind::Transfer && s.site.desc.direction != Some(crate::Direction::GpuToGpu)
    };
    let rows: Vec<String> = sites
        .iter()
        .filter(|s| host_device(s))
        .filter_map(|s| {
            Some(format!(
                "  {}: {:.2} ({:.2} GB/s)",
                s.site.desc.name,
                s.bandwidth_bytes_per_s()? / peak,
                s.bandwidth_bytes_per_s()? / 1e9
            ))
        })
        .collect();
    if rows.is_empty() {
        return rows;
    }
    let mut out = vec![format!(
        "link efficiency of transfers (bandwidth / PCIe peak of {} at {:.2} GB/s):",
        gpu.name,
        peak / 1e9
    )];
    out.extend(rows);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::PcieLink;

    #[test]
    fn peaks_and_means_skip_what_was_not_reported() {
        let mut t = Totals::default();
        for (util, power) in [(Some(10), Some(100.0)), (Some(90), None), (None, Some(300.0))] {
            t.add(&Sample {
                gpu_utilization_pct: util,
                power_w: power,
                throttle_reasons: Some(0x1),
                ..Sample::default()
            });
        }
        assert_eq!(t.samples, 3);
        assert_eq!(t.gpu_utilization.peak(), Some(Peak { peak: 90.0, mean: 50.0, samples: 2 }));
        assert_eq!(t.power.peak(), Some(Peak { peak: 300.0, mean: 200.0, samples: 2 }));
        assert_eq!(t.temperature.peak(), None);
        assert_eq!(t.throttled[0], 3);
    }

    #[test]
    fn a_device_reads_in_three_lines() {
        let d = DeviceSummary {
            gpu: GpuInfo {
                index: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                vendor: "NVIDIA",
                uuid: "GPU-1".into(),
                pci_bus_id: "00000000:18:00.0".into(),
                pci_device_id: 0,
                memory_total_bytes: 80 << 30,
                compute_capability: Some((9, 0)),
                driver_version: "580".into(),
                cuda_driver_version: None,
                pcie: PcieLink { max_generation: Some(5), max_width: Some(16), ..PcieLink::default() },
                nvlinks: Vec::new(),
                nvlink_peers: Some(Vec::new()),
            },
            samples: 10,
            gpu_utilization_pct: Some(Peak { peak: 100.0, mean: 42.0, samples: 10 }),
            memory_utilization_pct: None,
            memory_used_bytes: Some(Peak { peak: (2u64 << 30) as f64, mean: (1u64 << 30) as f64, samples: 10 }),
            temperature_c: Some(Peak { peak: 45.0, mean: 40.0, samples: 10 }),
            power_w: Some(Peak { peak: 310.0, mean: 120.0, samples: 10 }),
            power_limit_w: Some(700.0),
            sm_clock_mhz: None,
            memory_clock_mhz: None,
            pcie_tx_bytes_per_s: None,
            pcie_rx_bytes_per_s: Some(Peak { peak: 50e9, mean: 8e9, samples: 10 }),
            pcie_tx_bytes: 0.0,
            pcie_rx_bytes: 0.0,
            throttled: vec![("gpu_idle", 0.6)],
        };
        let mut d2 = d.clone();
        d2.gpu.nvlinks = (0..18)
            .map(|link| crate::monitor::NvLink {
                link,
                remote: crate::monitor::NvLinkRemote::Switch,
                bytes_per_s: Some(26_562e6),
            })
            .collect();
        assert!(
            device_lines(&d2, None)[0].contains("63.02 GB/s peak; 18 NVLinks, 478.12 GB/s in all; 0000"),
            "{:?}",
            device_lines(&d2, None)
        );
        let lines = device_lines(&d, None);
        assert_eq!(
            lines[0],
            "  GPU 0 NVIDIA H100 80GB HBM3 (PCIe gen5 x16, 63.02 GB/s peak; 00000000:18:00.0; 10 samples)"
        );
        assert_eq!(lines[1], "    utilization 100 % / 42 %, VRAM used 2.0 GiB / 1.0 GiB of 80.0 GiB");
        assert_eq!(lines[2], "    temperature 45 / 40 °C, power 310 / 120 W (limit 700 W)");
        assert_eq!(lines[3], "    PCIe to GPU 50.00 GB/s / 8.00 GB/s, clocks held back by gpu_idle 60 % of samples");
        // Under CUDA_VISIBLE_DEVICES=1,0 this board is the process's CUDA device 1: said, since
        // its records call it device 1; the same number is not repeated.
        assert!(device_lines(&d, Some(1))[0].starts_with("  GPU 0 (CUDA device 1 here) NVIDIA H100 80GB HBM3 ("));
        assert_eq!(device_lines(&d, Some(0))[0], lines[0]);
    }
}
