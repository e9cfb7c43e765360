//! The background sampler: one thread that reads every GPU through NVML into the bounded
//! history, within a CPU budget it measures itself.
//!
//! Rounds sit on a grid of the configured interval (default 100 ms). A round makes every
//! reading of every device, so a sample is coherent; the limit and link state, which change
//! slowly, are read at most once a second and held in between. What a round costs differs by
//! machine: on the H200 of docs/monitor.md a full round of NVML readings costs about 1 ms of
//! CPU (the values come from the GPU's firmware), and waking the thread up about 60 µs more. So
//! rounds are paid from a token bucket: it fills at 80 % of the budget (default 0.1 % of one
//! core), each round is charged the thread's CPU time since the previous one (measured with
//! `CLOCK_THREAD_CPUTIME_ID`, wake-up included), and a round waits for the grid point at which
//! the bucket holds what a round costs. Where rounds are cheap they run on every grid point;
//! where they are dear they run less often, and [`SamplerStats::mean_spacing`] says how often.
//! A reading a device answers "not supported" is not made again.
//!
//! PCIe throughput comes from GPM (Hopper and later: the exact average between two readings),
//! else from 64-bit byte counters, else from NVML's windowed query (a 20 ms look, blocking).

use super::discovery;
use super::ring::Timed;
use super::{library, DeviceSlot, MonitorConfig, Shared};
use crate::diagnostics::note_once;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES};
use nvml_wrapper::{Device, GpmSample, Nvml};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One round's reading of one GPU. A field is `None` where the device does not report it; the
/// power limit and link state are held from their last reading (at most a second old).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// When it was taken, on gpuspan's host clock (Unix-epoch ns, like every record).
    pub time_ns: u64,
    /// Percent of the last sample period (1/6 s to 1 s, by product) in which a kernel ran.
    pub gpu_utilization_pct: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub memory_utilization_pct: Option<u32>,
    /// Device memory in use.
    pub memory_used_bytes: Option<u64>,
    /// Device memory free.
    pub memory_free_bytes: Option<u64>,
    /// GPU die temperature, °C.
    pub temperature_c: Option<u32>,
    /// Power drawn, W.
    pub power_w: Option<f64>,
    /// The enforced power limit.
    pub power_limit_w: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub memory_clock_mhz: Option<u32>,
    /// Bytes per second the GPU sent over PCIe (to the host), averaged since the previous PCIe
    /// reading (GPM, counters) or over a 20 ms look (windowed).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Bytes per second the GPU received over PCIe (from the host), likewise.
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// The link's generation and width (read at most once a second).
    pub pcie_generation: Option<u32>,
    /// The link's width in lanes (read at most once a second).
    pub pcie_width: Option<u32>,
    /// NVML's clock throttle reason bits (spans and the summary show them by name).
    pub throttle_reasons: Option<u64>,
}

impl Timed for Sample {
    fn time_ns(&self) -> u64 {
        self.time_ns
    }
}

/// NVML's clock throttle reasons (`nvmlClocksThrottleReason*`, stable values) and their names.
pub(crate) const THROTTLE_REASONS: [(u64, &str); 9] = [
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
pub(crate) fn throttle_reason_names(bits: u64) -> Vec<&'static str> {
    THROTTLE_REASONS.iter().filter(|(bit, _)| bits & bit != 0).map(|(_, name)| *name).collect()
}

/// What the sampler did and what it cost.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplerStats {
    /// The grid rounds sit on.
    pub interval: Duration,
    /// The thread is still sampling.
    pub running: bool,
    /// GPUs sampled.
    pub devices: usize,
    /// Rounds taken after the first (which is part of the setup); each reads every device.
    pub rounds: u64,
    /// Mean time between rounds: the interval where rounds are cheap, longer where the CPU
    /// budget makes them wait.
    pub mean_spacing: Duration,
    /// Time since the first round (until the last, once stopped).
    pub wall: Duration,
    /// CPU time the sampler thread spent over `wall` (Linux; `None` elsewhere).
    pub cpu: Option<Duration>,
    /// CPU time spent once, before `wall` starts: loading NVML, describing the devices, and a
    /// first round that makes every reading to learn what each costs.
    pub setup_cpu: Option<Duration>,
    /// Mean wall time of a round.
    pub mean_round: Duration,
    /// Longest round.
    pub max_round: Duration,
    /// Where PCIe throughput comes from: `gpm`, `counters`, `windowed` (NVML's 20 ms query),
    /// `none`, or `mixed` when devices differ.
    pub pcie_source: &'static str,
    /// The CPU budget the schedule keeps to, as a fraction of one core.
    pub cpu_budget: f64,
    /// Each kind of reading: what it costs and how many were made.
    pub queries: Vec<QueryStats>,
}

