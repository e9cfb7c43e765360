//! The seams themselves: the traits and types a leaf implements, and the [`Leaves`] plugged
//! into one collector. Apart from `hooks.rs`, whose registrations reach the process's
//! collector, so that the collector names a part that imports nothing above it.

use crate::export::summary::row::SiteSummary;
use crate::record::{Record, Value};
use std::sync::{Arc, RwLock};

/// Lines a leaf adds to the summary, given the reached sites.
pub(crate) type SummarySection = fn(&[SiteSummary]) -> Vec<String>;

/// A counter track for the timeline: its name and its (host ns, value) samples.
pub(crate) type CounterTrack = (String, Vec<(u64, u64)>);

/// The counter tracks a leaf draws on the timeline (an instrumented wgpu device's memory).
pub(crate) type CounterSource = fn() -> Vec<CounterTrack>;

/// Device memory in use, from a backend that counts it itself (an instrumented wgpu device's
/// buffers and textures): what `track_memory` reads where no device monitor can.
pub(crate) type MemorySource = fn() -> Option<u64>;

/// The memory accounts of the devices a backend counts itself (an instrumented wgpu device's
/// buffers and textures), each with its device, for the capture file and the OTLP export; with
/// the counter samples when asked (the capture draws them; a metric reads only the figures).
pub(crate) type AccountSource = fn(bool) -> Vec<(crate::record::DeviceLabel, gpuspan_capture::MemoryAccount)>;

/// What a leaf that reads devices (the NVML monitor) adds to what the core makes. `Any`, so that
/// the leaf's own module finds its state again (`Arc<dyn Devices>` upcast to `Arc<dyn Any>`,
/// then downcast).
pub(crate) trait Devices: std::any::Any + Send + Sync {
    /// Attributes for a record (the device's state at the call's time): asked once per record
    /// that reaches a sink, when it is submitted, so that every sink sees the same values.
    fn record_attributes(&self, record: &Record) -> Vec<(&'static str, Value)>;
    /// Lines the summary prints after the sites, given the reached sites.
    fn summary_section(&self, reached: &[SiteSummary]) -> Vec<String>;
    /// Device memory in use now, in bytes, summed over the devices (`None`: cannot be read):
    /// the device side of a `track_memory` site's memory marks.
    fn memory_used(&self) -> Option<u64>;
    /// Readings an exporter that exports metrics observes when it collects (none unless the
    /// leaf offers some).
    #[cfg(feature = "_metrics")]
    fn gauges(&self) -> Vec<gauges::Gauge> {
        Vec::new()
    }
    /// The devices with their newest reading and recent history, as the live feed sends them
    /// (the feed's message types are plain data, shared with `gpuspan top`). `Err` says why
    /// there are none.
    fn live_devices(&self) -> Result<Vec<gpuspan_capture::live::Device>, String>;
    /// Each device's readings taken after `since_ns` (Unix-epoch ns), with its links' peaks,
    /// for the capture file.
    fn readings(&self, since_ns: u64) -> Vec<Readings>;
    /// The run ends, before its sinks finish: the leaf stops what it runs (the monitor's
    /// sampler, bounded), so that what it adds to them is final. Nothing by default.
    fn end_of_run(&self) {}
}

/// One device as a leaf that reads devices hands it to the capture file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Readings {
    /// Labelled as records label their device.
    pub device: crate::record::DeviceLabel,
    /// The peaks of its links, where the leaf knows them: the same on every call.
    pub link: Option<gpuspan_capture::LinkPeak>,
    /// Taken after the time asked for, oldest first (may be empty).
    pub samples: Vec<gpuspan_capture::DeviceSample>,
}
/// The leaves plugged into one collector.
pub(crate) struct Leaves {
    /// The device monitor (one: a second replaces it).
    pub(crate) devices: RwLock<Option<Arc<dyn Devices>>>,
    /// Summary sections of the backends.
    pub(crate) sections: Registered<SummarySection>,
    /// Counter tracks of the backends.
    pub(crate) counters: Registered<CounterSource>,
    /// Memory counted by the backends.
    pub(crate) memory: Registered<MemorySource>,
    /// The backends' memory accounts.
    pub(crate) accounts: Registered<AccountSource>,
}

