//! The device monitor's readings over the capture.

use super::{Report, Units};
use crate::analysis::Index;
use crate::table::Table;
use gpuspan_capture::Capture;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a device monitor (NVML) read over the capture: mean and peak of each counter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadingsRow {
    pub device: String,
    pub samples: u64,
    pub gpu_utilization_pct: Option<(f64, f64)>,
    pub memory_used_bytes: Option<(f64, f64)>,
    pub power_w: Option<(f64, f64)>,
    pub sm_clock_mhz: Option<(f64, f64)>,
    pub pcie_rx_bytes_per_s: Option<(f64, f64)>,
    pub pcie_tx_bytes_per_s: Option<(f64, f64)>,
}

/// (mean, max) of the values present.
fn mean_max(values: impl Iterator<Item = Option<f64>>) -> Option<(f64, f64)> {
    let (mut n, mut sum, mut max) = (0u64, 0.0, f64::MIN);
    for v in values.flatten() {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| (sum / n as f64, max))
}

pub(super) fn rows(capture: &Capture, index: &Index<'_>) -> Vec<ReadingsRow> {
    let mut by_device: BTreeMap<u32, Vec<&gpuspan_capture::DeviceSample>> = BTreeMap::new();
    for s in &capture.samples {
        by_device.entry(s.device).or_default().extend(&s.samples);
    }
    by_device
        .into_iter()
        .map(|(device, v)| ReadingsRow {
            device: index.device_label(Some(device)),
            samples: v.len() as u64,
            gpu_utilization_pct: mean_max(v.iter().map(|s| s.gpu_utilization_pct.map(f64::from))),
            memory_used_bytes: mean_max(v.iter().map(|s| s.memory_used_bytes.map(|b| b as f64))),
            power_w: mean_max(v.iter().map(|s| s.power_w)),
            sm_clock_mhz: mean_max(v.iter().map(|s| s.sm_clock_mhz.map(f64::from))),
            pcie_rx_bytes_per_s: mean_max(v.iter().map(|s| s.pcie_rx_bytes_per_s)),
            pcie_tx_bytes_per_s: mean_max(v.iter().map(|s| s.pcie_tx_bytes_per_s)),
        })
        .collect()
}

impl Report {
    pub fn readings_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "device".into(),
            "samples".into(),
            "util % mean/max".into(),
            u.head("memory used max", "B"),
            "power W mean/max".into(),
            "SM MHz max".into(),
            u.head("PCIe rx mean", "B/s"),
            u.head("PCIe tx mean", "B/s"),
        ];
        let pair = |v: Option<(f64, f64)>| v.map_or_else(|| "-".into(), |(m, x)| format!("{m:.0}/{x:.0}"));
        for d in &self.readings {
            t.row(vec![
                d.device.clone(),
                d.samples.to_string(),
                pair(d.gpu_utilization_pct),
                d.memory_used_bytes.map_or_else(|| "-".into(), |(_, x)| u.bytes(x as u64)),
                pair(d.power_w),
                d.sm_clock_mhz.map_or_else(|| "-".into(), |(_, x)| format!("{x:.0}")),
                u.rate(d.pcie_rx_bytes_per_s.map(|p| p.0)),
                u.rate(d.pcie_tx_bytes_per_s.map(|p| p.0)),
            ]);
        }
        t
    }
}