impl SamplerStats {
    /// The sampler's CPU time as a fraction of one core over its run (0.001 is 0.1 %).
    pub fn core_fraction(&self) -> Option<f64> {
        let wall = self.wall.as_secs_f64();
        Some(self.cpu?.as_secs_f64() / wall).filter(|_| wall > 0.0)
    }
}

/// The sampler's running counts, read by the summary and the `testing` diagnostics.
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
    queries: Mutex<Vec<QueryStats>>,
}

impl Counters {
    pub(super) fn stats(&self, config: &MonitorConfig, running: bool) -> SamplerStats {
        let rounds = self.rounds.load(Relaxed);
        let ended = *self.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (wall, cpu) = match (ended, self.started.get()) {
            (Some((wall, cpu_end)), Some((_, cpu_start))) => {
                (wall, cpu_end.zip(*cpu_start).map(|(e, s)| e.saturating_sub(s)))
            }
            (None, Some((start, cpu_start))) => {
                let now = self.tid.get().and_then(|&t| thread_cpu_ns(t));
                (start.elapsed(), now.zip(*cpu_start).map(|(e, s)| e.saturating_sub(s)))
            }
            (_, None) => (Duration::ZERO, None),
        };
        SamplerStats {
            interval: config.interval,
            running,
            devices: self.devices.load(Relaxed) as usize,
            rounds,
            mean_spacing: if rounds == 0 { config.interval } else { wall / rounds as u32 },
            wall,
            cpu: cpu.map(Duration::from_nanos),
            setup_cpu: self.setup_cpu_ns.get().copied().flatten().map(Duration::from_nanos),
            mean_round: Duration::from_nanos(self.round_ns_total.load(Relaxed) / rounds.max(1)),
            max_round: Duration::from_nanos(self.round_ns_max.load(Relaxed)),
            pcie_source: *self.pcie_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            cpu_budget: config.cpu_budget(),
            queries: self.queries.lock().map(|q| q.clone()).unwrap_or_default(),
        }
    }

    /// Mean time between rounds so far (the interval before the first).
    pub(super) fn spacing(&self, interval: Duration) -> Duration {
        let rounds = self.rounds.load(Relaxed);
        match self.started.get() {
            Some((start, _)) if rounds > 0 => (start.elapsed() / rounds as u32).max(interval),
            _ => interval,
        }
    }

