//! The device side of one record: a transfer's efficiency against its PCIe link, and for calls
//! over the threshold the device's state at their time, read from the sampler's history. No
//! NVML call happens here, so exporting a span costs a lock and a binary search.

use super::{GpuInfo, NvLink, NvLinkRemote};
use crate::record::{ActivityKind, MemoryKind, Record, Value};
use crate::site::{Backend, Direction, SiteKind};

/// Why a transfer faster than its link's peak has no efficiency (`gpu_transfer.finding`).
const IMPOSSIBLE_RATE: &str =
    "bandwidth above the link's peak: the GPU records do not time the transfer, so no efficiency is given";

/// The attributes the monitor adds to `record`'s spans (empty without a sampler, or when the
/// record's device cannot be told; see docs/monitor.md):
///
/// | attribute | when |
/// |---|---|
/// | `gpu_transfer.link_efficiency`, `gpu_transfer.link` | transfers over PCIe, and copies between two GPUs over NVLink or PCIe: bandwidth ÷ the link's peak |
/// | `gpu_transfer.finding` | instead of the efficiency, where the bandwidth is above the link's peak |
/// | `gpu.device.uuid`, `gpu.device.pci_bus_id` | every call whose device is told apart |
/// | `gpu.device.uuid`, `gpu.device.sample_offset_ms` | calls over the threshold with a sample near their time |
/// | `gpu.device.sm_clock_mhz`, `gpu.device.memory_clock_mhz` | same |
/// | `gpu.device.temperature_c`, `gpu.device.power_w`, `gpu.device.power_limit_w` | same |
/// | `gpu.device.utilization`, `gpu.device.throttle_reasons` | same |
pub(crate) fn record_attributes(
    shared: Option<std::sync::Arc<super::Shared>>,
    record: &Record,
) -> Vec<(&'static str, Value)> {
    let mut a = Vec::new();
    let Some(shared) = shared else {
        return a;
    };
    let slots = shared.devices();
    let Some(slot) = super::matching::device_of(record, slots.iter().map(|s| &s.info)).map(|i| &slots[i]) else {
        return a;
    };
    // Which GPU it was, whatever CUDA_VISIBLE_DEVICES made of its number.
    a.push(("gpu.device.uuid", Value::Str(slot.info.uuid.clone().into())));
    a.push(("gpu.device.pci_bus_id", Value::Str(slot.info.pci_bus_id.clone().into())));
    if record.site.desc.kind == SiteKind::Transfer {
        let link = if crosses_link(record) {
            slot.info.pcie.peak_bytes_per_s().map(|peak| ("pcie", peak))
        } else {
            peer_copy(record, slots).and_then(|(src, dst)| peer_link(&src.info, &dst.info))
        };
        if let (Some(bw), Some((kind, peak))) = (record.bandwidth_bytes_per_s(), link) {
            a.push(("gpu_transfer.link", Value::Str(kind.into())));
            if bw <= peak {
                a.push(("gpu_transfer.link_efficiency", Value::F64(bw / peak)));
            } else {
                // Faster than the link can carry: the records do not time what crossed it. A
                // finding, never an efficiency above 100 %.
                a.push(("gpu_transfer.finding", Value::Str(IMPOSSIBLE_RATE.into())));
                crate::diagnostics::note_once(format_args!(
                    "`{}`: {:.1} GB/s over a {kind} link of {:.1} GB/s peak: {IMPOSSIBLE_RATE}",
                    record.site.desc.name,
                    bw / 1e9,
                    peak / 1e9
                ));
            }
        }
    }
    if record.duration_ns() < crate::sampling::threshold_ns(record.site) {
        return a;
    }
    let interval = record.interval();
    let middle = interval.start_ns + interval.duration_ns() / 2;
    // Rounds are an interval apart where they are cheap, further where the CPU budget spaces
    // them out: the nearest sample is the device's state at the call's time within that.
    let spacing = shared.counters.spacing(shared.config.interval);
    let tolerance = (spacing.as_nanos() as u64).saturating_mul(3) / 2 + interval.duration_ns() / 2;
    let history = slot.lock();
    let Some(s) = history.ring.nearest(middle, tolerance) else {
        return a;
    };
    // The difference first: Unix-epoch nanoseconds do not fit an f64's mantissa.
    let offset_ns = s.time_ns.wrapping_sub(middle) as i64;
    a.push(("gpu.device.sample_offset_ms", Value::F64(offset_ns as f64 / 1e6)));
    let mut int = |key, v: Option<u32>| {
        if let Some(v) = v {
            a.push((key, Value::I64(v.into())));
        }
    };
    int("gpu.device.sm_clock_mhz", s.sm_clock_mhz);
    int("gpu.device.memory_clock_mhz", s.memory_clock_mhz);
    int("gpu.device.temperature_c", s.temperature_c);
    let floats = [
        ("gpu.device.power_w", s.power_w),
        ("gpu.device.power_limit_w", s.power_limit_w),
        ("gpu.device.utilization", s.gpu_utilization_pct.map(|p| f64::from(p) / 100.0)),
    ];
    a.extend(floats.into_iter().filter_map(|(k, v)| Some((k, Value::F64(v?)))));
    if let Some(bits) = s.throttle_reasons {
        let names = super::throttle_reason_names(bits);
        let text = if names.is_empty() { "none".to_owned() } else { names.join(",") };
        a.push(("gpu.device.throttle_reasons", Value::Str(text.into())));
    }
    a
}

