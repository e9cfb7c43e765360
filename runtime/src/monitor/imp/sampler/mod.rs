//! The background sampler: one thread that reads every GPU through its device library (NVML,
//! ROCm SMI: `super::vendor`) into the bounded history, within a CPU budget it measures itself.
//!
//! One file per job: [`sample`] is what a round reads, [`reader`] reads one NVIDIA device on its
//! schedule (`super::rocm` an AMD one), [`pcie`] picks the throughput source, [`budget`] keeps the CPU budget, [`stats`]
//! says what it all cost; this file is the thread.
//!
//! Rounds sit on a grid of the configured interval (default 100 ms). A round makes every
//! reading of every device, so a sample is coherent; the limit and link state, which change
//! slowly, are read at most once a second and held in between. What a round costs differs by
//! machine: on the H200 of docs/monitor.md a full round of NVML readings costs about a
//! millisecond of CPU (the values come from the GPU's firmware), plus the thread's wake-up. So
//! rounds are paid from a token bucket: it fills at 80 % of the budget (default 0.1 % of one
//! core), each round is charged the thread's CPU time since the previous one (measured with
//! `CLOCK_THREAD_CPUTIME_ID`, wake-up included), and a round waits for the grid point at which
//! the bucket holds what a round costs. Where rounds are cheap they run on every grid point;
//! where they are dear they run less often, and [`SamplerStats::mean_spacing`] says how often.
//! A reading a device answers "not supported" is not made again.
//!
//! PCIe throughput comes from GPM (Hopper and later: the exact average between two readings),
//! else from 64-bit byte counters, else from NVML's windowed query (a 20 ms look, blocking).

mod budget;
mod pcie;
mod reader;
mod sample;
mod stats;

pub(crate) use budget::cost_clock;
pub(crate) use reader::{NvmlReader, Schedule};
pub(crate) use sample::{throttle_reason_names, THROTTLE_REASONS};
pub(crate) use stats::Counters;
pub use stats::{QueryStats, SamplerStats};

use super::{vendor, DeviceSlot, Shared};
use crate::diagnostics::note_once;
use budget::{current_tid, own_cpu_ns, Bucket};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
        Err(_) => note_once("the device sampler stopped after a panic in a device library; device metrics end here"),
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
    let gpus = vendor::discover()?;
    let config = &shared.config;
    let mut readers = Vec::with_capacity(gpus.len());
    let mut slots = Vec::with_capacity(gpus.len());
    for vendor::Found { info, library, local_index } in gpus {
        match library.reader(local_index, config.interval) {
            Ok(reader) => {
                readers.push(reader);
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
    for (reader, slot) in readers.iter_mut().zip(slots) {
        let (sample, tx, rx) = reader.read(0);
        slot.lock().push(sample, tx, rx);
    }
    counters.publish(&readers, config.interval);
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
        for (reader, slot) in readers.iter_mut().zip(slots) {
            let (sample, tx, rx) = reader.read(step);
            slot.lock().push(sample, tx, rx);
        }
        counters.publish(&readers, config.interval);
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
