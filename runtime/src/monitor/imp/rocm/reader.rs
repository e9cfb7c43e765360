//! Reading one AMD GPU through ROCm SMI: each kind of reading on its own schedule (as NVML's
//! reader does), holding every value until it is read again. What ROCm SMI has no call for, or
//! the GPU answers "not supported", stays absent, never 0.
//!
//! Not read: PCIe throughput (`rsmi_dev_pci_throughput_get` blocks for one second, a round's
//! whole budget ten times over), throttle reasons and the link's generation (ROCm SMI reports
//! neither in NVML's terms).

use super::library::{CallError, CLK_TYPE_MEM, CLK_TYPE_SYS, MEM_TYPE_VRAM, TEMP_TYPE_EDGE, TEMP_TYPE_JUNCTION};
use super::Rocm;
use crate::monitor::imp::sampler::{cost_clock, Schedule};
use crate::monitor::imp::vendor::DeviceReader;
use crate::monitor::Sample;
use std::time::Duration;

/// The readings made of an AMD GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Query {
    Busy,
    MemoryBusy,
    Memory,
    Temperature,
    Power,
    SysClock,
    MemoryClock,
    PowerCap,
}

impl Query {
    const ALL: [Query; 8] = [
        Query::Busy,
        Query::MemoryBusy,
        Query::Memory,
        Query::Temperature,
        Query::Power,
        Query::SysClock,
        Query::MemoryClock,
        Query::PowerCap,
    ];

    /// The names NVML's reader gives the same quantities, so the cost table has one row each.
    fn name(self) -> &'static str {
        match self {
            Query::Busy => "utilization",
            Query::MemoryBusy => "memory_utilization",
            Query::Memory => "memory",
            Query::Temperature => "temperature",
            Query::Power => "power",
            Query::SysClock => "sm_clock",
            Query::MemoryClock => "memory_clock",
            Query::PowerCap => "power_limit",
        }
    }
}

/// Reads one AMD GPU on its schedule.
pub(super) struct RocmReader<'r> {
    rocm: &'r Rocm,
    index: u32,
    schedules: [Schedule; Query::ALL.len()],
    held: Sample,
    /// VRAM in total, for the free bytes (read once).
    total: Option<u64>,
    /// The edge sensor, or the junction (hotspot) one on GPUs without an edge sensor (MI300).
    temperature_sensor: u32,
    /// Socket power, or the average power of older GPUs that lack it.
    socket_power: bool,
}

impl<'r> RocmReader<'r> {
    pub(super) fn new(rocm: &'r Rocm, index: u32, interval: Duration) -> Self {
        RocmReader {
            rocm,
            index,
            schedules: Query::ALL.map(|q| Schedule::new(q == Query::PowerCap, interval)),
            held: Sample::default(),
            total: rocm.memory_total(index, MEM_TYPE_VRAM).ok(),
            temperature_sensor: TEMP_TYPE_EDGE,
            socket_power: true,
        }
    }

    /// What a reading gave; a reading the GPU lacks is not made again.
    fn settle<T>(&mut self, q: usize, result: Result<T, CallError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(CallError::NotSupported) => {
                self.schedules[q].unsupported = true;
                None
            }
            Err(CallError::Failed(_)) => None,
        }
    }

    fn read_round(&mut self, step: u64) -> Sample {
        let time_ns = crate::clock::now_ns();
        let d = self.index;
        for (i, q) in Query::ALL.into_iter().enumerate() {
            if !self.schedules[i].due(step) {
                continue;
            }
            let c0 = cost_clock();
            let rocm = self.rocm;
            match q {
                Query::Busy => self.held.gpu_utilization_pct = self.settle(i, rocm.busy_percent(d)),
                Query::MemoryBusy => self.held.memory_utilization_pct = self.settle(i, rocm.memory_busy_percent(d)),
                Query::Memory => {
                    let used = self.settle(i, rocm.memory_usage(d, MEM_TYPE_VRAM));
                    self.held.memory_used_bytes = used;
                    self.held.memory_free_bytes = used.zip(self.total).map(|(u, t)| t.saturating_sub(u));
                }
                Query::Temperature => {
                    let mut mc = rocm.temperature_mc(d, self.temperature_sensor);
                    if mc == Err(CallError::NotSupported) && self.temperature_sensor == TEMP_TYPE_EDGE {
                        self.temperature_sensor = TEMP_TYPE_JUNCTION;
                        mc = rocm.temperature_mc(d, TEMP_TYPE_JUNCTION);
                    }
                    // Millidegrees Celsius to whole degrees; a reading below 0 °C is no reading.
                    self.held.temperature_c =
                        self.settle(i, mc).and_then(|mc| u32::try_from((mc + 500).div_euclid(1000)).ok());
                }
                Query::Power => {
                    let mut uw = if self.socket_power { rocm.socket_power_uw(d) } else { Err(CallError::NotSupported) };
                    if uw == Err(CallError::NotSupported) {
                        self.socket_power = false;
                        uw = rocm.average_power_uw(d);
                    }
                    self.held.power_w = self.settle(i, uw).map(watts);
                }
                Query::SysClock => {
                    self.held.sm_clock_mhz = self.settle(i, rocm.clock_hz(d, CLK_TYPE_SYS)).flatten().map(mhz)
                }
                Query::MemoryClock => {
                    self.held.memory_clock_mhz = self.settle(i, rocm.clock_hz(d, CLK_TYPE_MEM)).flatten().map(mhz);
                }
                Query::PowerCap => self.held.power_limit_w = self.settle(i, rocm.power_cap_uw(d)).map(watts),
            }
            self.schedules[i].made(step, cost_clock().saturating_sub(c0));
        }
        self.held.time_ns = time_ns;
        self.held.clone()
    }
}

/// Microwatts to watts.
fn watts(uw: u64) -> f64 {
    uw as f64 / 1e6
}

/// Hz to whole MHz (ROCm SMI's tables hold the levels' frequencies in Hz).
fn mhz(hz: u64) -> u32 {
    u32::try_from((hz + 500_000) / 1_000_000).unwrap_or(u32::MAX)
}

impl DeviceReader for RocmReader<'_> {
    fn read(&mut self, step: u64) -> (Sample, f64, f64) {
        (self.read_round(step), 0.0, 0.0)
    }

    fn query_stats(&self) -> Vec<(&'static str, Schedule)> {
        Query::ALL.into_iter().zip(self.schedules).map(|(q, s)| (q.name(), s)).collect()
    }

    fn pcie_source(&self) -> &'static str {
        "none"
    }
}

#[cfg(test)]
mod tests {
    use super::mhz;

    #[test]
    fn hertz_round_to_megahertz() {
        assert_eq!(mhz(2_100_000_000), 2100);
        assert_eq!(mhz(1_299_600_000), 1300);
        assert_eq!(mhz(0), 0);
    }
}
