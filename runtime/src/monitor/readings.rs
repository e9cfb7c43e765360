//! The devices' readings for the capture file: each GPU's samples taken after a given time, read
//! from the sampler's history (no NVML call here). The capture file's flusher asks through the
//! core's `device_readings` hook, which `register_hooks` sets, every tenth of a second: the
//! history holds far more than that, so no sample is missed while the sampler keeps up.

use crate::record::DeviceLabel;
use gpuspan_capture::DeviceSample;

/// Every GPU's samples taken after `since_ns`, oldest first; GPUs with none are left out.
pub(super) fn since(since_ns: u64) -> Vec<(DeviceLabel, Vec<DeviceSample>)> {
    let Some(shared) = super::current() else { return Vec::new() };
    shared
        .devices()
        .iter()
        .filter_map(|slot| {
            let history = slot.lock();
            let samples: Vec<DeviceSample> =
                history.ring.iter().filter(|s| s.time_ns > since_ns).map(reading).collect();
            (!samples.is_empty()).then(|| (DeviceLabel::new(slot.info.index, slot.info.name.as_str()), samples))
        })
        .collect()
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
    use crate::monitor::testing::{h100, install};
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
        let _monitor = install(Duration::from_millis(100), vec![(h100(0), samples)]);
        crate::monitor::register_hooks();
        let all = crate::hooks::device_readings(0).expect("the monitor registered the hook");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0.name.as_ref(), "NVIDIA H100 80GB HBM3");
        assert_eq!(all[0].1.len(), 10);
        let later = crate::hooks::device_readings(1_450).unwrap();
        let times: Vec<u64> = later[0].1.iter().map(|s| s.time_ns).collect();
        assert_eq!(times, [1_500, 1_600, 1_700, 1_800, 1_900]);
        assert_eq!(later[0].1[0].gpu_utilization_pct, Some(50));
        assert_eq!(later[0].1[0].power_w, Some(105.0));
        assert!(crate::hooks::device_readings(1_900).unwrap().is_empty());
    }
}