    /// Publishes the probes' state after a round: the PCIe source and the per-query costs.
    fn publish(&self, probes: &[Probe<'_>], interval: Duration) {
        let mut source = None;
        for p in probes {
            let s = p.pcie_source();
            source = Some(if source.is_none_or(|t| t == s) { s } else { "mixed" });
        }
        *self.pcie_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = source.unwrap_or("none");
        let Ok(mut queries) = self.queries.lock() else { return };
        queries.clear();
        for (i, (name, _)) in probes.first().into_iter().flat_map(|p| p.query_stats()).enumerate() {
            let all = probes.iter().filter_map(|p| p.query_stats().nth(i).map(|(_, s)| s));
            let (mut calls, mut total, mut max, mut period) = (0, 0, 0, 0);
            for s in all {
                calls += s.calls;
                total += s.total_ns;
                max = max.max(s.max_ns);
                period = period.max(if s.unsupported { 0 } else { s.period });
            }
            queries.push(QueryStats {
                name,
                calls,
                mean_cpu: Duration::from_nanos(total / calls.max(1)),
                max_cpu: Duration::from_nanos(max),
                min_period: interval * period as u32,
            });
        }
    }
}

/// CPU time of another thread of this process, in ns: the on-CPU time of its `schedstat`
/// (nanosecond resolution, unlike `stat`'s clock ticks; current as of its last switch, which
/// for a sampler that sleeps between rounds is its last round).
fn thread_cpu_ns(tid: u32) -> Option<u64> {
    let path = format!("/proc/self/task/{tid}/schedstat");
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

/// The calling thread's CPU time in ns, exact to the moment (`CLOCK_THREAD_CPUTIME_ID`
/// includes the slice in progress); Linux only.
fn own_cpu_ns() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec to write to; the clock id is a constant Linux knows.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
        }
    }
    None
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
    let cpu_before_setup = own_cpu_ns();
    let nvml = library::nvml()?;
    let gpus = discovery::discover(nvml)?;
    let config = &shared.config;
    let mut probes = Vec::with_capacity(gpus.len());
    let mut slots = Vec::with_capacity(gpus.len());
    for info in gpus {
        match nvml.device_by_index(info.index) {
            Ok(device) => {
                probes.push(Probe::new(device, nvml, config.interval));
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
    {
        let mut state = shared.lock();
        state.discovery = Some(Ok(()));
        shared.changed.notify_all();
    }
    let interval_ns = config.interval.as_nanos() as u64;
    // The first round makes every reading once, cold (NVML's first call of each kind costs
    // several times the later ones): part of the setup.
    for (probe, slot) in probes.iter_mut().zip(slots) {
        let (sample, tx, rx) = probe.read(0);
        slot.lock().push(sample, tx, rx);
    }
    counters.publish(&probes, config.interval);
    let _ = counters.setup_cpu_ns.set(own_cpu_ns().zip(cpu_before_setup).map(|(a, b)| a.saturating_sub(b)));
    let start = Instant::now();
    let _ = counters.started.set((start, own_cpu_ns()));
    // A fifth of the budget is left for what the bucket cannot see coming: a round dearer than
    // the estimate, the last round of a run.
    let mut bucket = Bucket::new(config.cpu_budget() * 0.8);
    let mut filled_at = start;
    let mut cpu_until = own_cpu_ns();
    let mut step = 0u64;
    loop {
        let now = Instant::now();
        bucket.fill(now.duration_since(filled_at).as_nanos() as f64);
        filled_at = now;
        // The first grid point after the previous round at which the bucket has filled.
        let ready_ns = (now.duration_since(start).as_nanos() as f64 + bucket.wait_ns()) as u64;
        step = (step + 1).max(ready_ns.div_ceil(interval_ns));
        if !shared.sleep_until(start + Duration::from_nanos(step * interval_ns)) {
            break;
        }
        let t = Instant::now();
        for (probe, slot) in probes.iter_mut().zip(slots) {
            let (sample, tx, rx) = probe.read(step);
            slot.lock().push(sample, tx, rx);
        }
        counters.publish(&probes, config.interval);
        // Charged: the thread's CPU since the previous round, waking up included (without a
        // thread CPU clock, the round's wall time).
        let took = t.elapsed().as_nanos() as u64;
        let cpu = own_cpu_ns();
        let spent = match (cpu, cpu_until) {
            (Some(now), Some(before)) => now.saturating_sub(before),
            _ => took,
        };
        cpu_until = cpu;
        bucket.fill(t.duration_since(filled_at).as_nanos() as f64);
        filled_at = t;
        bucket.charge(spent as f64);
        counters.rounds.fetch_add(1, Relaxed);
        counters.round_ns_total.fetch_add(took, Relaxed);
        counters.round_ns_max.fetch_max(took, Relaxed);
    }
    *counters.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((start.elapsed(), own_cpu_ns()));
    Ok(())
}

/// The readings the sampler makes. Each is scheduled on its own, from what it costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Query {
    Utilization,
    Memory,
    Temperature,
    Power,
    SmClock,
    MemoryClock,
    Throttle,
    PowerLimit,
    Link,
    Pcie,
}

impl Query {
    const ALL: [Query; 10] = [
        Query::Utilization,
        Query::Memory,
        Query::Temperature,
        Query::Power,
        Query::SmClock,
        Query::MemoryClock,
        Query::Throttle,
        Query::PowerLimit,
        Query::Link,
        Query::Pcie,
    ];

    fn name(self, pcie: &Pcie<'_>) -> &'static str {
        match self {
            Query::Utilization => "utilization",
            Query::Memory => "memory",
            Query::Temperature => "temperature",
            Query::Power => "power",
            Query::SmClock => "sm_clock",
            Query::MemoryClock => "memory_clock",
            Query::Throttle => "throttle_reasons",
            Query::PowerLimit => "power_limit",
            Query::Link => "pcie_link",
            Query::Pcie => match pcie {
                Pcie::Gpm { .. } => "pcie_throughput (gpm)",
                Pcie::Counters(_) => "pcie_throughput (counters)",
                Pcie::Windowed => "pcie_throughput (20 ms window)",
            },
        }
    }

    /// What changes slowly (limits, link state) is read about once a second at most.
    fn slow(self) -> bool {
        matches!(self, Query::PowerLimit | Query::Link)
    }
}

/// What one kind of reading costs and when it is next due.
#[derive(Debug, Clone, Copy, Default)]
struct Schedule {
    /// Read at most every `period` grid steps, next at step `next`.
    period: u64,
    next: u64,
    calls: u64,
    total_ns: u64,
    max_ns: u64,
    unsupported: bool,
}

/// What one kind of reading costs, over every device.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QueryStats {
    /// The reading (`utilization`, `memory`, `pcie_gpm`, ...).
    pub name: &'static str,
    /// Readings made.
    pub calls: u64,
    /// Sampler-thread CPU time per reading (the first, cold reading of each kind included).
    pub mean_cpu: Duration,
    /// The dearest reading.
    pub max_cpu: Duration,
    /// Read at most this often (one interval, or a second for what changes slowly).
    pub min_period: Duration,
}

/// Pays for rounds out of the CPU budget: fills at `rate` CPU-ns per wall-ns, is charged what
/// each round cost, and lets a round start once it holds what rounds cost (a smoothed
/// estimate), so the thread's CPU over any stretch of time stays within the rate.
#[derive(Debug, Clone)]
struct Bucket {
    rate: f64,
    tokens: f64,
    /// Smoothed CPU cost of a round, in ns (0 until the first is measured).
    estimate: f64,
}

impl Bucket {
    fn new(rate: f64) -> Self {
        Bucket { rate, tokens: 0.0, estimate: 0.0 }
    }

    /// At most two seconds of budget, or two rounds, whichever is more.
    fn cap(&self) -> f64 {
        (self.rate * 2e9).max(2.0 * self.estimate)
    }

    fn fill(&mut self, wall_ns: f64) {
        self.tokens = (self.tokens + self.rate * wall_ns).min(self.cap());
    }

    /// Wall time until the bucket holds the price of a round.
    fn wait_ns(&self) -> f64 {
        ((self.estimate - self.tokens) / self.rate).max(0.0)
    }

    fn charge(&mut self, spent_ns: f64) {
        self.tokens -= spent_ns;
        self.estimate = if self.estimate == 0.0 { spent_ns } else { 0.7 * self.estimate + 0.3 * spent_ns };
    }
}

/// The calling thread's CPU time in ns: what a reading costs the machine, whether NVML waits
/// for the GPU's firmware by spinning or by sleeping. Wall time where there is no such clock.
fn cost_clock() -> u64 {
    if let Some(ns) = own_cpu_ns() {
        return ns;
    }
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Where a device's PCIe throughput comes from.
enum Pcie<'n> {
    /// GPM (Hopper and later): the average over the period, from two performance samples; the
    /// previous sample and when it was taken.
    Gpm { previous: Option<(GpmSample<'n>, u64)> },
    /// 64-bit cumulative byte counters (field values); the previous reading (tx, rx, at ns).
    /// Drivers that give 32-bit counters are not used: those wrap every 70 ms at 63 GB/s.
    Counters(Option<(u64, u64, u64)>),
    /// `nvmlDeviceGetPcieThroughput`: a 20 ms window, blocking, read at most once a second.
    /// Where the device has not even that, the reading is marked unsupported.
    Windowed,
}

impl std::fmt::Debug for Pcie<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.source())
    }
}

