//! The instrumented build's monitor: the sampler thread, the vendor libraries it reads, the
//! history it keeps, and the [`Devices`](crate::hooks::Devices) it plugs into the collector.

mod discovery;
mod library;
mod live;
// Items of some are `pub`: `testing_api` lends them out.
pub(super) mod matching;
#[cfg(feature = "_metrics")]
mod metrics;
mod readings;
mod ring;
mod rocm;
pub(super) mod sampler;
mod snapshot;
pub(super) mod summary;
mod vendor;

// The public types and functions, as this module's children name them (`super::GpuInfo`).
use super::*;
use ring::Ring;
use std::any::Any;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};
use types::{DEFAULT_HISTORY, DEFAULT_INTERVAL, MIN_INTERVAL};

use sampler::throttle_reason_names;

/// Default CPU budget of the sampler: 0.1 % of one core.
const DEFAULT_CPU_PERCENT: f64 = 0.1;
/// How long [`stop`] waits for the sampler thread to finish its current round.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);

/// Plugs the monitor into the core: the process's collector holds it as its
/// [`Devices`](crate::hooks::Devices) (the device's state on records, the device section of the
/// summary, the device memory of `track_memory` sites, the `hw.gpu.*` metrics, the devices of the
/// live feed and the readings of the capture file). `init` calls it, and so does
/// [`MonitorConfig::start`], so that a sampler started without `init` still adds what it knows.
/// Returns the monitor plugged in (the one already there, if any); `None` only when the
/// collector's lock is poisoned.
pub(crate) fn register_hooks() -> Option<Arc<Monitor>> {
    let mut devices = crate::hooks::leaves().devices.write().ok()?;
    if let Some(m) = devices.clone().and_then(|d| (d as Arc<dyn Any + Send + Sync>).downcast::<Monitor>().ok()) {
        return Some(m);
    }
    let monitor = Arc::new(Monitor::default());
    *devices = Some(monitor.clone());
    Some(monitor)
}

/// The device monitor as the core sees it: the sampler it started (running or stopped), if any.
#[derive(Debug, Default)]
pub(crate) struct Monitor {
    current: RwLock<Option<Arc<Shared>>>,
}

impl Monitor {
    fn current(&self) -> Option<Arc<Shared>> {
        self.current.read().ok()?.clone()
    }
}

impl crate::hooks::Devices for Monitor {
    fn record_attributes(&self, record: &crate::record::Record) -> Vec<(&'static str, crate::record::Value)> {
        snapshot::record_attributes(self.current(), record)
    }

    /// The summary's device lines: each transfer's efficiency against its link, then the devices.
    fn summary_section(&self, reached: &[crate::SiteSummary]) -> Vec<String> {
        let shared = self.current();
        let devices: Vec<GpuInfo> = shared.iter().flat_map(|s| s.devices()).map(|d| d.info.clone()).collect();
        let mut lines = summary::transfer_efficiency_lines(&devices, reached);
        lines.extend(summary::summary_lines(shared));
        lines
    }

    fn memory_used(&self) -> Option<u64> {
        device_memory_used()
    }

    #[cfg(feature = "_metrics")]
    fn gauges(&self) -> Vec<crate::hooks::gauges::Gauge> {
        metrics::gauges()
    }

    fn live_devices(&self) -> Result<Vec<gpuspan_capture::live::Device>, String> {
        live::devices(self.current())
    }

    fn readings(&self, since_ns: u64) -> Vec<crate::hooks::Readings> {
        readings::since(self.current(), since_ns)
    }

    /// Stops the sampler (bounded: one second) so that the summary's device lines are final.
    fn end_of_run(&self) {
        stop();
    }
}

/// [`MonitorConfig::from_env`]: the defaults, then the `GPUSPAN_MONITOR_*` variables.
pub(super) fn config_from_env() -> MonitorConfig {
    let mut c = MonitorConfig::default();
    if let Some(interval) = crate::env::monitor_interval(DEFAULT_INTERVAL, MIN_INTERVAL) {
        c = c.interval(interval);
    }
    if let Some(n) = crate::env::monitor_history(DEFAULT_HISTORY) {
        c = c.history(n);
    }
    if let Some(p) = crate::env::monitor_cpu_percent(DEFAULT_CPU_PERCENT) {
        c = c.cpu_budget_percent(p);
    }
    c
}