/// The two GPUs of a call's copies between devices, when they all went from one to the other.
fn peer_copy<'s>(
    record: &Record,
    slots: &'s [super::DeviceSlot],
) -> Option<(&'s super::DeviceSlot, &'s super::DeviceSlot)> {
    let mut pairs =
        record.activities.iter().filter_map(|act| Some((act.src_device.as_ref()?, act.dst_device.as_ref()?)));
    let (src, dst) = pairs.next()?;
    if src.id == dst.id || pairs.any(|(s, d)| s != src || d != dst) {
        return None; // two contexts of one device (no link crossed), or several pairs
    }
    // Only CUPTI reports the ends of a copy, and it numbers devices as CUDA does.
    let find = |label| super::matching::label_of(label, Backend::Cuda, slots.iter().map(|s| &s.info));
    Some((&slots[find(src)?], &slots[find(dst)?]))
}

/// The link a copy from `src` to `dst` crossed, as far as NVML tells, with its peak in bytes per
/// second in one direction. NVLink where NVML says the two reach each other over it: the links
/// of `src` that lead to `dst` or to a switch, summed (the driver spreads a peer copy over them);
/// PCIe where NVML says they do not, at the slower GPU's peak. `None` where that cannot be told:
/// NVML could not answer, or a link's speed is unknown.
pub(super) fn peer_link(src: &GpuInfo, dst: &GpuInfo) -> Option<(&'static str, f64)> {
    use super::matching::PciAddress;
    let peers = src.nvlink_peers.as_ref()?;
    let dst_bus = Some(PciAddress::parse(&dst.pci_bus_id)?);
    if !peers.iter().any(|p| PciAddress::parse(p) == dst_bus) {
        return Some(("pcie", src.pcie.peak_bytes_per_s()?.min(dst.pcie.peak_bytes_per_s()?)));
    }
    let used: Vec<&NvLink> = src
        .nvlinks
        .iter()
        .filter(|l| match &l.remote {
            NvLinkRemote::Gpu(bus) => PciAddress::parse(bus) == dst_bus,
            NvLinkRemote::Switch => true,
            _ => false,
        })
        .collect();
    let peak = used.iter().map(|l| l.bytes_per_s).sum::<Option<f64>>()?;
    (peak > 0.0).then_some(("nvlink", peak))
}

