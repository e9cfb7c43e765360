//! The devices' readings for the capture file: each GPU's samples taken after a given time, read
//! from the sampler's history, and its links' peaks from discovery (no NVML call here). The capture file's flusher asks through the
//! core's `Devices::readings`, which the monitor implements, every tenth of a second: the
//! history holds far more than that, so no sample is missed while the sampler keeps up.

use crate::hooks::Readings;
use crate::record::DeviceLabel;
use gpuspan_capture::{DeviceSample, LinkPeak};

/// Every GPU the sampler found: its samples taken after `since_ns`, oldest first (maybe none),
/// and its links' peaks.
pub(super) fn since(shared: Option<std::sync::Arc<super::Shared>>, since_ns: u64) -> Vec<Readings> {
    let Some(shared) = shared else { return Vec::new() };
    shared
        .devices()
        .iter()
        .map(|slot| {
            let samples = slot.lock().ring.iter().filter(|s| s.time_ns > since_ns).map(reading).collect();
            Readings {
                device: DeviceLabel::new(slot.info.index, slot.info.name.as_str()),
                link: link(&slot.info),
                samples,
            }
        })
        .collect()
}

/// The peaks discovery found; `None` when it found neither a PCIe generation and width nor an
/// NVLink speed. NVLink's is the sum over the active links, as the summary gives it.
fn link(info: &super::GpuInfo) -> Option<LinkPeak> {
    let p = &info.pcie;
    let nvlink = (!info.nvlinks.is_empty()).then(|| info.nvlinks.iter().map(|l| l.bytes_per_s).sum()).flatten();
    let peak = LinkPeak {
        pcie_generation: p.max_generation,
        pcie_width: p.max_width,
        pcie_bytes_per_s: p.peak_bytes_per_s(),
        nvlink_bytes_per_s: nvlink,
    };
    (peak != LinkPeak::default()).then_some(peak)
}

fn reading(s: &super::Sample) -> DeviceSample {
    DeviceSample {
        time_ns: s.time_ns,
        gpu_utilization_pct: s.gpu_utilization_pct,
        memory_utilization_pct: s.memory_utilization_pct,
        memory_used_bytes: s.memory_used_bytes,
        power_w: s.power_w,
        sm_clock_mhz: s.sm_clock_mhz,
        memory_clock_mhz: s.memory_clock_mhz,
        pcie_tx_bytes_per_s: s.pcie_tx_bytes_per_s,
        pcie_rx_bytes_per_s: s.pcie_rx_bytes_per_s,
        temperature_c: s.temperature_c,
    }
}

#[cfg(test)]
mod tests {
    use crate::hooks::Devices;
    use crate::monitor::imp::tests::{h100, install};
    use crate::monitor::Sample;
    use std::time::Duration;

    #[test]
    fn readings_after_a_time_come_once_in_time_order() {
        let samples: Vec<Sample> = (0..10u64)
            .map(|k| Sample {
                time_ns: 1_000 + k * 100,
                gpu_utilization_pct: Some(k as u32 * 10),
                power_w: Some(100.0 + k as f64),
                pcie_rx_bytes_per_s: Some(1e9),
                ..Sample::default()
            })
            .collect();
        let monitor = install(Duration::from_millis(100), vec![(h100(0), samples)]);
        let all = monitor.readings(0);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].device.name.as_ref(), "NVIDIA H100 80GB HBM3");
        assert_eq!(all[0].samples.len(), 10);
        let later = monitor.readings(1_450);
        let times: Vec<u64> = later[0].samples.iter().map(|s| s.time_ns).collect();
        assert_eq!(times, [1_500, 1_600, 1_700, 1_800, 1_900]);
        assert_eq!(later[0].samples[0].gpu_utilization_pct, Some(50));
        assert_eq!(later[0].samples[0].power_w, Some(105.0));
        let none = monitor.readings(1_900);
        assert!(none[0].samples.is_empty(), "no reading twice; the device stays, for its link");
    }

    #[test]
    fn the_link_peaks_come_from_discovery() {
        use crate::monitor::{NvLink, NvLinkRemote, PcieLink};
        let mut sxm = h100(1);
        sxm.nvlinks =
            (0..18).map(|link| NvLink { link, remote: NvLinkRemote::Switch, bytes_per_s: Some(25e9) }).collect();
        let mut bare = h100(2);
        bare.pcie = PcieLink::default();
        let mut half_known = h100(3);
        half_known.pcie = PcieLink { max_generation: Some(9), max_width: Some(16), ..PcieLink::default() };
        let monitor = install(
            Duration::from_millis(100),
            vec![(h100(0), vec![]), (sxm, vec![]), (bare, vec![]), (half_known, vec![])],
        );
        let all = monitor.readings(0);
        let links: Vec<_> = all.iter().map(|r| (r.device.id, r.link)).collect();
        let gen5 = h100(0).pcie.peak_bytes_per_s().expect("gen 5 x16");
        assert!((gen5 - 63.015e9).abs() < 0.001e9, "{gen5}");
        let pcie = |bytes_per_s, nvlink| gpuspan_capture::LinkPeak {
            pcie_generation: Some(5),
            pcie_width: Some(16),
            pcie_bytes_per_s: bytes_per_s,
            nvlink_bytes_per_s: nvlink,
        };
        assert_eq!(links[0], (0, Some(pcie(Some(gen5), None))));
        assert_eq!(links[1], (1, Some(pcie(Some(gen5), Some(18.0 * 25e9)))));
        assert_eq!(links[2], (2, None), "a device that reports no link has no peak");
        let unknown_generation = links[3].1.expect("generation and width are still said");
        assert_eq!((unknown_generation.pcie_generation, unknown_generation.pcie_bytes_per_s), (Some(9), None));
    }
}
