//! Device metrics, named after the hardware semantic conventions (`hw.gpu.*`, `hw.power`,
//! `hw.temperature`) where they have a name, and `gpuspan.gpu.*` where they have none (clocks,
//! power limit, throttling).
//!
//! They are offered to whatever exports metrics (`init` registers [`gauges`]; the OTLP export
//! makes observable instruments of them): whenever its reader collects, each one reads the
//! sampler's newest sample. Nothing is recorded on the program's threads.
//!
//! | metric | instrument, unit | value |
//! |---|---|---|
//! | `hw.gpu.utilization` | gauge, 1 | share of time a kernel ran (`hw.gpu.task = general`) |
//! | `hw.gpu.memory.utilization` | gauge, 1 | VRAM used ÷ VRAM total |
//! | `hw.gpu.memory.usage`, `hw.gpu.memory.limit` | up-down counter, By | VRAM used, VRAM total |
//! | `hw.power` | gauge, W | power draw |
//! | `hw.temperature` | gauge, Cel | GPU die temperature |
//! | `hw.gpu.io` | counter, By | PCIe bytes since the sampler started, `network.io.direction` = `transmit` / `receive` |
//! | `gpuspan.gpu.memory.free` | up-down counter, By | VRAM free |
//! | `gpuspan.gpu.memory_controller.utilization` | gauge, 1 | share of time device memory was read or written |
//! | `gpuspan.gpu.power.limit` | gauge, W | enforced power limit |
//! | `gpuspan.gpu.clock.sm`, `gpuspan.gpu.clock.memory` | gauge, MHz | clocks |
//! | `gpuspan.gpu.throttled` | gauge, 1 | 1 while `gpuspan.gpu.throttle_reason` holds the clocks back, else 0 |

use super::sampler::THROTTLE_REASONS;
use super::GpuInfo;
use super::Sample;
use crate::hooks::gauges::{Gauge, GaugeKind, Observe};
use crate::record::Value;

