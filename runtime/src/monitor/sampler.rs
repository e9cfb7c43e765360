//! The background sampler: one thread that reads every GPU's counters through NVML at a fixed
//! interval into the bounded history, and accounts for its own cost.
//!
//! A query a device answers "not supported" is not asked again. PCIe throughput comes from the
//! cumulative byte counters where the driver has them (no waiting); otherwise from NVML's
//! windowed throughput query, which blocks for its 20 ms window and is therefore asked at most
//! once a second.

use super::discovery;
use super::ring::Timed;
use super::{library, DeviceSlot, MonitorConfig, Shared};
use crate::diagnostics::note_once;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES};
use nvml_wrapper::Device;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One reading of one GPU. A field is `None` where the device does not report it.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// When it was taken, on gpuspan's host clock (Unix-epoch ns, like every record).
    pub time_ns: u64,
    /// Percent of the last sample period (1/6 s to 1 s, by product) in which a kernel ran.
    pub gpu_utilization_pct: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub memory_utilization_pct: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    /// The enforced power limit (refreshed about once a second).
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    /// Bytes per second the GPU sent over PCIe (to the host) since the previous reading.
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Bytes per second the GPU received over PCIe (from the host) since the previous reading.
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// The link's generation and width now (refreshed about once a second).
    pub pcie_generation: Option<u32>,
    pub pcie_width: Option<u32>,
    /// NVML's clock throttle reason bits; [`throttle_reason_names`] reads them.
    pub throttle_reasons: Option<u64>,
}

impl Timed for Sample {
    fn time_ns(&self) -> u64 {
        self.time_ns
    }
}

/// NVML's clock throttle reasons (`nvmlClocksThrottleReason*`, stable values) and their names.
pub const THROTTLE_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in `bits` (unknown bits are left out).
pub fn throttle_reason_names(bits: u64) -> Vec<&'static str> {
    THROTTLE_REASONS.iter().filter(|(bit, _)| bits & bit != 0).map(|(_, name)| *name).collect()
}

/// What the sampler did and what it cost.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplerStats {
    pub interval: Duration,
    pub running: bool,
    pub devices: usize,
    /// Rounds taken; each reads every device once.
    pub rounds: u64,
    /// Time since the first round (until the last, once stopped).
    pub wall: Duration,
    /// CPU time the sampler thread spent over `wall` (Linux; `None` elsewhere).
    pub cpu: Option<Duration>,
    /// CPU time spent loading NVML and describing the devices, once, before the first round.
    pub setup_cpu: Option<Duration>,
    pub mean_round: Duration,
    pub max_round: Duration,
    /// Where PCIe throughput comes from: `counters`, `windowed` (NVML's 20 ms query, once a
    /// second), `none`, or `mixed` when devices differ.
    pub pcie_source: &'static str,
}

impl SamplerStats {
    /// The sampler's CPU time as a fraction of one core over its run (0.001 is 0.1 %).
    pub fn core_fraction(&self) -> Option<f64> {
        let wall = self.wall.as_secs_f64();
        Some(self.cpu?.as_secs_f64() / wall).filter(|_| wall > 0.0)
    }
}

/// The sampler's running counts, shared with [`super::sampler_stats`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    rounds: AtomicU64,
    round_ns_total: AtomicU64,
    round_ns_max: AtomicU64,
    devices: AtomicU64,
    tid: OnceLock<u32>,
    setup_cpu_ns: OnceLock<Option<u64>>,
    /// The first round's start and the thread's CPU time then.
    started: OnceLock<(Instant, Option<u64>)>,
    /// At the thread's end: time since the first round, and the thread's CPU time then.
    ended: Mutex<Option<(Duration, Option<u64>)>>,
    pcie_source: Mutex<&'static str>,
}

