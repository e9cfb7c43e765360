//! The resolver: a background thread that drives pending frames to delivery without the
//! caller ever waiting, and the blocking `flush` used by `gpuspan::flush()` and shutdown.
//!
//! It polls a device (without blocking) only while frames are in flight, so wgpu's callbacks
//! also run when the program itself has stopped submitting, and it re-calibrates each device's
//! clock mapping periodically.

use super::calibration;
use super::device::{self, DeviceState};
use crate::diagnostics::note_once;
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::{Duration, Instant};

/// How often a device's GPU clock is mapped onto the host clock again. The host clock (TSC via
/// quanta) was measured drifting ~4 ppm from CLOCK_MONOTONIC on the CPU box: 2 s keeps that
/// under 10 µs between calibrations.
const RECALIBRATE_EVERY: Duration = Duration::from_secs(2);

static WOKEN: Mutex<bool> = Mutex::new(false);
static WAKE: Condvar = Condvar::new();
static START: Once = Once::new();

/// Asks the resolver to look at the frames now.
pub(crate) fn wake() {
    START.call_once(|| {
        let spawned = std::thread::Builder::new().name("gpuspan-wgpu-resolver".into()).spawn(run);
        if let Err(e) = spawned {
            note_once(format_args!("could not start the wgpu resolver thread ({e}); GPU timings arrive at flush"));
        }
        crate::flush::register(flush);
    });
    if let Ok(mut w) = WOKEN.lock() {
        *w = true;
        WAKE.notify_one();
    }
}

fn run() {
    loop {
        let mut busy = false;
        for d in device::all() {
            busy |= step(&d, false);
            let contradicted = d.clock_contradicted.load(std::sync::atomic::Ordering::Relaxed);
            let due = contradicted
                || d.clock().is_none_or(|c| {
                    crate::clock::now_ns().saturating_sub(c.taken_at_ns) > RECALIBRATE_EVERY.as_nanos() as u64
                });
            if due && d.in_flight_count() > 0 {
                d.clock_contradicted.store(false, std::sync::atomic::Ordering::Relaxed);
                calibrate(&d);
            }
        }
        let timeout = if busy { Duration::from_millis(2) } else { Duration::from_millis(250) };
        if let Ok(w) = WOKEN.lock() {
            if let Ok((mut w, _)) = WAKE.wait_timeout_while(w, timeout, |w| !*w) {
                *w = false;
            }
        }
    }
}

/// Polls the device when something is pending and advances every frame. Returns whether
/// frames are still pending on the GPU.
fn step(d: &Arc<DeviceState>, wait: bool) -> bool {
    let frames = d.in_flight.lock().map(|f| f.clone()).unwrap_or_default();
    if !frames.iter().any(|f| f.is_pending()) {
        return false;
    }
    let poll = if wait {
        wgpu::PollType::Wait { submission_index: None, timeout: Some(Duration::from_millis(50)) }
    } else {
        wgpu::PollType::Poll
    };
    let _ = d.device.poll(poll);
    let mut pending = false;
    for f in frames {
        if !f.advance() && f.is_pending() {
            pending = true;
        }
    }
    pending
}

/// Takes a fresh clock mapping for the device. Returns whether one is available.
pub(crate) fn calibrate(d: &DeviceState) -> bool {
    let Some(queue) = d.queue.get() else { return false };
    match calibration::calibrate(&d.device, queue, 5) {
        Ok(map) => {
            if let Ok(mut c) = d.clock.lock() {
                *c = Some(map);
            }
            true
        }
        Err(e) => {
            note_once(format_args!(
                "GPU clock calibration failed on {} ({e}); its scopes are timed on the host",
                d.label.name
            ));
            d.clock().is_some()
        }
    }
}

/// Resolves everything pending before `deadline`, waiting on the GPU as needed.
pub(crate) fn flush(deadline: Instant) -> bool {
    loop {
        let mut pending = false;
        for d in device::all() {
            pending |= step(&d, true);
        }
        if !pending {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}