impl Pcie<'_> {
    fn source(&self) -> &'static str {
        match self {
            Pcie::Gpm { .. } => "gpm",
            Pcie::Counters(_) => "counters",
            Pcie::Windowed => "windowed",
        }
    }
}

/// Reads one device on the schedule its CPU budget allows, holding each value until it is
/// read again.
struct Probe<'n> {
    device: Device<'n>,
    nvml: &'n Nvml,
    schedules: [Schedule; Query::ALL.len()],
    /// The newest value of everything.
    held: Sample,
    /// When PCIe throughput was last read, for the bytes moved since.
    pcie_read_ns: Option<u64>,
    pcie: Pcie<'n>,
    lost: bool,
}

impl<'n> Probe<'n> {
    fn new(device: Device<'n>, nvml: &'n Nvml, interval: Duration) -> Self {
        let per_second = (Duration::from_secs(1).as_nanos() / interval.as_nanos().max(1)).max(1) as u64;
        let pcie = choose_pcie(&device);
        let schedules =
            Query::ALL.map(|q| Schedule { period: if q.slow() { per_second } else { 1 }, ..Schedule::default() });
        Probe { device, nvml, schedules, held: Sample::default(), pcie_read_ns: None, pcie, lost: false }
    }

    /// Runs one reading unless the device said it does not support it.
    fn ask<T>(&mut self, q: usize, f: impl FnOnce(&Device<'n>) -> Result<T, NvmlError>) -> Option<T> {
        match f(&self.device) {
            Ok(v) => Some(v),
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::NoPermission) => {
                self.schedules[q].unsupported = true;
                None
            }
            Err(NvmlError::GpuLost) => {
                if !self.lost {
                    note_once("NVML reports a GPU lost (fallen off the bus); its device metrics stop");
                }
                self.lost = true;
                None
            }
            Err(_) => None,
        }
    }

