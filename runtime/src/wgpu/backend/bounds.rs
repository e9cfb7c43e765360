//! A wgpu record's facts about its device's clock offset, for the shared placement
//! (`crate::placement`): its GPU work cannot start before its call began and cannot end after
//! the host saw its timestamps; its GPU instants reached us as `f64` seconds (wgpu-profiler's
//! results), rounded by [`rounding_ns`]. The device's calibration (`calibration.rs`) is the
//! interval the facts are intersected with; a contradiction flags it for the resolver.

use super::device::DeviceState;
use crate::placement::{ClockMap, Facts, Placement};
use crate::record::{GpuTiming, Interval, Record, TimingSource};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// The rounding of a GPU instant that reached us as f64 seconds (wgpu-profiler's results): on
/// a Unix-epoch GPU clock (NVIDIA) about a quarter of a microsecond.
pub(super) fn rounding_ns(seconds: f64) -> i128 {
    (seconds.abs() * f64::EPSILON * 1e9).ceil() as i128 + 1
}

/// The GPU timing of `record`, whose timestamps wgpu-profiler gave as `range` (seconds on the
/// GPU clock) and which the host first saw at `observed_ns`: placed with the device's facts
/// and `calibration`. Flags the calibration for renewal when the facts contradict it.
pub(super) fn place(
    device: &DeviceState,
    range: &Range<f64>,
    record: &Record,
    observed_ns: u64,
    calibration: ClockMap,
) -> GpuTiming {
    let gpu = ((range.start * 1e9).round() as i128, (range.end * 1e9).round() as i128);
    let rounding = rounding_ns(range.start).max(rounding_ns(range.end));
    let mut timing = place_ns(device, gpu, rounding, record, observed_ns, calibration);
    timing.busy_ns = ((range.end - range.start) * 1e9).round().max(0.0) as u64;
    timing
}

/// [`place`] for GPU instants already in nanoseconds, each off by up to `rounding` ns; the busy
/// time is the interval's.
pub(super) fn place_ns(
    device: &DeviceState,
    gpu: (i128, i128),
    rounding: i128,
    record: &Record,
    observed_ns: u64,
    calibration: ClockMap,
) -> GpuTiming {
    let observed = if observed_ns == 0 { crate::clock::now_ns() } else { observed_ns };
    let facts = Facts::of(gpu, record.host.start_ns, observed);
    let placement = device.bounds.lock().map_or_else(
        // A poisoned lock (a panic elsewhere): the calibration alone, as before facts existed.
        |_| Placement {
            offset_ns: calibration.offset_ns,
            error_ns: calibration.error_ns,
            calibration_contradicted: false,
        },
        |mut b| b.place(facts, rounding, calibration),
    );
    if placement.calibration_contradicted {
        device.clock_contradicted.store(true, Ordering::Relaxed);
    }
    let to_host = |g: i128| u64::try_from(g + placement.offset_ns).unwrap_or(0);
    let start = to_host(gpu.0);
    let mut timing =
        GpuTiming::new(Interval { start_ns: start, end_ns: to_host(gpu.1).max(start) }, TimingSource::GpuTimestamp);
    timing.clock_error_ns = placement.error_ns;
    timing
}