impl Counters {
    pub fn stats(&self, config: &MonitorConfig, running: bool) -> SamplerStats {
        let rounds = self.rounds.load(Relaxed);
        let ended = *self.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (wall, cpu) = match (ended, self.started.get()) {
            (Some((wall, cpu_end)), Some((_, cpu_start))) => {
                (wall, cpu_end.zip(*cpu_start).map(|(e, s)| e.saturating_sub(s)))
            }
            (None, Some((start, cpu_start))) => {
                let now = thread_cpu_ns(self.tid.get().copied());
                (start.elapsed(), now.zip(*cpu_start).map(|(e, s)| e.saturating_sub(s)))
            }
            (_, None) => (Duration::ZERO, None),
        };
        SamplerStats {
            interval: config.interval,
            running,
            devices: self.devices.load(Relaxed) as usize,
            rounds,
            wall,
            cpu: cpu.map(Duration::from_nanos),
            setup_cpu: self.setup_cpu_ns.get().copied().flatten().map(Duration::from_nanos),
            mean_round: Duration::from_nanos(self.round_ns_total.load(Relaxed) / rounds.max(1)),
            max_round: Duration::from_nanos(self.round_ns_max.load(Relaxed)),
            pcie_source: *self.pcie_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }

    fn set_pcie_source(&self, source: &'static str) {
        *self.pcie_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = source;
    }
}

/// CPU time of a thread of this process, in ns: the on-CPU time of `/proc/.../schedstat`
/// (nanosecond resolution, unlike `stat`'s clock ticks). `None` for the calling thread.
fn thread_cpu_ns(tid: Option<u32>) -> Option<u64> {
    let path = match tid {
        Some(t) => format!("/proc/self/task/{t}/schedstat"),
        None => "/proc/thread-self/schedstat".to_owned(),
    };
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

/// The calling thread's kernel id (`/proc/thread-self` links to `<pid>/task/<tid>`).
fn current_tid() -> Option<u32> {
    std::fs::read_link("/proc/thread-self").ok()?.file_name()?.to_str()?.parse().ok()
}

/// The sampler thread's body. Whatever happens, it ends by marking the monitor finished, so
/// [`super::stop`] never waits on a thread that is gone.
pub(super) fn run(shared: Arc<Shared>) {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| sample_until_stopped(&shared)));
    let mut state = shared.lock();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            note_once(&e);
            state.discovery.get_or_insert(Err(e));
        }
        Err(_) => note_once("the device sampler stopped after a panic in NVML; device metrics end here"),
    }
    state.discovery.get_or_insert(Err(super::MonitorError::Call {
        call: "sampler",
        message: "the sampler ended before discovering the devices".into(),
    }));
    state.finished = true;
    shared.changed.notify_all();
}

fn sample_until_stopped(shared: &Shared) -> Result<(), super::MonitorError> {
    let counters = &shared.counters;
    if let Some(tid) = current_tid() {
        let _ = counters.tid.set(tid);
    }
    let cpu_before_setup = thread_cpu_ns(None);
    let nvml = library::nvml()?;
    let gpus = discovery::discover(nvml)?;
    let config = &shared.config;
    let mut probes = Vec::with_capacity(gpus.len());
    let mut slots = Vec::with_capacity(gpus.len());
    for info in gpus {
        match nvml.device_by_index(info.index) {
            Ok(device) => {
                probes.push(Probe::new(device, config.interval));
                slots.push(DeviceSlot::new(info, config.history));
            }
            Err(e) => note_once(format_args!("GPU {} is left out of device monitoring: {e}", info.index)),
        }
    }
    if slots.is_empty() {
        return Err(super::MonitorError::NoDevices);
    }
    counters.devices.store(slots.len() as u64, Relaxed);
    let _ = shared.devices.set(slots);
    let slots = shared.devices();
    let _ = counters.setup_cpu_ns.set(thread_cpu_ns(None).zip(cpu_before_setup).map(|(a, b)| a.saturating_sub(b)));
    {
        let mut state = shared.lock();
        state.discovery = Some(Ok(()));
        shared.changed.notify_all();
    }
    let start = Instant::now();
    let _ = counters.started.set((start, thread_cpu_ns(None)));
    let mut next = start;
    let mut round = 0u64;
    while shared.sleep_until(next) {
        let t = Instant::now();
        let mut source = None;
        for (probe, slot) in probes.iter_mut().zip(slots) {
            let (sample, tx, rx) = probe.read(round);
            slot.lock().push(sample, tx, rx);
            let s = probe.pcie.source();
            source = Some(if source.is_none_or(|t| t == s) { s } else { "mixed" });
        }
        counters.set_pcie_source(source.unwrap_or("none"));
        let took = t.elapsed().as_nanos() as u64;
        counters.rounds.fetch_add(1, Relaxed);
        counters.round_ns_total.fetch_add(took, Relaxed);
        counters.round_ns_max.fetch_max(took, Relaxed);
        round += 1;
        // A fixed rate; rounds missed (a suspended process, a slow driver) are skipped, not
        // made up in a burst.
        next += config.interval;
        let now = Instant::now();
        if next < now {
            next = now + config.interval;
        }
    }
    *counters.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some((start.elapsed(), thread_cpu_ns(None)));
    Ok(())
}

/// Queries, as bits of [`Probe::unsupported`].
mod query {
    pub const UTILIZATION: u32 = 1 << 0;
    pub const MEMORY: u32 = 1 << 1;
    pub const TEMPERATURE: u32 = 1 << 2;
    pub const POWER: u32 = 1 << 3;
    pub const POWER_LIMIT: u32 = 1 << 4;
    pub const SM_CLOCK: u32 = 1 << 5;
    pub const MEMORY_CLOCK: u32 = 1 << 6;
    pub const THROTTLE: u32 = 1 << 7;
    pub const LINK_GENERATION: u32 = 1 << 8;
    pub const LINK_WIDTH: u32 = 1 << 9;
}