    /// One sample at grid step `step`, and the bytes sent and received over PCIe since the
    /// previous PCIe reading.
    fn read(&mut self, step: u64) -> (Sample, f64, f64) {
        let time_ns = crate::clock::now_ns();
        let mut io = (0.0, 0.0);
        for (i, q) in Query::ALL.into_iter().enumerate() {
            let s = self.schedules[i];
            if self.lost || s.unsupported || step < s.next {
                continue;
            }
            let c0 = cost_clock();
            match q {
                Query::Utilization => {
                    if let Some(u) = self.ask(i, |d| d.utilization_rates()) {
                        self.held.gpu_utilization_pct = Some(u.gpu);
                        self.held.memory_utilization_pct = Some(u.memory);
                    }
                }
                Query::Memory => {
                    if let Some(m) = self.ask(i, |d| d.memory_info()) {
                        self.held.memory_used_bytes = Some(m.used);
                        self.held.memory_free_bytes = Some(m.free);
                    }
                }
                Query::Temperature => {
                    if let Some(t) = self.ask(i, |d| d.temperature(TemperatureSensor::Gpu)) {
                        self.held.temperature_c = Some(t);
                    }
                }
                Query::Power => {
                    if let Some(mw) = self.ask(i, |d| d.power_usage()) {
                        self.held.power_w = Some(f64::from(mw) / 1e3);
                    }
                }
                Query::SmClock => {
                    if let Some(c) = self.ask(i, |d| d.clock_info(Clock::SM)) {
                        self.held.sm_clock_mhz = Some(c);
                    }
                }
                Query::MemoryClock => {
                    if let Some(c) = self.ask(i, |d| d.clock_info(Clock::Memory)) {
                        self.held.memory_clock_mhz = Some(c);
                    }
                }
                Query::Throttle => {
                    if let Some(r) = self.ask(i, |d| d.current_throttle_reasons()) {
                        self.held.throttle_reasons = Some(r.bits());
                    }
                }
                Query::PowerLimit => {
                    if let Some(mw) = self.ask(i, |d| d.enforced_power_limit()) {
                        self.held.power_limit_w = Some(f64::from(mw) / 1e3);
                    }
                }
                Query::Link => {
                    if let Some(g) = self.ask(i, |d| d.current_pcie_link_gen()) {
                        self.held.pcie_generation = Some(g);
                    }
                    if let Some(w) = self.ask(i, |d| d.current_pcie_link_width()) {
                        self.held.pcie_width = Some(w);
                    }
                }
                Query::Pcie => io = self.read_pcie(i, time_ns),
            }
            let cost = cost_clock().saturating_sub(c0);
            let s = &mut self.schedules[i];
            s.calls += 1;
            s.total_ns += cost;
            s.max_ns = s.max_ns.max(cost);
            s.next = step + s.period;
        }
        if self.lost {
            self.held = Sample::default();
        }
        self.held.time_ns = time_ns;
        (self.held.clone(), io.0, io.1)
    }

