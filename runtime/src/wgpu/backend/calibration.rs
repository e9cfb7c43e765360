//! Mapping GPU timestamps onto the host clock.
//!
//! A single timestamp is written by a tiny submission (`write_timestamp`, or on a device
//! without in-encoder timestamps the start of an empty compute pass); the GPU wrote it at some host instant
//! between the moment we began submitting and the moment we saw it complete. The offset is the
//! midpoint of that window and its error bound is half the window; the narrowest of a few tries
//! is kept (a `ClockMap`: the interval `crate::placement` intersects with host facts). GPU
//! clocks drift from the host's and some reset, so the resolver thread takes a new calibration
//! periodically instead of trusting the first one forever.

use super::{mapped_range, wgpu};
use crate::clock;
pub(crate) use crate::placement::ClockMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why a calibration could not be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CalibrationError {
    #[error("the device lacks TIMESTAMP_QUERY, which calibration needs")]
    Unsupported,
    #[error("the calibration submission did not complete within {0:?}")]
    Timeout(Duration),
    #[error("reading the calibration timestamp back failed: {0}")]
    Map(String),
}

/// Takes `tries` calibrations and keeps the one with the narrowest window. Blocks the calling
/// thread (the resolver's) for a few submissions, each counted in `own` just before it.
pub(crate) fn calibrate(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    tries: usize,
    own: &std::sync::atomic::AtomicU64,
) -> Result<ClockMap, CalibrationError> {
    // Without in-encoder timestamps (Metal, WebGPU) the timestamp is an empty compute pass's
    // start (`pool::write`).
    let at_passes = match super::Mode::of(device.features()) {
        super::Mode::InEncoders => false,
        super::Mode::Passes => true,
        super::Mode::Host => return Err(CalibrationError::Unsupported),
    };
    let query_set = device.create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("gpuspan calibration"),
        ty: wgpu::QueryType::Timestamp,
        count: 1,
    });
    let resolve = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpuspan calibration resolve"),
        size: wgpu::QUERY_SIZE as u64,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpuspan calibration read"),
        size: wgpu::QUERY_SIZE as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let period = f64::from(queue.get_timestamp_period());
    let timeout = Duration::from_secs(2);
    let mut best: Option<ClockMap> = None;
    for _ in 0..tries.max(1) {
        let mut encoder =
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuspan calibration") });
        super::pool::write(&mut encoder, &query_set, 0, at_passes);
        encoder.resolve_query_set(&query_set, 0..1, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, wgpu::QUERY_SIZE as u64);
        let mapped = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(std::sync::Mutex::new(None));
        {
            let (mapped, failed) = (mapped.clone(), failed.clone());
            encoder.map_buffer_on_submit(&read, wgpu::MapMode::Read, .., move |r| match r {
                Ok(()) => mapped.store(true, Ordering::Release),
                Err(e) => {
                    if let Ok(mut f) = failed.lock() {
                        *f = Some(e.to_string());
                    }
                }
            });
        }
        let before = clock::now_ns();
        own.fetch_add(1, Ordering::Relaxed);
        let index = queue.submit([encoder.finish()]);
        let polled = device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: Some(timeout) });
        let after = clock::now_ns();
        if polled.is_err() {
            return Err(CalibrationError::Timeout(timeout));
        }
        // Another thread's poll (the program's, or gpuspan's resolver) may have triaged this
        // submission first: then the map callback runs on that thread, just after our wait
        // returned, and is waited for here (seen once in 24 processes on an H200).
        let deadline = std::time::Instant::now() + timeout;
        let done = || mapped.load(Ordering::Acquire) || failed.lock().map_or(true, |f| f.is_some());
        while !done() && std::time::Instant::now() < deadline {
            let _ = device.poll(wgpu::PollType::Poll);
            std::thread::yield_now();
        }
        if let Some(e) = failed.lock().ok().and_then(|mut f| f.take()) {
            return Err(CalibrationError::Map(e));
        }
        if !mapped.load(Ordering::Acquire) {
            return Err(CalibrationError::Map("the buffer was not mapped after the submission completed".into()));
        }
        let ticks = {
            let view = mapped_range(&read.slice(..)).map_err(CalibrationError::Map)?;
            u64::from_le_bytes(view[..8].try_into().expect("8 bytes"))
        };
        read.unmap();
        let gpu_ns = ticks as f64 * period;
        let mid = before + (after - before) / 2;
        let candidate = ClockMap {
            offset_ns: i128::from(mid) - gpu_ns.round() as i128,
            error_ns: (after - before).div_ceil(2),
            taken_at_ns: after,
        };
        if best.is_none_or(|b| candidate.error_ns < b.error_ns) {
            best = Some(candidate);
        }
    }
    Ok(best.expect("at least one try"))
}
