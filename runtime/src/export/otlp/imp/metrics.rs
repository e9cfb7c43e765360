//! Every call as metrics, sampled or not: a GPU-duration histogram per site and a byte counter
//! per transfer site, through the OpenTelemetry metrics API and the OTLP metric exporter.
//!
//! This is what keeps a kernel called a million times visible without a million spans.

use super::transport::Io;
use crate::diagnostics::{losses, Losses};
use crate::hooks::gauges::{Gauge, GaugeKind};
use crate::pipeline::Sink;
use crate::record::{Record, TimingSource, Value};
use crate::site::{Site, SiteKind};
use opentelemetry::metrics::{BoundCounter, BoundHistogram, Counter, Histogram, Meter};
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Histogram bounds in seconds, 1 µs to 10 s in 1-2-5 steps: GPU work spans that range, and
/// the SDK's default bounds (0..10000, meant for milliseconds) would put every kernel in the
/// first bucket.
const BOUNDS_S: [f64; 22] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1.0, 2.0,
    5.0, 10.0,
];

/// The instruments of one (site, timing source), bound to its attributes once: recording a call
/// is then one atomic update, where an unbound record hashes every attribute on every call
/// (several times the cost of the whole scope).
struct Bound {
    duration: BoundHistogram<f64>,
    bytes: Option<BoundCounter<u64>>,
}

/// Keyed by the site's address and the timing source.
type BoundCache = RwLock<HashMap<(usize, TimingSource), Arc<Bound>>>;

/// Records every call into the instruments.
pub(super) struct MetricsSink {
    duration: Histogram<f64>,
    bytes: Counter<u64>,
    bound: BoundCache,
}

impl std::fmt::Debug for MetricsSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsSink")
    }
}

impl MetricsSink {
    pub(super) fn new(meter: &Meter) -> Self {
        let duration = meter
            .f64_histogram("gpuspan.call.duration")
            .with_unit("s")
            .with_description("Duration of each call of an annotated function: GPU time where gpu.timing.source says so, else host time")
            .with_boundaries(BOUNDS_S.to_vec())
            .build();
        let bytes = meter
            .u64_counter("gpuspan.transfer.bytes")
            .with_unit("By")
            .with_description("Bytes moved by the calls of an annotated transfer function")
            .build();
        MetricsSink { duration, bytes, bound: RwLock::new(HashMap::new()) }
    }

    /// Binds the instruments of a (site, source) seen for the first time.
    fn bind(&self, site: &'static Site, source: TimingSource) -> Arc<Bound> {
        let key = (std::ptr::from_ref(site) as usize, source);
        let d = &site.desc;
        let mut a = vec![
            KeyValue::new("gpuspan.site", d.name),
            KeyValue::new("gpuspan.kind", site.kind_label()),
            KeyValue::new("gpu.backend", d.backend.as_str()),
            KeyValue::new("gpu.timing.source", source.as_str()),
        ];
        if let Some(function) = site.code_function() {
            a.push(KeyValue::new("code.function.name", function));
        }
        if let Some(dir) = d.direction {
            a.push(KeyValue::new("gpu_transfer.direction", dir.as_str()));
        }
        let b = Arc::new(Bound {
            duration: self.duration.bind(&a),
            bytes: (d.kind == SiteKind::Transfer).then(|| self.bytes.bind(&a)),
        });
        match self.bound.write() {
            Ok(mut m) => m.entry(key).or_insert(b).clone(),
            Err(_) => b,
        }
    }
}

impl Sink for MetricsSink {
    fn accept(&self, record: &Record) {
        let (site, source) = (record.site, record.source());
        let measure = |bound: &Bound| {
            bound.duration.record(record.duration_ns() as f64 * 1e-9);
            if let (Some(counter), Some(b)) = (&bound.bytes, record.bytes) {
                counter.add(b);
            }
        };
        // The common case records under the read lock, without touching the entry's count.
        if let Ok(m) = self.bound.read() {
            if let Some(bound) = m.get(&(std::ptr::from_ref(site) as usize, source)) {
                measure(bound);
                return;
            }
        }
        measure(&self.bind(site, source));
    }

    fn wants_all(&self) -> bool {
        true
    }
}

