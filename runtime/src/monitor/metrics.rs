//! Device metrics through OpenTelemetry (features `nvml` and `otlp`), named after the hardware
//! semantic conventions (`hw.gpu.*`, `hw.power`, `hw.temperature`) where they have a name, and
//! `gpuspan.gpu.*` where they have none (clocks, power limit, throttling).
//!
//! The instruments are observable: whenever the meter's reader collects, each callback reads the
//! sampler's newest sample. Nothing is recorded on the program's threads.

use super::sampler::{Sample, THROTTLE_REASONS};
use super::GpuInfo;
use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;

/// What one device shows at collection time.
struct View {
    attributes: Vec<KeyValue>,
    info: GpuInfo,
    latest: Option<Sample>,
    /// Bytes sent and received over PCIe since the sampler started.
    io: (f64, f64),
}

/// The identity every device metric carries: `hw.id` (the UUID), `hw.type`, `hw.name`,
/// `hw.vendor`, `hw.driver_version`.
fn attributes(g: &GpuInfo) -> Vec<KeyValue> {
    vec![
        KeyValue::new("hw.id", g.uuid.clone()),
        KeyValue::new("hw.type", "gpu"),
        KeyValue::new("hw.name", g.name.clone()),
        KeyValue::new("hw.vendor", g.vendor),
        KeyValue::new("hw.driver_version", g.driver_version.clone()),
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

/// Observes `value` of each device's newest sample, with `extra` attributes.
fn each<T>(o: &dyn AsyncInstrument<T>, extra: &[KeyValue], value: impl Fn(&View, &Sample) -> Option<T>) {
    for v in views() {
        let Some(s) = &v.latest else { continue };
        if let Some(x) = value(&v, s) {
            let mut a = v.attributes.clone();
            a.extend_from_slice(extra);
            o.observe(x, &a);
        }
    }
}

/// Registers the device metrics on `meter`. gpuspan's OTLP export registers them on its own
/// meter provider; call this to export them through another one. The instruments read the
/// process's sampler, so they stay empty until [`super::MonitorConfig::start`] has found devices.
///
/// | metric | instrument, unit | value |
/// |---|---|---|
/// | `hw.gpu.utilization` | gauge, 1 | share of time a kernel ran (`hw.gpu.task = general`) |
/// | `hw.gpu.memory.utilization` | gauge, 1 | VRAM used ÷ VRAM total |
/// | `hw.gpu.memory.usage`, `hw.gpu.memory.limit` | up-down counter, By | VRAM used, VRAM total |
/// | `hw.power` | gauge, W | power draw |
/// | `hw.temperature` | gauge, Cel | GPU die temperature |
/// | `hw.gpu.io` | counter, By | PCIe bytes since the sampler started, `network.io.direction` = `transmit` / `receive` |
/// | `gpuspan.gpu.memory.free` | up-down counter, By | VRAM free |
/// | `gpuspan.gpu.memory_controller.utilization` | gauge, 1 | share of time device memory was read or written |
/// | `gpuspan.gpu.power.limit` | gauge, W | enforced power limit |
/// | `gpuspan.gpu.clock.sm`, `gpuspan.gpu.clock.memory` | gauge, MHz | clocks |
/// | `gpuspan.gpu.throttled` | gauge, 1 | 1 while `gpuspan.gpu.throttle_reason` holds the clocks back, else 0 |
pub(crate) fn register_metrics(meter: &Meter) {
    let ratio = |pct: Option<u32>| pct.map(|p| f64::from(p) / 100.0);
    let bytes = |b: Option<u64>| b.and_then(|b| i64::try_from(b).ok());
    meter
        .f64_observable_gauge("hw.gpu.utilization")
        .with_unit("1")
        .with_description("Fraction of time one or more kernels ran on the GPU")
        .with_callback(move |o| {
            each(o, &[KeyValue::new("hw.gpu.task", "general")], |_, s| ratio(s.gpu_utilization_pct))
        })
        .build();
    meter
        .f64_observable_gauge("hw.gpu.memory.utilization")
        .with_unit("1")
        .with_description("Fraction of GPU memory used")
        .with_callback(|o| {
            each(o, &[], |v, s| {
                let total = v.info.memory_total_bytes;
                s.memory_used_bytes.filter(|_| total > 0).map(|u| u as f64 / total as f64)
            })
        })
        .build();
    meter
        .i64_observable_up_down_counter("hw.gpu.memory.usage")
        .with_unit("By")
        .with_description("GPU memory used")
        .with_callback(move |o| each(o, &[], |_, s| bytes(s.memory_used_bytes)))
        .build();
    meter
        .i64_observable_up_down_counter("hw.gpu.memory.limit")
        .with_unit("By")
        .with_description("GPU memory in total")
        .with_callback(move |o| each(o, &[], |v, _| bytes(Some(v.info.memory_total_bytes))))
        .build();
    meter
        .f64_observable_gauge("hw.power")
        .with_unit("W")
        .with_description("Power drawn by the GPU")
        .with_callback(|o| each(o, &[], |_, s| s.power_w))
        .build();
    meter
        .f64_observable_gauge("hw.temperature")
        .with_unit("Cel")
        .with_description("GPU die temperature")
        .with_callback(|o| each(o, &[], |_, s| s.temperature_c.map(f64::from)))
        .build();
    meter
        .u64_observable_counter("hw.gpu.io")
        .with_unit("By")
        .with_description("Bytes the GPU transmitted and received over PCIe since gpuspan's sampler started")
        .with_callback(|o| {
            each(o, &[KeyValue::new("network.io.direction", "transmit")], |v, _| Some(v.io.0 as u64));
            each(o, &[KeyValue::new("network.io.direction", "receive")], |v, _| Some(v.io.1 as u64));
        })
        .build();
    meter
        .i64_observable_up_down_counter("gpuspan.gpu.memory.free")
        .with_unit("By")
        .with_description("GPU memory free")
        .with_callback(move |o| each(o, &[], |_, s| bytes(s.memory_free_bytes)))
        .build();
    meter
        .f64_observable_gauge("gpuspan.gpu.memory_controller.utilization")
        .with_unit("1")
        .with_description("Fraction of time device memory was read or written")
        .with_callback(move |o| each(o, &[], |_, s| ratio(s.memory_utilization_pct)))
        .build();
    meter
        .f64_observable_gauge("gpuspan.gpu.power.limit")
        .with_unit("W")
        .with_description("Enforced power limit of the GPU")
        .with_callback(|o| each(o, &[], |_, s| s.power_limit_w))
        .build();
    meter
        .f64_observable_gauge("gpuspan.gpu.clock.sm")
        .with_unit("MHz")
        .with_description("SM clock")
        .with_callback(|o| each(o, &[], |_, s| s.sm_clock_mhz.map(f64::from)))
        .build();
    meter
        .f64_observable_gauge("gpuspan.gpu.clock.memory")
        .with_unit("MHz")
        .with_description("Memory clock")
        .with_callback(|o| each(o, &[], |_, s| s.memory_clock_mhz.map(f64::from)))
        .build();
    meter
        .i64_observable_gauge("gpuspan.gpu.throttled")
        .with_unit("1")
        .with_description("1 while the reason holds the GPU's clocks back, else 0")
        .with_callback(|o| {
            for (bit, name) in THROTTLE_REASONS {
                let reason = [KeyValue::new("gpuspan.gpu.throttle_reason", name)];
                each(o, &reason, |_, s| s.throttle_reasons.map(|b| i64::from(b & bit != 0)));
            }
        })
        .build();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::testing::{h100, install};
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
    use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
    use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// (metric, unit, value, attributes) of every data point exported.
    type Points = Arc<Mutex<Vec<(String, String, f64, Vec<(String, String)>)>>>;

    #[derive(Debug, Default)]
    struct Keep(Points);

    impl PushMetricExporter for Keep {
        async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
            let mut out = self.0.lock().unwrap();
            for m in metrics.scope_metrics().flat_map(|s| s.metrics()) {
                let mut push = |v: f64, attrs: Vec<(String, String)>| {
                    out.push((m.name().to_owned(), m.unit().to_owned(), v, attrs));
                };
                let attrs = |a: &mut dyn Iterator<Item = &KeyValue>| {
                    a.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect::<Vec<_>>()
                };
                macro_rules! points {
                    ($data:expr) => {
                        match $data {
                            MetricData::Gauge(g) => {
                                g.data_points().for_each(|p| push(p.value() as f64, attrs(&mut p.attributes())))
                            }
                            MetricData::Sum(s) => {
                                s.data_points().for_each(|p| push(p.value() as f64, attrs(&mut p.attributes())))
                            }
                            _ => {}
                        }
                    };
                }
                match m.data() {
                    AggregatedMetrics::F64(d) => points!(d),
                    AggregatedMetrics::U64(d) => points!(d),
                    AggregatedMetrics::I64(d) => points!(d),
                }
            }
            Ok(())
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
        fn temporality(&self) -> Temporality {
            Temporality::Cumulative
        }
    }

    #[test]
    fn the_newest_sample_is_exported_under_the_hw_conventions() {
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
        let _m = install(Duration::from_millis(100), vec![(h100(0), vec![older, sample])]);
        let points = Points::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(Keep(points.clone())).with_interval(Duration::from_secs(3600)).build())
            .build();
        register_metrics(&provider.meter("gpuspan"));
        provider.force_flush().expect("flush");
        let points = points.lock().unwrap().clone();
        let value = |name: &str, attr: Option<(&str, &str)>| {
            points
                .iter()
                .filter(|(n, ..)| n == name)
                .find(|(.., a)| attr.is_none_or(|(k, v)| a.iter().any(|(ak, av)| ak == k && av == v)))
                .map(|(_, unit, v, a)| (unit.clone(), *v, a.clone()))
        };
        let (unit, util, attrs) = value("hw.gpu.utilization", None).expect("hw.gpu.utilization");
        assert_eq!((unit.as_str(), util), ("1", 0.75));
        for (k, v) in [("hw.type", "gpu"), ("hw.vendor", "NVIDIA"), ("hw.name", "NVIDIA H100 80GB HBM3")] {
            assert!(attrs.contains(&(k.into(), v.into())), "{k} in {attrs:?}");
        }
        assert!(attrs.contains(&("hw.id".into(), h100(0).uuid)));
        assert_eq!(value("hw.gpu.memory.usage", None).map(|p| p.1), Some((1u64 << 30) as f64));
        assert_eq!(value("hw.gpu.memory.limit", None).map(|p| p.1), Some(81_559_187_456.0));
        assert_eq!(value("hw.power", None).map(|p| (p.0, p.1)), Some(("W".into(), 312.5)));
        assert_eq!(value("hw.temperature", None).map(|p| (p.0, p.1)), Some(("Cel".into(), 51.0)));
        // install() credits 1000 B sent and 2000 B received per sample.
        assert_eq!(value("hw.gpu.io", Some(("network.io.direction", "transmit"))).map(|p| p.1), Some(2000.0));
        assert_eq!(value("hw.gpu.io", Some(("network.io.direction", "receive"))).map(|p| p.1), Some(4000.0));
        assert_eq!(value("gpuspan.gpu.clock.sm", None).map(|p| p.1), Some(1980.0));
        assert_eq!(value("gpuspan.gpu.power.limit", None).map(|p| p.1), Some(700.0));
        let throttled = |r| value("gpuspan.gpu.throttled", Some(("gpuspan.gpu.throttle_reason", r))).map(|p| p.1);
        assert_eq!((throttled("sw_power_cap"), throttled("gpu_idle")), (Some(1.0), Some(0.0)));
        let _ = provider.shutdown();
    }
}