/// Where a device's PCIe throughput comes from.
#[derive(Debug)]
enum Pcie {
    /// NVML's cumulative byte counters (field values); the previous reading: (tx, rx, at ns).
    Counters(Option<(u64, u64, u64)>),
    /// `nvmlDeviceGetPcieThroughput`: asked every `every` rounds; when it was last asked.
    Windowed {
        every: u64,
        last_ns: Option<u64>,
    },
    None,
}

impl Pcie {
    fn source(&self) -> &'static str {
        match self {
            Pcie::Counters(_) => "counters",
            Pcie::Windowed { .. } => "windowed",
            Pcie::None => "none",
        }
    }
}

/// Reads one device, remembering what it does not support.
struct Probe<'n> {
    device: Device<'n>,
    unsupported: u32,
    lost: bool,
    pcie: Pcie,
    /// Rounds between readings of what changes slowly (power limit, link state): about 1 s.
    slow_every: u64,
    power_limit_w: Option<f64>,
    link: (Option<u32>, Option<u32>),
}

impl<'n> Probe<'n> {
    fn new(device: Device<'n>, interval: Duration) -> Self {
        let per_second = (Duration::from_secs(1).as_nanos() / interval.as_nanos().max(1)).max(1) as u64;
        Probe {
            device,
            unsupported: 0,
            lost: false,
            pcie: Pcie::Counters(None),
            slow_every: per_second,
            power_limit_w: None,
            link: (None, None),
        }
    }

    /// Asks one query unless the device said it does not support it.
    fn ask<T>(&mut self, q: u32, f: impl FnOnce(&Device<'n>) -> Result<T, NvmlError>) -> Option<T> {
        if self.unsupported & q != 0 {
            return None;
        }
        match f(&self.device) {
            Ok(v) => Some(v),
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::NoPermission) => {
                self.unsupported |= q;
                None
            }
            Err(NvmlError::GpuLost) if !self.lost => {
                self.lost = true;
                note_once("NVML reports a GPU lost (fallen off the bus); its device metrics stop");
                None
            }
            Err(_) => None,
        }
    }

    /// One sample, and the bytes sent and received over PCIe since the previous one.
    fn read(&mut self, round: u64) -> (Sample, f64, f64) {
        let time_ns = crate::clock::now_ns();
        if round % self.slow_every == 0 {
            self.power_limit_w = self.ask(query::POWER_LIMIT, |d| d.enforced_power_limit()).map(|mw| mw as f64 / 1e3);
            self.link = (
                self.ask(query::LINK_GENERATION, |d| d.current_pcie_link_gen()),
                self.ask(query::LINK_WIDTH, |d| d.current_pcie_link_width()),
            );
        }
        let utilization = self.ask(query::UTILIZATION, |d| d.utilization_rates());
        let memory = self.ask(query::MEMORY, |d| d.memory_info());
        let (tx_rate, rx_rate, tx, rx) = self.pcie(time_ns, round);
        let sample = Sample {
            time_ns,
            gpu_utilization_pct: utilization.as_ref().map(|u| u.gpu),
            memory_utilization_pct: utilization.as_ref().map(|u| u.memory),
            memory_used_bytes: memory.as_ref().map(|m| m.used),
            memory_free_bytes: memory.as_ref().map(|m| m.free),
            temperature_c: self.ask(query::TEMPERATURE, |d| d.temperature(TemperatureSensor::Gpu)),
            power_w: self.ask(query::POWER, |d| d.power_usage()).map(|mw| mw as f64 / 1e3),
            power_limit_w: self.power_limit_w,
            sm_clock_mhz: self.ask(query::SM_CLOCK, |d| d.clock_info(Clock::SM)),
            memory_clock_mhz: self.ask(query::MEMORY_CLOCK, |d| d.clock_info(Clock::Memory)),
            pcie_tx_bytes_per_s: tx_rate,
            pcie_rx_bytes_per_s: rx_rate,
            pcie_generation: self.link.0,
            pcie_width: self.link.1,
            throttle_reasons: self.ask(query::THROTTLE, |d| d.current_throttle_reasons()).map(|r| r.bits()),
        };
        (sample, tx, rx)
    }