    /// Updates the held PCIe rates; returns the bytes (tx, rx) moved since the previous reading.
    fn read_pcie(&mut self, q: usize, now_ns: u64) -> (f64, f64) {
        let secs = |from: u64| now_ns.saturating_sub(from) as f64 / 1e9;
        // The rates, and the seconds they were averaged over (for the bytes they imply).
        let reading: Option<((f64, f64), f64)> = match &mut self.pcie {
            Pcie::Gpm { previous } => match self.device.gpm_sample() {
                Ok(sample) => {
                    let reading = previous.as_ref().and_then(|(old, at)| {
                        let ids = [GpmMetricId::PcieTxPerSec, GpmMetricId::PcieRxPerSec];
                        let values = gpm_metrics_get(self.nvml, old, &sample, &ids).ok()?;
                        let mut rates =
                            values.into_iter().map(|v| v.ok().map(|m| m.value * unit_bytes(&m.metric_info.unit)));
                        Some(((rates.next()??, rates.next()??), secs(*at)))
                    });
                    *previous = Some((sample, now_ns));
                    reading
                }
                Err(_) => None,
            },
            Pcie::Counters(previous) => {
                let now = read_counters(&self.device);
                let reading = match (now, *previous) {
                    (Some((tx, rx, at)), Some((ptx, prx, pat))) if at > pat && tx >= ptx && rx >= prx => {
                        let s = (at - pat) as f64 / 1e9;
                        Some((((tx - ptx) as f64 / s, (rx - prx) as f64 / s), s))
                    }
                    _ => None,
                };
                if now.is_some() {
                    *previous = now;
                }
                reading
            }
            Pcie::Windowed => {
                let tx = self.ask(q, |d| d.pcie_throughput(PcieUtilCounter::Send));
                let rx = self.ask(q, |d| d.pcie_throughput(PcieUtilCounter::Receive));
                // NVML reports KB/s over a 20 ms look: the bytes over the whole time since the
                // previous reading are an estimate.
                let since = self.pcie_read_ns.map_or(0.0, secs);
                tx.zip(rx).map(|(t, r)| ((f64::from(t) * 1e3, f64::from(r) * 1e3), since))
            }
        };
        self.pcie_read_ns = Some(now_ns);
        let Some(((tx, rx), s)) = reading else {
            return (0.0, 0.0);
        };
        self.held.pcie_tx_bytes_per_s = Some(tx);
        self.held.pcie_rx_bytes_per_s = Some(rx);
        (tx * s, rx * s)
    }

    fn query_stats(&self) -> impl Iterator<Item = (&'static str, Schedule)> + '_ {
        Query::ALL.into_iter().zip(self.schedules).map(|(q, s)| (q.name(&self.pcie), s))
    }

    fn pcie_source(&self) -> &'static str {
        let i = Query::ALL.iter().position(|q| *q == Query::Pcie).unwrap_or(0);
        if self.schedules[i].unsupported {
            "none"
        } else {
            self.pcie.source()
        }
    }
}

/// The best PCIe source this device has.
fn choose_pcie<'n>(device: &Device<'n>) -> Pcie<'n> {
    if device.gpm_support().unwrap_or(false) {
        if let Ok(sample) = device.gpm_sample() {
            return Pcie::Gpm { previous: Some((sample, crate::clock::now_ns())) };
        }
    }
    if let Some(first) = read_counters(device) {
        return Pcie::Counters(Some(first));
    }
    Pcie::Windowed
}

/// Bytes per unit of a GPM rate, from the unit NVML states (`MiB/sec` for PCIe on the drivers
/// seen so far, which is also what nvml.h documents and the default here).
fn unit_bytes(unit: &str) -> f64 {
    let u = unit.to_ascii_lowercase();
    if u.starts_with("gib") {
        (1u64 << 30) as f64
    } else if u.starts_with("gb") {
        1e9
    } else if u.starts_with("kib") {
        1024.0
    } else if u.starts_with("kb") {
        1e3
    } else if u.starts_with("mb") {
        1e6
    } else if u.starts_with("b/") || u.starts_with("bytes") {
        1.0
    } else {
        (1u64 << 20) as f64
    }
}

