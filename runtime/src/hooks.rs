//! The seams through which the leaves (the device monitor, today) add to what the core makes,
//! without the core knowing them: `init.rs` registers them, the core calls whatever is there.
//!
//! - record attributes: asked once per record that reaches a sink, when it is submitted, so
//!   that every sink (timeline, spans, captures) sees the same values;
//! - a summary section: lines the summary table prints after the sites;
//! - a device-memory reader: the device side of a `track_memory` site's memory marks;
//! - metric sources: readings an exporter that exports metrics observes when it collects;
//! - live devices: the devices' recent samples, for the live feed's snapshots;
//! - device readings: the devices' samples since a time and their links' peaks, for the
//!   capture file.
//!
//! Registering the same function again does nothing, so a leaf may register itself from more
//! than one place (`init` and its own start).

use crate::export::summary::SiteSummary;
use crate::record::{Record, Value};
use std::sync::RwLock;

/// Attributes a leaf adds to a record (for example the device's state at the call's time).
pub(crate) type RecordAttributes = fn(&Record) -> Vec<(&'static str, Value)>;
/// Lines a leaf adds to the summary, given the reached sites.
pub(crate) type SummarySection = fn(&[SiteSummary]) -> Vec<String>;
/// Device memory in use now, in bytes, summed over the devices (`None`: cannot be read).
pub(crate) type DeviceMemory = fn() -> Option<u64>;
/// Readings a leaf offers as metrics.
pub(crate) type MetricSource = fn() -> Vec<Gauge>;
/// The devices a leaf samples, with their newest reading and recent history, as the live feed
/// sends them (the feed's message types are plain data, shared with `gpuspan top`). `Err` says
/// why there are none.
#[cfg(feature = "enabled")]
pub(crate) type LiveDevices = fn() -> Result<Vec<gpuspan_capture::live::Device>, String>;
/// Each device's readings taken after the given time (Unix-epoch ns), with its links' peaks.
#[cfg(feature = "enabled")]
pub(crate) type DeviceReadings = fn(u64) -> Vec<Readings>;

/// One device as a leaf that reads devices hands it to the capture file.
#[cfg(feature = "enabled")]
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Readings {
    /// Labelled as records label their device.
    pub device: crate::record::DeviceLabel,
    /// The peaks of its links, where the leaf knows them: the same on every call.
    pub link: Option<gpuspan_capture::LinkPeak>,
    /// Taken after the time asked for, oldest first (may be empty).
    pub samples: Vec<gpuspan_capture::DeviceSample>,
}
/// Reads a metric: calls its argument once per data point, with the value and the attributes.
pub(crate) type Observe = fn(&mut dyn FnMut(f64, &[(&'static str, Value)]));

#[derive(Default)]
struct Hooks {
    record_attributes: Vec<RecordAttributes>,
    summary_sections: Vec<SummarySection>,
    device_memory: Option<DeviceMemory>,
    metric_sources: Vec<MetricSource>,
    #[cfg(feature = "enabled")]
    live_devices: Option<LiveDevices>,
    #[cfg(feature = "enabled")]
    device_readings: Option<DeviceReadings>,
}

static HOOKS: RwLock<Hooks> = RwLock::new(Hooks {
    record_attributes: Vec::new(),
    summary_sections: Vec::new(),
    device_memory: None,
    metric_sources: Vec::new(),
    #[cfg(feature = "enabled")]
    live_devices: None,
    #[cfg(feature = "enabled")]
    device_readings: None,
});

fn add<F: Copy + PartialEq>(list: &mut Vec<F>, f: F) {
    if !list.contains(&f) {
        list.push(f);
    }
}

/// Registers attributes to add to every record that reaches a sink.
#[allow(dead_code)] // registered by leaves that may all be compiled out
pub(crate) fn add_record_attributes(f: RecordAttributes) {
    if let Ok(mut h) = HOOKS.write() {
        add(&mut h.record_attributes, f);
    }
}

/// Registers a section of the summary.
#[allow(dead_code)]
pub(crate) fn add_summary_section(f: SummarySection) {
    if let Ok(mut h) = HOOKS.write() {
        add(&mut h.summary_sections, f);
    }
}

/// Registers the reader of device memory (one: a second replaces it).
#[allow(dead_code)]
pub(crate) fn set_device_memory(f: DeviceMemory) {
    if let Ok(mut h) = HOOKS.write() {
        h.device_memory = Some(f);
    }
}

/// Registers a source of metrics.
#[allow(dead_code)]
pub(crate) fn add_metric_source(f: MetricSource) {
    if let Ok(mut h) = HOOKS.write() {
        add(&mut h.metric_sources, f);
    }
}

/// Registers the reader of the devices for the live feed (one: a second replaces it).
#[cfg(feature = "enabled")]
#[allow(dead_code)] // registered by leaves that may all be compiled out
pub(crate) fn set_live_devices(f: LiveDevices) {
    if let Ok(mut h) = HOOKS.write() {
        h.live_devices = Some(f);
    }
}

/// Registers the reader of device readings for the capture file (one: a second replaces it).
#[cfg(feature = "enabled")]
#[allow(dead_code)] // registered by leaves that may all be compiled out
pub(crate) fn set_device_readings(f: DeviceReadings) {
    if let Ok(mut h) = HOOKS.write() {
        h.device_readings = Some(f);
    }
}

/// The devices' readings after `since_ns`; `None` when no leaf reads devices.
#[cfg(feature = "enabled")]
pub(crate) fn device_readings(since_ns: u64) -> Option<Vec<Readings>> {
    let reader = HOOKS.read().ok()?.device_readings?;
    Some(reader(since_ns))
}

/// Held by the unit tests that register or read the device-readings hook: there is one per
/// process, and tests run in parallel.
#[cfg(all(test, feature = "enabled"))]
pub(crate) fn device_readings_exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The devices a leaf samples, for the live feed; `None` when no leaf reads devices.
#[cfg(feature = "enabled")]
pub(crate) fn live_devices() -> Option<Result<Vec<gpuspan_capture::live::Device>, String>> {
    let reader = HOOKS.read().ok()?.live_devices?;
    Some(reader())
}

/// The attributes the leaves add to `record`.
pub(crate) fn record_attributes(record: &Record) -> Vec<(&'static str, Value)> {
    let hooks: Vec<RecordAttributes> = HOOKS.read().map(|h| h.record_attributes.clone()).unwrap_or_default();
    hooks.into_iter().flat_map(|f| f(record)).collect()
}

/// The lines the leaves add to the summary.
pub(crate) fn summary_sections(reached: &[SiteSummary]) -> Vec<String> {
    let hooks: Vec<SummarySection> = HOOKS.read().map(|h| h.summary_sections.clone()).unwrap_or_default();
    hooks.into_iter().flat_map(|f| f(reached)).collect()
}

/// Device memory in use now, if a leaf can read it.
pub(crate) fn device_memory_used() -> Option<u64> {
    let reader = HOOKS.read().ok()?.device_memory?;
    reader()
}

/// Every metric the leaves offer now.
#[allow(dead_code)] // read by the exporters of metrics, which may all be compiled out
pub(crate) fn gauges() -> Vec<Gauge> {
    let sources: Vec<MetricSource> = HOOKS.read().map(|h| h.metric_sources.clone()).unwrap_or_default();
    sources.into_iter().flat_map(|f| f()).collect()
}

/// What kind of instrument a metric is, and the number type it is exported as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // made by leaves that may all be compiled out
pub(crate) enum GaugeKind {
    /// A value at collection time, real.
    F64Gauge,
    /// A value at collection time, whole.
    I64Gauge,
    /// A quantity that goes up and down (memory in use), whole.
    I64UpDownCounter,
    /// A running total, whole and never decreasing.
    U64Counter,
}

/// One metric a leaf offers: observed whenever an exporter collects, never on the program's
/// threads.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // read by the exporters of metrics, which may all be compiled out
pub(crate) struct Gauge {
    pub name: &'static str,
    pub unit: &'static str,
    pub description: &'static str,
    pub kind: GaugeKind,
    /// Calls its argument once per data point: the value (exact in an `f64` for every whole
    /// number it is used for) and the point's attributes.
    pub observe: Observe,
}

#[cfg(all(test, feature = "enabled"))]
mod tests {
    use super::*;
    use crate::pipeline::{self, Sink};
    use crate::record::Interval;
    use crate::site::{Backend, Site, SiteDesc, SiteKind};
    use std::sync::{Arc, Mutex};

    static SITE: Site =
        Site::new(SiteDesc { trace_all: true, ..crate::site::site_desc!("hooked", SiteKind::Kernel, Backend::Host) });
    inventory::submit! { crate::site::SiteRef(&SITE) }

    /// Speaks only about this test's site, so that other tests' records and summaries are as
    /// they would be without it.
    fn attributes(r: &Record) -> Vec<(&'static str, Value)> {
        if std::ptr::eq(r.site, &SITE) {
            vec![("test.device_state", Value::Str("hot".into()))]
        } else {
            Vec::new()
        }
    }

    fn section(reached: &[SiteSummary]) -> Vec<String> {
        reached.iter().filter(|s| std::ptr::eq(s.site, &SITE)).map(|_| "hooked section".to_owned()).collect()
    }

    #[derive(Debug, Default)]
    struct Keep(Mutex<Vec<Record>>);

    impl Sink for Keep {
        fn accept(&self, record: &Record) {
            self.0.lock().unwrap().push(record.clone());
        }
    }

    #[test]
    fn what_a_leaf_adds_reaches_every_sink_and_the_summary() {
        add_record_attributes(attributes);
        add_record_attributes(attributes); // registering again adds nothing twice
        add_summary_section(section);
        let keep = Arc::new(Keep::default());
        pipeline::add_sink(keep.clone());
        pipeline::submit(Record::new(&SITE, 1, 0, Interval { start_ns: 1, end_ns: 2 }));
        let sink: Arc<dyn Sink> = keep.clone();
        pipeline::remove_sink(&sink);

        let records = keep.0.lock().unwrap().clone();
        let mine: Vec<&Record> = records.iter().filter(|r| std::ptr::eq(r.site, &SITE)).collect();
        assert_eq!(mine.len(), 1);
        let added: Vec<_> = mine[0].attributes().into_iter().filter(|(k, _)| *k == "test.device_state").collect();
        assert_eq!(added, [("test.device_state", Value::Str("hot".into()))]);
        let summary = crate::summary().to_string();
        assert_eq!(summary.matches("hooked section").count(), 1, "{summary}");
    }
}
