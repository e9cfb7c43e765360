//! What the sampler did and what it cost: the counters its thread keeps and the snapshot the
//! summary (and the diagnostics lent to `gpuspan-testing`) read.

use super::budget::thread_cpu_ns;
use crate::monitor::imp::vendor::DeviceReader;
use crate::monitor::MonitorConfig;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// The sampler's running counts, read by the summary and the diagnostics lent to `gpuspan-testing`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(super) rounds: AtomicU64,
    pub(super) round_ns_total: AtomicU64,
    pub(super) round_ns_max: AtomicU64,
    pub(super) devices: AtomicU64,
    pub(super) tid: OnceLock<u32>,
    pub(super) setup_cpu_ns: OnceLock<Option<u64>>,
    /// The first round's start and the thread's CPU time then.
    pub(super) started: OnceLock<(Instant, Option<u64>)>,
    /// At the thread's end: time since the first round, and the thread's CPU time then.
    pub(super) ended: Mutex<Option<(Duration, Option<u64>)>>,
    pub(super) pcie_source: Mutex<&'static str>,
    pub(super) queries: Mutex<Vec<QueryStats>>,
}

impl Counters {
    pub(crate) fn stats(&self, config: &MonitorConfig, running: bool) -> SamplerStats {
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
    pub(crate) fn spacing(&self, interval: Duration) -> Duration {
        let rounds = self.rounds.load(Relaxed);
        match self.started.get() {
            Some((start, _)) if rounds > 0 => (start.elapsed() / rounds as u32).max(interval),
            _ => interval,
        }
    }

    /// Publishes the readers' state after a round: the PCIe source and the per-query costs.
    pub(super) fn publish(&self, readers: &[Box<dyn DeviceReader + '_>], interval: Duration) {
        let mut source = None;
        for p in readers {
            let s = p.pcie_source();
            source = Some(if source.is_none_or(|t| t == s) { s } else { "mixed" });
        }
        *self.pcie_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = source.unwrap_or("none");
        let Ok(mut queries) = self.queries.lock() else { return };
        queries.clear();
        // By name, in the order first seen: readers of different libraries make different readings.
        let mut sums: Vec<(&'static str, [u64; 4])> = Vec::new();
        for (name, s) in readers.iter().flat_map(|p| p.query_stats()) {
            let i = sums.iter().position(|(n, _)| *n == name).unwrap_or_else(|| {
                sums.push((name, [0; 4]));
                sums.len() - 1
            });
            let [calls, total, max, period] = &mut sums[i].1;
            *calls += s.calls;
            *total += s.total_ns;
            *max = (*max).max(s.max_ns);
            *period = (*period).max(if s.unsupported { 0 } else { s.period });
        }
        for (name, [calls, total, max, period]) in sums {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