/// Makes an observable instrument of each metric a leaf offers (the monitor's `hw.gpu.*`), of
/// its kind: whenever the reader collects, the gauge is read.
pub(super) fn observe_gauges(meter: &Meter, gauges: &[Gauge]) {
    fn points(g: Gauge, mut each: impl FnMut(f64, &[KeyValue])) {
        (g.observe)(&mut |v, attributes: &[(&'static str, Value)]| {
            let kv: Vec<KeyValue> =
                attributes.iter().map(|(k, a)| KeyValue::new(*k, super::spans::value(a.clone()))).collect();
            each(v, &kv);
        });
    }
    for &g in gauges {
        match g.kind {
            GaugeKind::F64Gauge => {
                meter
                    .f64_observable_gauge(g.name)
                    .with_unit(g.unit)
                    .with_description(g.description)
                    .with_callback(move |o| points(g, |v, a| o.observe(v, a)))
                    .build();
            }
            GaugeKind::I64Gauge => {
                meter
                    .i64_observable_gauge(g.name)
                    .with_unit(g.unit)
                    .with_description(g.description)
                    .with_callback(move |o| points(g, |v, a| o.observe(v as i64, a)))
                    .build();
            }
            GaugeKind::I64UpDownCounter => {
                meter
                    .i64_observable_up_down_counter(g.name)
                    .with_unit(g.unit)
                    .with_description(g.description)
                    .with_callback(move |o| points(g, |v, a| o.observe(v as i64, a)))
                    .build();
            }
            GaugeKind::U64Counter => {
                meter
                    .u64_observable_counter(g.name)
                    .with_unit(g.unit)
                    .with_description(g.description)
                    .with_callback(move |o| points(g, |v, a| o.observe(v as u64, a)))
                    .build();
            }
        }
    }
}

/// The OTLP metric exporter, run on gpuspan's runtime with a time bound, and counted.
pub(super) struct CountingMetricExporter {
    pub inner: opentelemetry_otlp::MetricExporter,
    pub io: Arc<Io>,
    pub timeout: Duration,
    pub describe_failure: Box<dyn Fn(&str) -> String + Send + Sync>,
    pub exported: Arc<AtomicU64>,
    pub failed: Arc<AtomicU64>,
    failing: AtomicBool,
}

impl CountingMetricExporter {
    pub(super) fn new(
        inner: opentelemetry_otlp::MetricExporter,
        io: Arc<Io>,
        timeout: Duration,
        describe_failure: Box<dyn Fn(&str) -> String + Send + Sync>,
    ) -> Self {
        CountingMetricExporter {
            inner,
            io,
            timeout,
            describe_failure,
            exported: Arc::default(),
            failed: Arc::default(),
            failing: AtomicBool::new(false),
        }
    }
}

impl std::fmt::Debug for CountingMetricExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountingMetricExporter")
    }
}

impl PushMetricExporter for CountingMetricExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.io.run(self.timeout, self.inner.export(metrics));
        match &result {
            Ok(()) => {
                self.exported.fetch_add(1, Relaxed);
                self.failing.store(false, Relaxed);
            }
            Err(e) => {
                self.failed.fetch_add(1, Relaxed);
                Losses::add(&losses().otlp_metric_exports_failed, 1);
                if !self.failing.swap(true, Relaxed) {
                    crate::diagnostics::note_once((self.describe_failure)(&e.to_string()));
                }
            }
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
    use std::sync::Mutex;

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

    fn gauge(name: &'static str, kind: GaugeKind, observe: crate::hooks::gauges::Observe) -> Gauge {
        Gauge { name, unit: "By", description: "a test gauge", kind, observe }
    }

    #[test]
    fn every_offered_gauge_becomes_an_instrument_of_its_kind_with_its_attributes() {
        let gauges = [
            gauge("test.f64", GaugeKind::F64Gauge, |e| e(0.75, &[("hw.id", Value::Str("GPU-1".into()))])),
            gauge("test.i64", GaugeKind::I64Gauge, |e| e(1.0, &[])),
            gauge("test.updown", GaugeKind::I64UpDownCounter, |e| e(81_559_187_456.0, &[])),
            gauge("test.counter", GaugeKind::U64Counter, |e| {
                e(2000.0, &[("network.io.direction", Value::Str("transmit".into()))]);
                e(4000.0, &[("network.io.direction", Value::Str("receive".into()))]);
            }),
        ];
        let points = Points::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(Keep(points.clone())).with_interval(Duration::from_secs(3600)).build())
            .build();
        observe_gauges(&provider.meter("gpuspan"), &gauges);
        provider.force_flush().expect("flush");
        let points = points.lock().unwrap().clone();
        let find = |name: &str| {
            points.iter().filter(|p| p.0 == name).map(|p| (p.1.as_str(), p.2, p.3.clone())).collect::<Vec<_>>()
        };
        assert_eq!(find("test.f64"), [("By", 0.75, vec![("hw.id".to_owned(), "GPU-1".to_owned())])]);
        assert_eq!(find("test.i64"), [("By", 1.0, vec![])]);
        assert_eq!(find("test.updown"), [("By", 81_559_187_456.0, vec![])]);
        let mut io = find("test.counter");
        io.sort_by(|a, b| a.1.total_cmp(&b.1));
        assert_eq!(
            io.iter().map(|p| (p.1, p.2[0].1.as_str())).collect::<Vec<_>>(),
            [(2000.0, "transmit"), (4000.0, "receive")]
        );
        let _ = provider.shutdown();
    }
}
