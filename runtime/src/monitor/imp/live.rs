//! The devices as the live feed (`gpuspan top`) shows them: each GPU's newest sample and the last
//! minute of its utilization, read from the sampler's history. No NVML call happens here; the
//! feed's thread asks through the core's `Devices::live_devices`, which the monitor implements.

use gpuspan_capture::live as msg;

/// How far back the utilization history goes.
const HISTORY_NS: u64 = 60_000_000_000;
const SECOND_NS: u64 = 1_000_000_000;

/// Every GPU the sampler found, or why there are none.
pub(super) fn devices(shared: Option<std::sync::Arc<super::Shared>>) -> Result<Vec<msg::Device>, String> {
    let Some(shared) = shared else {
        return Err("the device monitor is not running (GPUSPAN_MONITOR=off, or it was never started)".into());
    };
    if let Some(Err(e)) = &shared.lock().discovery {
        return Err(e.to_string());
    }
    Ok(shared
        .devices()
        .iter()
        .map(|slot| {
            let history = slot.lock();
            let latest = history.ring.latest();
            let now = latest.map_or(0, |s| s.time_ns);
            let info = &slot.info;
            msg::Device {
                index: info.index,
                name: info.name.clone(),
                uuid: info.uuid.clone(),
                memory_total_bytes: info.memory_total_bytes,
                pcie_max_generation: info.pcie.max_generation,
                pcie_max_width: info.pcie.max_width,
                latest: latest.map(sample),
                utilization_history: per_second(
                    history
                        .ring
                        .iter()
                        .filter(|s| s.time_ns + HISTORY_NS > now)
                        .filter_map(|s| Some((s.time_ns, s.gpu_utilization_pct?))),
                ),
            }
        })
        .collect())
}

fn sample(s: &super::Sample) -> msg::DeviceSample {
    msg::DeviceSample {
        time_ns: s.time_ns,
        gpu_utilization_pct: s.gpu_utilization_pct,
        memory_utilization_pct: s.memory_utilization_pct,
        memory_used_bytes: s.memory_used_bytes,
        memory_free_bytes: s.memory_free_bytes,
        temperature_c: s.temperature_c,
        power_w: s.power_w,
        power_limit_w: s.power_limit_w,
        sm_clock_mhz: s.sm_clock_mhz,
        memory_clock_mhz: s.memory_clock_mhz,
        pcie_tx_bytes_per_s: s.pcie_tx_bytes_per_s,
        pcie_rx_bytes_per_s: s.pcie_rx_bytes_per_s,
        pcie_generation: s.pcie_generation,
        pcie_width: s.pcie_width,
        throttle_reasons: s
            .throttle_reasons
            .map(|bits| super::throttle_reason_names(bits).into_iter().map(str::to_owned).collect()),
    }
}

/// The mean of the readings in each whole second, oldest first; readings in time order.
fn per_second(readings: impl Iterator<Item = (u64, u32)>) -> Vec<msg::UtilizationPoint> {
    let mut points: Vec<msg::UtilizationPoint> = Vec::new();
    let mut n = 0u32;
    for (time_ns, pct) in readings {
        let second = time_ns - time_ns % SECOND_NS;
        match points.last_mut() {
            Some(p) if p.time_ns == second => {
                n += 1;
                p.gpu_utilization_pct += (f64::from(pct) - p.gpu_utilization_pct) / f64::from(n);
            }
            _ => {
                n = 1;
                points.push(msg::UtilizationPoint { time_ns: second, gpu_utilization_pct: f64::from(pct) });
            }
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::imp::tests::{h100, install};
    use crate::monitor::Sample;
    use std::time::Duration;

    const T0: u64 = 1_700_000_000_000_000_000;

    #[test]
    fn the_feed_gets_the_newest_sample_and_a_minute_of_utilization() {
        // 90 s of samples, 4 a second: utilization = the second's number, throttled by power
        // in the last one.
        let samples: Vec<Sample> = (0..360u64)
            .map(|k| Sample {
                time_ns: T0 + k * 250_000_000,
                gpu_utilization_pct: Some((k / 4) as u32),
                memory_used_bytes: Some(40 << 30),
                temperature_c: Some(67),
                power_w: Some(287.0),
                power_limit_w: Some(700.0),
                throttle_reasons: Some(0x4),
                ..Sample::default()
            })
            .collect();
        let monitor = install(Duration::from_millis(250), vec![(h100(0), samples)]);
        let devices = crate::hooks::Devices::live_devices(&monitor).unwrap();
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        assert_eq!((d.name.as_str(), d.memory_total_bytes), ("NVIDIA H100 80GB HBM3", 81_559_187_456));
        assert_eq!((d.pcie_max_generation, d.pcie_max_width), (Some(5), Some(16)));
        let latest = d.latest.as_ref().unwrap();
        assert_eq!(latest.time_ns, T0 + 359 * 250_000_000);
        assert_eq!((latest.gpu_utilization_pct, latest.temperature_c), (Some(89), Some(67)));
        assert_eq!(latest.throttle_reasons.as_deref(), Some(&["sw_power_cap".to_owned()][..]));
        // The last 60 s: seconds 30..=89, each the mean of its four readings.
        let h = &d.utilization_history;
        assert_eq!(h.len(), 60, "{h:?}");
        assert_eq!((h[0].time_ns, h[0].gpu_utilization_pct), (T0 + 30 * SECOND_NS, 30.0));
        assert_eq!(h[59].gpu_utilization_pct, 89.0);
    }

    #[test]
    fn means_per_second() {
        let p = per_second([(0, 10), (500_000_000, 20), (1_000_000_000, 50), (3_200_000_000, 7)].into_iter());
        let got: Vec<(u64, f64)> = p.iter().map(|p| (p.time_ns, p.gpu_utilization_pct)).collect();
        assert_eq!(got, [(0, 15.0), (SECOND_NS, 50.0), (3 * SECOND_NS, 7.0)]);
    }
}