/// The cumulative PCIe byte counters and their timestamp (ns), when the driver gives them as
/// 64-bit values.
fn read_counters(device: &Device<'_>) -> Option<(u64, u64, u64)> {
    let ids = [FieldId(NVML_FI_DEV_PCIE_COUNT_TX_BYTES), FieldId(NVML_FI_DEV_PCIE_COUNT_RX_BYTES)];
    let values = device.field_values_for(&ids).ok()?;
    let mut out = [0u64; 2];
    let mut at_us = 0i64;
    for (slot, value) in out.iter_mut().zip(values) {
        let sample = value.ok()?;
        let Ok(SampleValue::U64(v)) = sample.value else { return None };
        *slot = v;
        at_us = at_us.max(sample.timestamp);
    }
    let at_ns = u64::try_from(at_us).ok().filter(|&t| t > 0)?.saturating_mul(1000);
    Some((out[0], out[1], at_ns))
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
            mean_spacing: Duration::from_millis(100),
            wall: Duration::from_secs(10),
            cpu: Some(Duration::from_millis(5)),
            setup_cpu: None,
            mean_round: Duration::ZERO,
            max_round: Duration::ZERO,
            pcie_source: "gpm",
            cpu_budget: 0.001,
            queries: Vec::new(),
        };
        assert_eq!(s.core_fraction(), Some(0.0005));
        assert_eq!(SamplerStats { cpu: None, ..s.clone() }.core_fraction(), None);
        assert_eq!(SamplerStats { wall: Duration::ZERO, ..s }.core_fraction(), None);
    }

    /// Runs the bucket against a simulated sampler: rounds cost `round_ns` of CPU on a
    /// `grid_ns` grid, for `seconds`; returns the CPU spent as a fraction of one core.
    fn simulate(rate: f64, round_ns: f64, grid_ns: u64, seconds: u64) -> (f64, u64) {
        let mut b = Bucket::new(rate);
        let (mut now, mut spent, mut rounds, mut filled_at) = (0u64, 0.0, 0u64, 0u64);
        let end = seconds * 1_000_000_000;
        loop {
            b.fill((now - filled_at) as f64);
            filled_at = now;
            let ready = now + b.wait_ns() as u64;
            now = (now + grid_ns).max(ready.div_ceil(grid_ns) * grid_ns);
            if now >= end {
                return (spent / end as f64, rounds);
            }
            b.fill((now - filled_at) as f64);
            filled_at = now;
            b.charge(round_ns);
            spent += round_ns;
            rounds += 1;
        }
    }

    #[test]
    fn dear_rounds_wait_for_the_budget_and_cheap_ones_run_on_every_grid_point() {
        // The H200's shape: a full round about 1.06 ms of CPU, a 100 ms grid, 0.08 % of a core.
        let (fraction, rounds) = simulate(0.0008, 1_060_000.0, 100_000_000, 60);
        assert!(fraction <= 0.0008 && fraction > 0.0007, "{fraction}");
        assert!((40..=50).contains(&rounds), "{rounds}");
        // Rounds of 50 µs fit the budget at every grid point.
        let (fraction, rounds) = simulate(0.0008, 50_000.0, 100_000_000, 10);
        assert_eq!(rounds, 99);
        assert!(fraction < 0.0008, "{fraction}");
    }

    #[test]
    fn a_round_dearer_than_the_estimate_is_paid_back_before_the_next() {
        let mut b = Bucket::new(0.001);
        b.charge(1_000_000.0);
        assert_eq!(b.estimate, 1_000_000.0);
        // 1 ms owed and 1 ms to save up: 2 s at 0.1 %.
        assert_eq!(b.wait_ns(), 2e9);
        b.fill(2e9);
        assert_eq!(b.wait_ns(), 0.0);
        b.fill(1e12);
        assert_eq!(b.tokens, b.cap());
    }

    #[test]
    fn gpm_units() {
        assert_eq!(unit_bytes("MiB/sec"), 1_048_576.0);
        assert_eq!(unit_bytes("MB/s"), 1e6);
        assert_eq!(unit_bytes("bytes/sec"), 1.0);
        assert_eq!(unit_bytes(""), 1_048_576.0);
    }

    #[test]
    fn the_cost_clock_advances_with_work() {
        let a = cost_clock();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(cost_clock() > a);
    }

    #[test]
    fn this_threads_cpu_time_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            let before = own_cpu_ns().expect("CLOCK_THREAD_CPUTIME_ID");
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = x.wrapping_add(i * i);
            }
            std::hint::black_box(x);
            assert!(own_cpu_ns().expect("clock") > before);
            let tid = current_tid().expect("tid");
            assert!(thread_cpu_ns(tid).is_some());
        }
    }
}