/// [`MonitorConfig::start`]: plugs the monitor in and spawns its sampler thread.
pub(super) fn start(config: MonitorConfig) -> Result<(), MonitorError> {
    let monitor = register_hooks();
    let Some(Ok(mut current)) = monitor.as_ref().map(|m| m.current.write()) else {
        return Err(MonitorError::Thread("the monitor registry lock is poisoned".into()));
    };
    if current.as_ref().is_some_and(|s| {
        let state = s.lock();
        !state.stop_requested && !state.finished
    }) {
        return Err(MonitorError::AlreadyRunning);
    }
    let shared = Arc::new(Shared::new(config));
    let worker = shared.clone();
    std::thread::Builder::new()
        .name("gpuspan-monitor".into())
        .spawn(move || sampler::run(worker))
        .map_err(|e| MonitorError::Thread(e.to_string()))?;
    *current = Some(shared);
    Ok(())
}

/// Starts the sampler as [`crate::init`] does: from the environment, unless `GPUSPAN_MONITOR=off`;
/// a failure is said once, not returned (a sampler the program already started is left alone).
pub(crate) fn start_from_env() {
    let off = !crate::env::monitor();
    if off {
        return;
    }
    match MonitorConfig::from_env().start() {
        Ok(()) | Err(MonitorError::AlreadyRunning) => {}
        Err(e) => crate::diagnostics::note_once(e),
    }
}

/// Device memory in use now, summed over every GPU NVML and ROCm SMI see: one library call per
/// GPU, for sites with `track_memory`. `None` without a device library.
fn device_memory_used() -> Option<u64> {
    vendor::memory_used()
}

/// [`super::stop`]: asks the sampler to stop and waits for its round.
pub(super) fn stop() -> bool {
    let Some(shared) = current() else {
        return true;
    };
    let mut state = shared.lock();
    state.stop_requested = true;
    shared.changed.notify_all();
    let (state, _) = shared
        .changed
        .wait_timeout_while(state, STOP_TIMEOUT, |s| !s.finished)
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.finished
}

/// [`super::ready`]: waits for the sampler's discovery, or discovers now without one.
pub(super) fn ready(timeout: Duration) -> Result<Vec<GpuInfo>, MonitorError> {
    let Some(shared) = current() else {
        return discover_now();
    };
    let state = shared.lock();
    let (state, _) = shared
        .changed
        .wait_timeout_while(state, timeout, |s| s.discovery.is_none())
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match &state.discovery {
        Some(Ok(())) => Ok(shared.devices().iter().map(|d| d.info.clone()).collect()),
        Some(Err(e)) => Err(e.clone()),
        None => Err(MonitorError::Call {
            call: "initialization",
            message: format!("still not done after {:.1} s", timeout.as_secs_f64()),
        }),
    }
}

pub(super) fn discover_now() -> Result<Vec<GpuInfo>, MonitorError> {
    Ok(vendor::discover()?.into_iter().map(|found| found.info).collect())
}

fn stats_of(s: &Shared) -> sampler::SamplerStats {
    s.counters.stats(&s.config, !s.lock().finished)
}

fn with_slot<T>(index: u32, f: impl FnOnce(&DeviceSlot) -> T) -> Option<T> {
    let shared = current()?;
    let slot = shared.devices().iter().find(|d| d.info.index == index)?;
    Some(f(slot))
}

/// [`super::history`]: the samples kept for the GPU with this index, oldest first.
pub(super) fn history(index: u32) -> Vec<Sample> {
    with_slot(index, |slot| slot.lock().ring.iter().cloned().collect()).unwrap_or_default()
}

/// [`super::latest`]: the newest sample of the GPU with this index.
pub(super) fn latest(index: u32) -> Option<Sample> {
    with_slot(index, |slot| slot.lock().ring.latest().cloned()).flatten()
}

/// What the sampler did and what it cost; `None` when none was started.
pub(super) fn sampler_stats() -> Option<sampler::SamplerStats> {
    current().map(|s| stats_of(&s))
}

/// The sampler of this process (running or stopped), if one was started: the one of the
/// monitor plugged into the process's collector.
fn current() -> Option<Arc<Shared>> {
    let devices = crate::hooks::leaves().devices()?;
    (devices as Arc<dyn Any + Send + Sync>).downcast::<Monitor>().ok()?.current()
}

/// What the sampler thread and the readers share.
#[derive(Debug)]
struct Shared {
    config: MonitorConfig,
    state: Mutex<State>,
    /// Signals changes of `state`: discovery done, stop asked, thread finished.
    changed: Condvar,
    devices: OnceLock<Vec<DeviceSlot>>,
    counters: sampler::Counters,
}