/// What the backends registered of one kind (a function each; registering one again adds
/// nothing), in the order they did.
pub(crate) struct Registered<F>(RwLock<Vec<F>>);

impl<F: Copy + PartialEq> Registered<F> {
    const fn new() -> Self {
        Registered(RwLock::new(Vec::new()))
    }

    /// Registers `f` (once).
    #[cfg(any(test, feature = "_gpu"))]
    pub(crate) fn add(&self, f: F) {
        if let Ok(mut fs) = self.0.write() {
            if !fs.contains(&f) {
                fs.push(f);
            }
        }
    }

    /// What is registered now.
    fn all(&self) -> Vec<F> {
        self.0.read().map(|fs| fs.clone()).unwrap_or_default()
    }
}

impl std::fmt::Debug for Leaves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let devices = self.devices().is_some();
        f.debug_struct("Leaves").field("devices", &devices).finish_non_exhaustive()
    }
}

impl Leaves {
    pub(crate) const fn new() -> Self {
        Leaves {
            devices: RwLock::new(None),
            sections: Registered::new(),
            counters: Registered::new(),
            memory: Registered::new(),
            accounts: Registered::new(),
        }
    }

    /// The device monitor, if one is plugged in.
    pub(crate) fn devices(&self) -> Option<Arc<dyn Devices>> {
        self.devices.read().ok()?.clone()
    }

    /// The attributes the leaves add to `record`.
    pub(crate) fn record_attributes(&self, record: &Record) -> Vec<(&'static str, Value)> {
        self.devices().map(|d| d.record_attributes(record)).unwrap_or_default()
    }

    /// Device memory in use now, if a leaf can read it: the device monitor's reading, else the
    /// sum of what the backends count themselves.
    pub(crate) fn device_memory_used(&self) -> Option<u64> {
        if let Some(used) = self.devices().and_then(|d| d.memory_used()) {
            return Some(used);
        }
        self.memory.all().iter().filter_map(|f| f()).reduce(|a, b| a + b)
    }

    /// The memory accounts of every device a backend counts itself, now, with their samples
    /// if `samples`.
    pub(crate) fn memory_accounts(
        &self,
        samples: bool,
    ) -> Vec<(crate::record::DeviceLabel, gpuspan_capture::MemoryAccount)> {
        self.accounts.all().iter().flat_map(|f| f(samples)).collect()
    }

    /// Every counter track the leaves draw, for the timeline.
    pub(crate) fn counter_tracks(&self) -> Vec<CounterTrack> {
        self.counters.all().iter().flat_map(|f| f()).collect()
    }

    /// The lines the leaves add to the summary: the devices', then the backends' sections (the
    /// order of old, when `init` registered the monitor before any backend started).
    pub(crate) fn summary_sections(&self, reached: &[SiteSummary]) -> Vec<String> {
        let mut lines = self.devices().map(|d| d.summary_section(reached)).unwrap_or_default();
        lines.extend(self.sections.all().into_iter().flat_map(|f| f(reached)));
        lines
    }
}

/// What a leaf offers an exporter of metrics (`_metrics`).
#[cfg(feature = "_metrics")]
pub(crate) mod gauges {
    use crate::record::Value;

    /// Reads a metric: calls its argument once per data point, with the value and the attributes.
    pub(crate) type Observe = fn(&mut dyn FnMut(f64, &[(&'static str, Value)]));

    /// What kind of instrument a metric is, and the number type it is exported as.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[cfg_attr(not(feature = "_devices"), allow(dead_code))] // made by the device monitor alone
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
    pub(crate) struct Gauge {
        pub name: &'static str,
        pub unit: &'static str,
        pub description: &'static str,
        pub kind: GaugeKind,
        /// Calls its argument once per data point: the value (exact in an `f64` for every whole
        /// number it is used for) and the point's attributes.
        pub observe: Observe,
    }
}