    /// PCIe rates (tx, rx in bytes/s) and bytes moved since the previous reading (tx, rx).
    fn pcie(&mut self, now_ns: u64, round: u64) -> (Option<f64>, Option<f64>, f64, f64) {
        match self.pcie {
            Pcie::Counters(previous) => match read_counters(&self.device) {
                Ok((tx, rx, at_ns)) => {
                    let at_ns = if at_ns == 0 { now_ns } else { at_ns };
                    self.pcie = Pcie::Counters(Some((tx, rx, at_ns)));
                    match previous {
                        // A counter that went backwards wrapped or was reset: skip that interval.
                        Some((ptx, prx, pat)) if at_ns > pat && tx >= ptx && rx >= prx => {
                            let s = (at_ns - pat) as f64 / 1e9;
                            let (dtx, drx) = ((tx - ptx) as f64, (rx - prx) as f64);
                            (Some(dtx / s), Some(drx / s), dtx, drx)
                        }
                        _ => (None, None, 0.0, 0.0),
                    }
                }
                Err(true) => {
                    self.pcie = Pcie::Windowed { every: self.slow_every, last_ns: None };
                    (None, None, 0.0, 0.0)
                }
                Err(false) => (None, None, 0.0, 0.0),
            },
            Pcie::Windowed { every, last_ns } => {
                if round % every != 0 {
                    return (None, None, 0.0, 0.0);
                }
                let rates = (
                    self.device.pcie_throughput(PcieUtilCounter::Send),
                    self.device.pcie_throughput(PcieUtilCounter::Receive),
                );
                match rates {
                    (Ok(tx_kb), Ok(rx_kb)) => {
                        let (tx, rx) = (f64::from(tx_kb) * 1e3, f64::from(rx_kb) * 1e3);
                        self.pcie = Pcie::Windowed { every, last_ns: Some(now_ns) };
                        // Bytes moved are estimated from the 20 ms window over the time since
                        // the previous reading.
                        let s = last_ns.map_or(0.0, |l| now_ns.saturating_sub(l) as f64 / 1e9);
                        (Some(tx), Some(rx), tx * s, rx * s)
                    }
                    (Err(NvmlError::NotSupported), _) | (_, Err(NvmlError::NotSupported)) => {
                        self.pcie = Pcie::None;
                        (None, None, 0.0, 0.0)
                    }
                    _ => (None, None, 0.0, 0.0),
                }
            }
            Pcie::None => (None, None, 0.0, 0.0),
        }
    }
}

/// The cumulative PCIe byte counters and their timestamp (ns); `Err(true)` when the device
/// does not have them, `Err(false)` for a failure worth retrying.
fn read_counters(device: &Device<'_>) -> Result<(u64, u64, u64), bool> {
    let ids = [FieldId(NVML_FI_DEV_PCIE_COUNT_TX_BYTES), FieldId(NVML_FI_DEV_PCIE_COUNT_RX_BYTES)];
    let values = match device.field_values_for(&ids) {
        Ok(v) => v,
        Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::InvalidArg) => return Err(true),
        Err(_) => return Err(false),
    };
    let mut out = [0u64; 2];
    let mut at_us = 0i64;
    for (slot, value) in out.iter_mut().zip(values) {
        let sample = value.map_err(|_| true)?;
        *slot = match sample.value {
            Ok(SampleValue::U64(v)) => v,
            Ok(SampleValue::U32(v)) => u64::from(v),
            Ok(SampleValue::I64(v)) => u64::try_from(v).map_err(|_| false)?,
            Ok(SampleValue::F64(_)) => return Err(true),
            Err(NvmlError::NotSupported) => return Err(true),
            Err(_) => return Err(false),
        };
        at_us = at_us.max(sample.timestamp);
    }
    Ok((out[0], out[1], u64::try_from(at_us).unwrap_or(0).saturating_mul(1000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_bits_read_as_names() {
        assert_eq!(throttle_reason_names(0), Vec::<&str>::new());
        assert_eq!(throttle_reason_names(0x1 | 0x4), ["gpu_idle", "sw_power_cap"]);
        assert_eq!(throttle_reason_names(0x8000_0000), Vec::<&str>::new());
    }

    #[test]
    fn core_fraction_is_cpu_over_wall() {
        let s = SamplerStats {
            interval: Duration::from_millis(100),
            running: false,
            devices: 1,
            rounds: 100,
            wall: Duration::from_secs(10),
            cpu: Some(Duration::from_millis(5)),
            setup_cpu: None,
            mean_round: Duration::ZERO,
            max_round: Duration::ZERO,
            pcie_source: "counters",
        };
        assert_eq!(s.core_fraction(), Some(0.0005));
        assert_eq!(SamplerStats { cpu: None, ..s.clone() }.core_fraction(), None);
        assert_eq!(SamplerStats { wall: Duration::ZERO, ..s }.core_fraction(), None);
    }

    #[test]
    fn this_threads_cpu_time_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            let before = thread_cpu_ns(None).expect("schedstat");
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = x.wrapping_add(i * i);
            }
            std::hint::black_box(x);
            assert!(thread_cpu_ns(None).expect("schedstat") > before);
            let tid = current_tid().expect("tid");
            assert!(thread_cpu_ns(Some(tid)).is_some());
        }
    }
}
