//! wgpu's pending work for the one resolver (`crate::resolver`): frames in flight driven to
//! delivery without the caller ever waiting, and the blocking flush.
//!
//! It polls a device (without blocking) only while frames are in flight, so wgpu's callbacks
//! also run when the program itself has stopped submitting, and it re-calibrates each device's
//! clock mapping periodically.

use super::wgpu;
use super::device::{self, DeviceState};
use super::pool;
use crate::diagnostics::note_once;
use crate::resolver::{PendingWork, Progress};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a device's GPU clock is mapped onto the host clock again. The host clock (TSC via
/// quanta) was measured drifting ~4 ppm from CLOCK_MONOTONIC on the CPU box: 2 s keeps that
/// under 10 µs between calibrations.
const RECALIBRATE_EVERY: Duration = Duration::from_secs(2);
/// How soon a device with frames in flight is polled again. wgpu signals a finished
/// submission or mapping only from inside `Device::poll`, so while frames wait on the GPU
/// there is nothing to be woken by: the device itself must be asked.
const POLL_IN_FLIGHT: Duration = Duration::from_millis(2);

/// The frames of every registered device.
struct Frames;

/// Hands the frames to the resolver (at each device's registration).
pub(crate) fn register() {
    crate::resolver::register(&Frames);
}

impl PendingWork for Frames {
    fn name(&self) -> &'static str {
        // One per major: the resolver keeps one pending work of each name.
        super::NAME
    }

    fn poll(&self, now: Instant) -> Progress {
        let mut pending = 0;
        for d in device::all() {
            pending += guarded(&d, || {
                let pending = step(&d, false);
                let contradicted = d.clock_contradicted.load(std::sync::atomic::Ordering::Relaxed);
                let due = contradicted
                    || d.clock().is_none_or(|c| {
                        crate::clock::now_ns().saturating_sub(c.taken_at_ns) > RECALIBRATE_EVERY.as_nanos() as u64
                    });
                if due && d.in_flight_count() > 0 {
                    d.clock_contradicted.store(false, std::sync::atomic::Ordering::Relaxed);
                    d.calibrate();
                }
                pending
            });
        }
        Progress { pending, next_wake: (pending > 0).then(|| now + POLL_IN_FLIGHT) }
    }

    fn flush(&self, deadline: Instant) -> bool {
        loop {
            let pending: usize = device::all().iter().map(|d| guarded(d, || step(d, true))).sum();
            if pending == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
        }
    }
}

/// Runs gpuspan's own work on `d`'s device inside error scopes of this thread (wgpu's are
/// per thread), so that a failure of one of its commands (a lost device, memory) is said once
/// here instead of reaching the program's uncaptured-error handler, whose default panics, on
/// gpuspan's thread. The program's own scopes, on its threads, are untouched.
fn guarded<T>(d: &DeviceState, work: impl FnOnce() -> T) -> T {
    let scopes = [wgpu::ErrorFilter::Validation, wgpu::ErrorFilter::OutOfMemory, wgpu::ErrorFilter::Internal]
        .map(|filter| d.device.push_error_scope(filter));
    let out = work();
    for scope in scopes.into_iter().rev() {
        // Native wgpu answers at once; a scope still pending is let go.
        let mut popped = std::pin::pin!(scope.pop());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(Some(e)) = std::future::Future::poll(popped.as_mut(), &mut cx) {
            note_once(format_args!(
                "the wgpu commands gpuspan issues itself on {} failed ({e}); what they would have timed is counted as lost",
                d.label.name
            ));
        }
    }
    out
}

/// Polls the device when something is pending and advances every frame and bracket batch (a
/// flush seals the batches still taking brackets). Returns how many are still pending.
fn step(d: &Arc<DeviceState>, wait: bool) -> usize {
    let frames = d.in_flight.lock().map(|f| f.clone()).unwrap_or_default();
    let batches = pool::request(d, wait);
    if batches == 0 && !frames.iter().any(|f| f.is_pending()) {
        return 0;
    }
    let poll = if wait {
        wgpu::PollType::Wait { submission_index: None, timeout: Some(Duration::from_millis(50)) }
    } else {
        wgpu::PollType::Poll
    };
    let _ = d.device.poll(poll);
    pool::deliver(d);
    let frames = frames.iter().filter(|f| !f.advance() && f.is_pending()).count();
    frames + pool::request(d, wait)
}