/// Whether a transfer went over the host link: not a device-to-device copy.
fn crosses_link(record: &Record) -> bool {
    if record.site.desc.direction == Some(Direction::GpuToGpu) {
        return false;
    }
    !record.activities.iter().any(|act| match &act.kind {
        ActivityKind::Copy { direction, src, dst, .. } => {
            *direction == Some(Direction::GpuToGpu) || (*src == MemoryKind::Device && *dst == MemoryKind::Device)
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::imp::tests::{h100, install};
    use crate::monitor::Sample;
    use crate::record::{DeviceLabel, GpuTiming, Interval, TimingSource};
    use crate::site::{Backend, Site, SiteDesc};
    use std::time::Duration;

    const fn site(name: &'static str, kind: SiteKind, direction: Option<Direction>) -> Site {
        Site::new(SiteDesc { direction, threshold_us: Some(100), ..crate::site::site_desc!(name, kind, Backend::Cuda) })
    }

    static UPLOAD: Site = site("upload", SiteKind::Transfer, Some(Direction::CpuToGpu));
    static COPY: Site = site("copy", SiteKind::Transfer, Some(Direction::GpuToGpu));
    static KERNEL: Site = site("kernel", SiteKind::Kernel, None);

    const T0: u64 = 1_700_000_000_000_000_000;
    const MS: u64 = 1_000_000;

    fn samples() -> Vec<Sample> {
        (0..10u32)
            .map(|k| Sample {
                time_ns: T0 + u64::from(k) * 100 * MS,
                sm_clock_mhz: Some(1000 + k),
                memory_clock_mhz: Some(2619),
                temperature_c: Some(40 + k),
                power_w: Some(100.0 + f64::from(k)),
                power_limit_w: Some(700.0),
                gpu_utilization_pct: Some(50),
                throttle_reasons: Some(if k == 4 { 0x4 } else { 0 }),
                ..Sample::default()
            })
            .collect()
    }

    fn record(site: &'static Site, start_ns: u64, busy_ns: u64, bytes: Option<u64>, device: &str) -> Record {
        let mut r = Record::new(site, 1, 0, Interval { start_ns, end_ns: start_ns + busy_ns });
        r.bytes = bytes;
        r.gpu = Some(GpuTiming {
            interval: Interval { start_ns, end_ns: start_ns + busy_ns },
            busy_ns,
            source: TimingSource::Cupti,
            clock_error_ns: 0,
            bracketed: false,
            bracket_at_exit: false,
            device: Some(DeviceLabel { id: 0, name: device.into() }),
        });
        r
    }

    fn get<'a>(a: &'a [(&'static str, Value)], key: &str) -> Option<&'a Value> {
        a.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    #[test]
    fn a_slow_transfer_carries_its_link_efficiency_and_the_nearest_sample() {
        let m = install(Duration::from_millis(100), vec![(h100(0), samples())]);
        // 64 MiB in 1.2 ms, centred 2 ms after the sample at 400 ms.
        let r = record(&UPLOAD, T0 + 401_400_000, 1_200_000, Some(64 << 20), "NVIDIA H100 80GB HBM3");
        let a = record_attributes(m.current(), &r);
        let Some(Value::F64(eff)) = get(&a, "gpu_transfer.link_efficiency") else { panic!("no efficiency: {a:?}") };
        let expected = (64u64 << 20) as f64 / 1.2e-3 / 63.015e9;
        assert!((eff - expected).abs() < 1e-3, "{eff} vs {expected}");
        assert_eq!(get(&a, "gpu.device.sm_clock_mhz"), Some(&Value::I64(1004)));
        assert_eq!(get(&a, "gpu.device.temperature_c"), Some(&Value::I64(44)));
        assert_eq!(get(&a, "gpu.device.power_w"), Some(&Value::F64(104.0)));
        assert_eq!(get(&a, "gpu.device.power_limit_w"), Some(&Value::F64(700.0)));
        assert_eq!(get(&a, "gpu.device.throttle_reasons"), Some(&Value::Str("sw_power_cap".into())));
        assert_eq!(get(&a, "gpu.device.utilization"), Some(&Value::F64(0.5)));
        assert_eq!(get(&a, "gpu.device.sample_offset_ms"), Some(&Value::F64(-2.0)));
        assert_eq!(get(&a, "gpu.device.uuid"), Some(&Value::Str(h100(0).uuid.into())));
    }

    #[test]
    fn fast_calls_get_no_snapshot_and_device_copies_no_efficiency() {
        let m = install(Duration::from_millis(100), vec![(h100(0), samples())]);
        let fast = record(&KERNEL, T0 + 300 * MS, 50_000, None, "NVIDIA H100 80GB HBM3");
        let keys: Vec<&str> = record_attributes(m.current(), &fast).iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["gpu.device.uuid", "gpu.device.pci_bus_id"], "which GPU, and nothing of its state");
        let slow = record(&KERNEL, T0 + 300 * MS, 5 * MS, None, "NVIDIA H100 80GB HBM3");
        assert_eq!(get(&record_attributes(m.current(), &slow), "gpu.device.sm_clock_mhz"), Some(&Value::I64(1003)));
        let copy = record(&COPY, T0 + 300 * MS, 5 * MS, Some(1 << 30), "NVIDIA H100 80GB HBM3");
        let a = record_attributes(m.current(), &copy);
        assert!(get(&a, "gpu_transfer.link_efficiency").is_none() && get(&a, "gpu.device.sm_clock_mhz").is_some());
    }

    #[test]
    fn no_snapshot_far_from_any_sample_or_on_an_unknown_device() {
        let m = install(Duration::from_millis(100), vec![(h100(0), samples())]);
        let late = record(&KERNEL, T0 + 5_000 * MS, 5 * MS, None, "NVIDIA H100 80GB HBM3");
        let keys: Vec<&str> = record_attributes(m.current(), &late).iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["gpu.device.uuid", "gpu.device.pci_bus_id"], "the device is known, its state then is not");
        let elsewhere = record(&KERNEL, T0 + 300 * MS, 5 * MS, None, "NVIDIA A100-SXM4-40GB");
        assert!(record_attributes(m.current(), &elsewhere).is_empty());
        // Two GPUs of one model cannot be told apart by name: nothing rather than a guess.
        let m = install(Duration::from_millis(100), vec![(h100(0), samples()), (h100(1), samples())]);
        let ambiguous = record(&KERNEL, T0 + 300 * MS, 5 * MS, None, "NVIDIA H100 80GB HBM3");
        assert!(record_attributes(m.current(), &ambiguous).is_empty());
    }

    /// 18 links at NVML's 26 562 MB/s, as on an H100 or H200 SXM board.
    fn hgx_links(remote: NvLinkRemote) -> Vec<NvLink> {
        (0..18).map(|link| NvLink { link, remote: remote.clone(), bytes_per_s: Some(26_562e6) }).collect()
    }

    #[test]
    fn a_peer_link_is_nvlink_where_nvml_says_so_else_pcie_else_unknown() {
        let (mut a, mut b) = (h100(0), h100(1));
        // Through NVSwitches: every link of the source carries the copy.
        a.nvlinks = hgx_links(NvLinkRemote::Switch);
        a.nvlink_peers = Some(vec![b.pci_bus_id.clone()]);
        let (kind, peak) = peer_link(&a, &b).expect("known");
        assert_eq!(kind, "nvlink");
        assert!((peak - 18.0 * 26_562e6).abs() < 1.0, "{peak}");
        // Direct links: only those to the destination count (lower-case bus id from another tool).
        a.nvlinks = hgx_links(NvLinkRemote::Gpu(b.pci_bus_id.to_lowercase()));
        a.nvlinks.truncate(4);
        a.nvlinks.push(NvLink { link: 4, remote: NvLinkRemote::Gpu(h100(2).pci_bus_id), bytes_per_s: Some(1e9) });
        assert_eq!(peer_link(&a, &b).map(|(k, p)| (k, p.round())), Some(("nvlink", (4.0 * 26_562e6f64).round())));
        // A link of unknown speed: no figure rather than a wrong one.
        a.nvlinks[0].bytes_per_s = None;
        assert_eq!(peer_link(&a, &b), None);
        // NVML says no NVLink between them: PCIe, at the slower of the two.
        a.nvlink_peers = Some(Vec::new());
        b.pcie.max_generation = Some(4);
        let (kind, peak) = peer_link(&a, &b).expect("known");
        assert_eq!(kind, "pcie");
        assert_eq!(Some(peak), b.pcie.peak_bytes_per_s());
        // NVML could not say.
        a.nvlink_peers = None;
        assert_eq!(peer_link(&a, &b), None);
    }

    #[test]
    fn a_copy_between_two_gpus_carries_its_nvlink_efficiency() {
        use crate::record::{Activity, DeviceLabel};
        // Two GPUs told apart by name (CUDA's identities are not there without a driver).
        let mut a = h100(0);
        let mut b = h100(1);
        b.name = "NVIDIA H200".into();
        a.nvlinks = hgx_links(NvLinkRemote::Switch);
        a.nvlink_peers = Some(vec![b.pci_bus_id.clone()]);
        let m = install(Duration::from_millis(100), vec![(a.clone(), samples()), (b.clone(), samples())]);
        let peak = 18.0 * 26_562e6;
        // 1 GiB at half the peak; CUPTI runs the copy on the destination.
        let busy = ((1u64 << 30) as f64 / (peak / 2.0) * 1e9) as u64;
        let mut r = record(&COPY, T0 + 300 * MS, busy, Some(1 << 30), "NVIDIA H200");
        let mut copy = Activity::new(
            "memcpy PtoP",
            Interval { start_ns: T0 + 300 * MS, end_ns: T0 + 300 * MS + busy },
            ActivityKind::Copy {
                bytes: 1 << 30,
                direction: Some(Direction::GpuToGpu),
                src: MemoryKind::Device,
                dst: MemoryKind::Device,
            },
        );
        copy.src_device = Some(DeviceLabel::new(0, a.name.clone()));
        copy.dst_device = Some(DeviceLabel::new(1, b.name.clone()));
        r.activities.push(copy.clone());
        let attrs = record_attributes(m.current(), &r);
        assert_eq!(get(&attrs, "gpu_transfer.link"), Some(&Value::Str("nvlink".into())));
        let Some(Value::F64(eff)) = get(&attrs, "gpu_transfer.link_efficiency") else { panic!("{attrs:?}") };
        assert!((eff - 0.5).abs() < 1e-3, "{eff}");
        assert_eq!(get(&attrs, "gpu.device.pci_bus_id"), Some(&Value::Str(b.pci_bus_id.clone().into())));
        // Three times the link's peak (what CUPTI's halves of a staged copy gave on two H200s):
        // a finding, not an efficiency above 100 %.
        let fast = r.gpu.as_mut().unwrap();
        fast.busy_ns = busy / 6;
        fast.interval.end_ns = fast.interval.start_ns + busy / 6;
        r.host.end_ns = r.host.start_ns + busy / 6;
        let attrs = record_attributes(m.current(), &r);
        assert!(get(&attrs, "gpu_transfer.link_efficiency").is_none(), "{attrs:?}");
        assert_eq!(get(&attrs, "gpu_transfer.finding"), Some(&Value::Str(IMPOSSIBLE_RATE.into())));
        // A copy between two contexts of one GPU crosses no link.
        r.activities[0].src_device = copy.dst_device.clone();
        assert!(get(&record_attributes(m.current(), &r), "gpu_transfer.link_efficiency").is_none());
    }

    #[test]
    fn the_summary_gives_each_host_device_transfer_its_link_efficiency() {
        let devices = [h100(0)];
        let peak = h100(0).pcie.peak_bytes_per_s().expect("h100 link peak");
        let summary = |site: &'static Site, bytes: u64, total_ns: u64| crate::SiteSummary {
            site,
            calls: 1,
            errors: 0,
            total_ns,
            min_ns: total_ns,
            p50_ns: total_ns,
            p99_ns: total_ns,
            max_ns: total_ns,
            host_total_ns: total_ns,
            bytes,
            sources: vec![TimingSource::Cupti],
            attributed: None,
            bracketed: false,
            bracket_at_exit: false,
            device_delta_max_bytes: None,
            rss_delta_max_bytes: None,
        };
        // Half the link's peak for one second, and a device-to-device copy that has no link.
        let half = (peak / 2.0) as u64;
        let lines = crate::monitor::imp::summary::transfer_efficiency_lines(
            &devices,
            &[summary(&UPLOAD, half, 1_000_000_000), summary(&COPY, half, 1)],
        );
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[1].starts_with("  upload: 0.50"), "{lines:?}");
        // A queue bracket's time is an upper bound: no rate, so no efficiency either.
        let bracketed = crate::SiteSummary { bracketed: true, ..summary(&UPLOAD, half, 1_000_000_000) };
        assert!(crate::monitor::imp::summary::transfer_efficiency_lines(&devices, &[bracketed]).is_empty());
    }
}
