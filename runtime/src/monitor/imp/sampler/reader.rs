//! Reading one device: each kind of reading on its own schedule, from what it costs, holding
//! every value until it is read again.

use super::budget::cost_clock;
use super::pcie::{self, Pcie};
use crate::diagnostics::note_once;
use crate::monitor::imp::vendor::DeviceReader;
use crate::monitor::Sample;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, Nvml};
use std::time::Duration;

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

/// What one kind of reading costs and when it is next due (every library's readers keep one
/// per kind of reading).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Schedule {
    /// Read at most every `period` grid steps, next at step `next`.
    pub(crate) period: u64,
    pub(crate) next: u64,
    pub(crate) calls: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) unsupported: bool,
}

impl Schedule {
    /// Read every grid step, or about once a second for what changes slowly.
    pub(crate) fn new(slow: bool, interval: Duration) -> Self {
        let per_second = (Duration::from_secs(1).as_nanos() / interval.as_nanos().max(1)).max(1) as u64;
        Schedule { period: if slow { per_second } else { 1 }, ..Schedule::default() }
    }

    /// Whether the reading is due at grid step `step`.
    pub(crate) fn due(&self, step: u64) -> bool {
        !self.unsupported && step >= self.next
    }

    /// Counts a reading made at `step` that cost `cost_ns` of CPU, and schedules the next.
    pub(crate) fn made(&mut self, step: u64, cost_ns: u64) {
        self.calls += 1;
        self.total_ns += cost_ns;
        self.max_ns = self.max_ns.max(cost_ns);
        self.next = step + self.period;
    }
}

/// Reads one device on the schedule its CPU budget allows, holding each value until it is
/// read again.
pub(crate) struct NvmlReader<'n> {
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

impl<'n> NvmlReader<'n> {
    pub(crate) fn new(device: Device<'n>, nvml: &'n Nvml, interval: Duration) -> Self {
        let pcie = pcie::choose(&device);
        let schedules = Query::ALL.map(|q| Schedule::new(q.slow(), interval));
        NvmlReader { device, nvml, schedules, held: Sample::default(), pcie_read_ns: None, pcie, lost: false }
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
    fn read_round(&mut self, step: u64) -> (Sample, f64, f64) {
        let time_ns = crate::clock::now_ns();
        let mut io = (0.0, 0.0);
        for (i, q) in Query::ALL.into_iter().enumerate() {
            if self.lost || !self.schedules[i].due(step) {
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
            self.schedules[i].made(step, cost_clock().saturating_sub(c0));
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
                            values.into_iter().map(|v| v.ok().map(|m| m.value * pcie::unit_bytes(&m.metric_info.unit)));
                        Some(((rates.next()??, rates.next()??), secs(*at)))
                    });
                    *previous = Some((sample, now_ns));
                    reading
                }
                Err(_) => None,
            },
            Pcie::Counters(previous) => {
                let now = pcie::read_counters(&self.device);
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

    fn pcie_source_name(&self) -> &'static str {
        let i = Query::ALL.iter().position(|q| *q == Query::Pcie).unwrap_or(0);
        if self.schedules[i].unsupported {
            "none"
        } else {
            self.pcie.source()
        }
    }
}

impl DeviceReader for NvmlReader<'_> {
    fn read(&mut self, step: u64) -> (Sample, f64, f64) {
        self.read_round(step)
    }

    fn query_stats(&self) -> Vec<(&'static str, Schedule)> {
        Query::ALL.into_iter().zip(self.schedules).map(|(q, s)| (q.name(&self.pcie), s)).collect()
    }

    fn pcie_source(&self) -> &'static str {
        self.pcie_source_name()
    }
}