/// A data point's value and attributes, as the exporter takes them.
type Emit<'a> = &'a mut dyn FnMut(f64, &[(&'static str, Value)]);

/// What one device shows at collection time.
struct View {
    attributes: Vec<(&'static str, Value)>,
    info: GpuInfo,
    latest: Option<Sample>,
    /// Bytes sent and received over PCIe since the sampler started.
    io: (f64, f64),
}

/// The identity every device metric carries: `hw.id` (the UUID), `hw.type`, `hw.name`,
/// `hw.vendor`, `hw.driver_version`.
fn attributes(g: &GpuInfo) -> Vec<(&'static str, Value)> {
    vec![
        ("hw.id", Value::Str(g.uuid.clone().into())),
        ("hw.type", Value::Str("gpu".into())),
        ("hw.name", Value::Str(g.name.clone().into())),
        ("hw.vendor", Value::Str(g.vendor.into())),
        ("hw.driver_version", Value::Str(g.driver_version.clone().into())),
    ]
}

fn views() -> Vec<View> {
    let Some(shared) = super::current() else {
        return Vec::new();
    };
    shared
        .devices()
        .iter()
        .map(|slot| {
            let h = slot.lock();
            View {
                attributes: attributes(&slot.info),
                info: slot.info.clone(),
                latest: h.ring.latest().cloned(),
                io: (h.io_tx_bytes, h.io_rx_bytes),
            }
        })
        .collect()
}

/// Emits `value` of each device's newest sample, with `extra` attributes.
fn each(emit: Emit<'_>, extra: &[(&'static str, Value)], value: impl Fn(&View, &Sample) -> Option<f64>) {
    for v in views() {
        let Some(s) = &v.latest else { continue };
        if let Some(x) = value(&v, s) {
            let mut a = v.attributes.clone();
            a.extend_from_slice(extra);
            emit(x, &a);
        }
    }
}

fn ratio(pct: Option<u32>) -> Option<f64> {
    pct.map(|p| f64::from(p) / 100.0)
}

fn bytes(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64)
}

const fn gauge(
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    kind: GaugeKind,
    observe: Observe,
) -> Gauge {
    Gauge { name, unit, description, kind, observe }
}

/// The device metrics. The readings come from the process's sampler, so they stay empty until
/// it has found devices.
pub(crate) fn gauges() -> Vec<Gauge> {
    use GaugeKind::*;
    vec![
        gauge("hw.gpu.utilization", "1", "Fraction of time one or more kernels ran on the GPU", F64Gauge, |e| {
            each(e, &[("hw.gpu.task", Value::Str("general".into()))], |_, s| ratio(s.gpu_utilization_pct))
        }),
        gauge("hw.gpu.memory.utilization", "1", "Fraction of GPU memory used", F64Gauge, |e| {
            each(e, &[], |v, s| {
                let total = v.info.memory_total_bytes;
                s.memory_used_bytes.filter(|_| total > 0).map(|u| u as f64 / total as f64)
            })
        }),
        gauge("hw.gpu.memory.usage", "By", "GPU memory used", I64UpDownCounter, |e| {
            each(e, &[], |_, s| bytes(s.memory_used_bytes))
        }),
        gauge("hw.gpu.memory.limit", "By", "GPU memory in total", I64UpDownCounter, |e| {
            each(e, &[], |v, _| bytes(Some(v.info.memory_total_bytes)))
        }),
        gauge("hw.power", "W", "Power drawn by the GPU", F64Gauge, |e| each(e, &[], |_, s| s.power_w)),
        gauge("hw.temperature", "Cel", "GPU die temperature", F64Gauge, |e| {
            each(e, &[], |_, s| s.temperature_c.map(f64::from))
        }),
        gauge(
            "hw.gpu.io",
            "By",
            "Bytes the GPU transmitted and received over PCIe since gpuspan's sampler started",
            U64Counter,
            |e| {
                each(e, &[("network.io.direction", Value::Str("transmit".into()))], |v, _| Some(v.io.0.trunc()));
                each(e, &[("network.io.direction", Value::Str("receive".into()))], |v, _| Some(v.io.1.trunc()));
            },
        ),
        gauge("gpuspan.gpu.memory.free", "By", "GPU memory free", I64UpDownCounter, |e| {
            each(e, &[], |_, s| bytes(s.memory_free_bytes))
        }),
        gauge(
            "gpuspan.gpu.memory_controller.utilization",
            "1",
            "Fraction of time device memory was read or written",
            F64Gauge,
            |e| each(e, &[], |_, s| ratio(s.memory_utilization_pct)),
        ),
        gauge("gpuspan.gpu.power.limit", "W", "Enforced power limit of the GPU", F64Gauge, |e| {
            each(e, &[], |_, s| s.power_limit_w)
        }),
        gauge("gpuspan.gpu.clock.sm", "MHz", "SM clock", F64Gauge, |e| {
            each(e, &[], |_, s| s.sm_clock_mhz.map(f64::from))
        }),
        gauge("gpuspan.gpu.clock.memory", "MHz", "Memory clock", F64Gauge, |e| {
            each(e, &[], |_, s| s.memory_clock_mhz.map(f64::from))
        }),
        gauge("gpuspan.gpu.throttled", "1", "1 while the reason holds the GPU's clocks back, else 0", I64Gauge, |e| {
            for (bit, name) in THROTTLE_REASONS {
                let reason = [("gpuspan.gpu.throttle_reason", Value::Str(name.into()))];
                each(e, &reason, |_, s| s.throttle_reasons.map(|b| if b & bit != 0 { 1.0 } else { 0.0 }));
            }
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::imp::tests::{h100, install};
    use crate::monitor::{GpuInfo, Sample};
    use std::time::Duration;

    /// [`install`], as the process's monitor: for the one test that reads it through the
    /// metrics' plain functions (no other unit test plugs a monitor into the process).
    fn install_in_process(interval: Duration, devices: Vec<(GpuInfo, Vec<Sample>)>) {
        let installed = install(interval, devices).current();
        if let Some(m) = crate::monitor::register_hooks() {
            *m.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = installed;
        }
    }

    /// (metric, unit, kind, value, attributes) of one data point.
    type Point = (&'static str, &'static str, GaugeKind, f64, Vec<(&'static str, Value)>);

    /// Every data point the gauges give now.
    fn points() -> Vec<Point> {
        let mut out = Vec::new();
        for g in gauges() {
            (g.observe)(&mut |v, a| out.push((g.name, g.unit, g.kind, v, a.to_vec())));
        }
        out
    }

    #[test]
    fn the_newest_sample_is_offered_under_the_hw_conventions() {
        let sample = Sample {
            time_ns: 1,
            gpu_utilization_pct: Some(75),
            memory_utilization_pct: Some(20),
            memory_used_bytes: Some(1 << 30),
            memory_free_bytes: Some(70 << 30),
            temperature_c: Some(51),
            power_w: Some(312.5),
            power_limit_w: Some(700.0),
            sm_clock_mhz: Some(1980),
            memory_clock_mhz: Some(2619),
            throttle_reasons: Some(0x4),
            ..Sample::default()
        };
        let older = Sample { gpu_utilization_pct: Some(5), ..sample.clone() };
        install_in_process(Duration::from_millis(100), vec![(h100(0), vec![older, sample])]);
        let points = points();
        let str_attr = |a: &[(&str, Value)], k: &str| {
            a.iter().find(|(key, _)| *key == k).map(|(_, v)| match v {
                Value::Str(s) => s.to_string(),
                other => format!("{other:?}"),
            })
        };
        let value = |name: &str, attr: Option<(&str, &str)>| {
            points
                .iter()
                .filter(|p| p.0 == name)
                .find(|p| attr.is_none_or(|(k, v)| str_attr(&p.4, k).as_deref() == Some(v)))
                .map(|p| (p.1, p.2, p.3, p.4.clone()))
        };
        let (unit, kind, util, attrs) = value("hw.gpu.utilization", None).expect("hw.gpu.utilization");
        assert_eq!((unit, kind, util), ("1", GaugeKind::F64Gauge, 0.75));
        for (k, v) in [("hw.type", "gpu"), ("hw.vendor", "NVIDIA"), ("hw.name", "NVIDIA H100 80GB HBM3")] {
            assert_eq!(str_attr(&attrs, k).as_deref(), Some(v), "{k} in {attrs:?}");
        }
        assert_eq!(str_attr(&attrs, "hw.id"), Some(h100(0).uuid));
        assert_eq!(
            value("hw.gpu.memory.usage", None).map(|p| (p.1, p.2)),
            Some((GaugeKind::I64UpDownCounter, (1u64 << 30) as f64))
        );
        assert_eq!(value("hw.gpu.memory.limit", None).map(|p| p.2), Some(81_559_187_456.0));
        assert_eq!(value("hw.power", None).map(|p| (p.0, p.2)), Some(("W", 312.5)));
        assert_eq!(value("hw.temperature", None).map(|p| (p.0, p.2)), Some(("Cel", 51.0)));
        // install() credits 1000 B sent and 2000 B received per sample.
        let io = |d| value("hw.gpu.io", Some(("network.io.direction", d))).map(|p| (p.1, p.2));
        assert_eq!(io("transmit"), Some((GaugeKind::U64Counter, 2000.0)));
        assert_eq!(io("receive"), Some((GaugeKind::U64Counter, 4000.0)));
        assert_eq!(value("gpuspan.gpu.clock.sm", None).map(|p| p.2), Some(1980.0));
        assert_eq!(value("gpuspan.gpu.power.limit", None).map(|p| p.2), Some(700.0));
        let throttled =
            |r| value("gpuspan.gpu.throttled", Some(("gpuspan.gpu.throttle_reason", r))).map(|p| (p.1, p.2));
        assert_eq!(throttled("sw_power_cap"), Some((GaugeKind::I64Gauge, 1.0)));
        assert_eq!(throttled("gpu_idle"), Some((GaugeKind::I64Gauge, 0.0)));
    }
}
