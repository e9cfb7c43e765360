//! The device side of one record: a transfer's efficiency against its PCIe link, and for calls
//! over the threshold the device's state at their time, read from the sampler's history. No
//! NVML call happens here, so exporting a span costs a lock and a binary search.

use crate::record::{ActivityKind, MemoryKind, Record, Value};
use crate::site::{Direction, SiteKind};

/// The attributes the monitor adds to `record`'s spans (empty without a sampler, or when the
/// record's device cannot be told; see docs/monitor.md):
///
/// | attribute | when |
/// |---|---|
/// | `gpu_transfer.link_efficiency` | transfers over PCIe: bandwidth ÷ the link's peak |
/// | `gpu.device.uuid`, `gpu.device.sample_offset_ms` | calls over the threshold with a sample near their time |
/// | `gpu.device.sm_clock_mhz`, `gpu.device.memory_clock_mhz` | same |
/// | `gpu.device.temperature_c`, `gpu.device.power_w`, `gpu.device.power_limit_w` | same |
/// | `gpu.device.utilization`, `gpu.device.throttle_reasons` | same |
pub(crate) fn record_attributes(record: &Record) -> Vec<(&'static str, Value)> {
    let mut a = Vec::new();
    let Some(shared) = super::current() else {
        return a;
    };
    let slots = shared.devices();
    let Some(slot) = super::matching::device_of(record, slots.iter().map(|s| &s.info)).map(|i| &slots[i]) else {
        return a;
    };
    if record.site.desc.kind == SiteKind::Transfer && crosses_link(record) {
        if let (Some(bw), Some(peak)) = (record.bandwidth_bytes_per_s(), slot.info.pcie.peak_bytes_per_s()) {
            a.push(("gpu_transfer.link_efficiency", Value::F64(bw / peak)));
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
    a.push(("gpu.device.uuid", Value::Str(slot.info.uuid.clone().into())));
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
    use crate::monitor::testing::{h100, install};
    use crate::monitor::Sample;
    use crate::record::{DeviceLabel, GpuTiming, Interval, TimingSource};
    use crate::site::{Backend, Site, SiteDesc};
    use std::time::Duration;

    const fn site(name: &'static str, kind: SiteKind, direction: Option<Direction>) -> Site {
        Site::new(SiteDesc {
            name,
            function: name,
            kind,
            backend: Backend::Cuda,
            module_path: "tests",
            file: "snapshot.rs",
            line: 1,
            direction,
            threshold_us: Some(100),
            trace_all: false,
            track_memory: false,
        })
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
            device: Some(DeviceLabel { id: 0, name: device.into() }),
        });
        r
    }

    fn get<'a>(a: &'a [(&'static str, Value)], key: &str) -> Option<&'a Value> {
        a.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    #[test]
    fn a_slow_transfer_carries_its_link_efficiency_and_the_nearest_sample() {
        let _m = install(Duration::from_millis(100), vec![(h100(0), samples())]);
        // 64 MiB in 1.2 ms, centred 2 ms after the sample at 400 ms.
        let r = record(&UPLOAD, T0 + 401_400_000, 1_200_000, Some(64 << 20), "NVIDIA H100 80GB HBM3");
        let a = record_attributes(&r);
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
        let _m = install(Duration::from_millis(100), vec![(h100(0), samples())]);
        let fast = record(&KERNEL, T0 + 300 * MS, 50_000, None, "NVIDIA H100 80GB HBM3");
        assert!(record_attributes(&fast).is_empty());
        let slow = record(&KERNEL, T0 + 300 * MS, 5 * MS, None, "NVIDIA H100 80GB HBM3");
        assert_eq!(get(&record_attributes(&slow), "gpu.device.sm_clock_mhz"), Some(&Value::I64(1003)));
        let copy = record(&COPY, T0 + 300 * MS, 5 * MS, Some(1 << 30), "NVIDIA H100 80GB HBM3");
        let a = record_attributes(&copy);
        assert!(get(&a, "gpu_transfer.link_efficiency").is_none() && get(&a, "gpu.device.sm_clock_mhz").is_some());
    }

    #[test]
    fn no_snapshot_far_from_any_sample_or_on_an_unknown_device() {
        let _m = install(Duration::from_millis(100), vec![(h100(0), samples())]);
        let late = record(&KERNEL, T0 + 5_000 * MS, 5 * MS, None, "NVIDIA H100 80GB HBM3");
        assert!(record_attributes(&late).is_empty());
        let elsewhere = record(&KERNEL, T0 + 300 * MS, 5 * MS, None, "NVIDIA A100-SXM4-40GB");
        assert!(record_attributes(&elsewhere).is_empty());
        // Two GPUs of one model cannot be told apart by name: nothing rather than a guess.
        drop(_m);
        let _m = install(Duration::from_millis(100), vec![(h100(0), samples()), (h100(1), samples())]);
        let ambiguous = record(&KERNEL, T0 + 300 * MS, 5 * MS, None, "NVIDIA H100 80GB HBM3");
        assert!(record_attributes(&ambiguous).is_empty());
    }

    #[test]
    fn the_summary_gives_each_host_device_transfer_its_link_efficiency() {
        let _m = install(Duration::from_millis(100), vec![(h100(0), Vec::new())]);
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
            bracketed: false,
            device_delta_max_bytes: None,
            rss_delta_max_bytes: None,
        };
        // Half the link's peak for one second, and a device-to-device copy that has no link.
        let half = (peak / 2.0) as u64;
        let lines = crate::monitor::summary::transfer_efficiency_lines(&[
            summary(&UPLOAD, half, 1_000_000_000),
            summary(&COPY, half, 1),
        ]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[1].starts_with("  upload: 0.50"), "{lines:?}");
    }
}