#[derive(Debug, Default)]
struct State {
    discovery: Option<Result<(), MonitorError>>,
    stop_requested: bool,
    finished: bool,
}

impl Shared {
    fn new(config: MonitorConfig) -> Self {
        Shared {
            config,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            devices: OnceLock::new(),
            counters: sampler::Counters::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn devices(&self) -> &[DeviceSlot] {
        self.devices.get().map_or(&[], Vec::as_slice)
    }

    /// Sleeps until `deadline` or until a stop is asked; returns whether to go on.
    fn sleep_until(&self, deadline: Instant) -> bool {
        let mut state = self.lock();
        loop {
            if state.stop_requested {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            state = self.changed.wait_timeout(state, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
    }
}

/// One GPU and its history.
#[derive(Debug)]
struct DeviceSlot {
    info: GpuInfo,
    history: Mutex<History>,
}

impl DeviceSlot {
    fn new(info: GpuInfo, capacity: usize) -> Self {
        DeviceSlot { info, history: Mutex::new(History::new(capacity)) }
    }

    fn lock(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The recent samples of one GPU, and the totals of all its samples since the start.
#[derive(Debug)]
struct History {
    ring: Ring<Sample>,
    totals: summary::Totals,
    /// Bytes over PCIe since the sampler started, transmitted and received by the GPU.
    io_tx_bytes: f64,
    io_rx_bytes: f64,
}

impl History {
    fn new(capacity: usize) -> Self {
        History { ring: Ring::new(capacity), totals: summary::Totals::default(), io_tx_bytes: 0.0, io_rx_bytes: 0.0 }
    }

    fn push(&mut self, sample: Sample, io_tx: f64, io_rx: f64) {
        self.totals.add(&sample);
        self.io_tx_bytes += io_tx;
        self.io_rx_bytes += io_rx;
        self.ring.push(sample);
    }
}

/// The monitor's tests, and monitors made of given devices and samples for the unit tests of the
/// readers.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A finished monitor holding `devices` with their samples, plugged into no collector.
    pub(crate) fn install(interval: Duration, devices: Vec<(GpuInfo, Vec<Sample>)>) -> Monitor {
        let shared = Shared::new(MonitorConfig::default().interval(interval));
        let slots = devices
            .into_iter()
            .map(|(info, samples)| {
                let slot = DeviceSlot::new(info, DEFAULT_HISTORY);
                for s in samples {
                    slot.lock().push(s, 1000.0, 2000.0);
                }
                slot
            })
            .collect();
        let _ = shared.devices.set(slots);
        {
            let mut state = shared.lock();
            state.discovery = Some(Ok(()));
            state.stop_requested = true;
            state.finished = true;
        }
        Monitor { current: RwLock::new(Some(Arc::new(shared))) }
    }

    /// An H100 on a gen 5 x16 link.
    pub(crate) fn h100(index: u32) -> GpuInfo {
        GpuInfo {
            index,
            name: "NVIDIA H100 80GB HBM3".into(),
            vendor: "NVIDIA",
            uuid: format!("GPU-{index:08x}-1111-2222-3333-444444444444"),
            pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + index),
            pci_device_id: 0x2330 << 16 | 0x10de,
            memory_total_bytes: 81_559_187_456,
            compute_capability: Some((9, 0)),
            driver_version: "580.159.04".into(),
            cuda_driver_version: Some((13, 0)),
            pcie: PcieLink {
                max_generation: Some(5),
                max_width: Some(16),
                current_generation: Some(5),
                current_width: Some(16),
            },
            nvlinks: Vec::new(),
            nvlink_peers: Some(Vec::new()),
        }
    }

    #[test]
    fn config_clamps_what_makes_no_sense() {
        let c = MonitorConfig::default().interval(Duration::from_millis(1)).history(0);
        assert_eq!(c.sampling_interval(), MIN_INTERVAL);
        assert_eq!(c.history_len(), 1);
        assert_eq!(MonitorConfig::default().sampling_interval(), Duration::from_millis(100));
        assert_eq!(MonitorConfig::default().cpu_budget(), 0.001);
        assert_eq!(MonitorConfig::default().cpu_budget_percent(1e9).cpu_budget(), 1.0);
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = MonitorError::LibraryMissing { tried: "libnvidia-ml.so.1: not found".into() };
        let m = e.to_string();
        assert!(m.contains("LD_LIBRARY_PATH") && m.contains("GPUSPAN_NVML_LIBRARY"), "{m}");
        assert!(MonitorError::AlreadyRunning.to_string().contains("stop()"));
    }
}
