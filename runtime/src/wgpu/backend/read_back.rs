//! `gpuspan::wgpu::read_buffer`: the map-and-read pattern, timed in its three phases.
//!
//! Read-backs timed on the host mostly measure waiting: mapping a buffer waits for the copy and
//! for everything queued before it. Here the copy into a mappable buffer is timed by timestamp
//! queries around it (exact GPU time, the record's duration and bandwidth), and the host's two
//! parts are labelled on the record: waiting for the mapping, and copying out of it.

use crate::record::{Interval, ReadBackPhases};
use super::{mapped_range, wgpu};
use crate::scope::Scope;
use crate::site::{Backend, Direction, Site, SiteDesc, SiteKind};
use std::cell::Cell;
use std::sync::mpsc;

/// The site of every `read_buffer` call.
static READ_BUFFER: Site = Site::new(SiteDesc {
    module_path: "gpuspan::wgpu",
    direction: Some(Direction::GpuToCpu),
    ..crate::site::site_desc!("read_buffer", SiteKind::Transfer, Backend::Wgpu)
});
inventory::submit! { crate::site::SiteRef(&READ_BUFFER) }

thread_local! {
    /// The phases of the `read_buffer` scope closing on this thread, for its record.
    static PHASES: Cell<Option<ReadBackPhases>> = const { Cell::new(None) };
}

/// The phases left by the scope closing on this thread, if it is a `read_buffer`'s.
pub(super) fn take_phases() -> Option<ReadBackPhases> {
    PHASES.try_with(Cell::take).ok().flatten()
}

/// `gpuspan::wgpu::read_buffer`, timed: `start..start + len` of `buffer`.
pub(crate) fn read_buffer<T>(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    start: u64,
    len: u64,
    read: impl FnOnce(&[u8]) -> T,
) -> Result<T, wgpu::BufferAsyncError> {
    let staging = super::super::major::read_staging(device, len);
    let mut encoder =
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuspan read_buffer") });
    let span = tracing::span!(
        target: "gpuspan::transfer::wgpu",
        tracing::Level::INFO,
        "read_buffer",
        error = tracing::field::Empty,
        gpuspan.transfer.wgpu = tracing::field::Empty
    );
    let mut scope = Scope::wgpu_recorder(&READ_BUFFER, span, Some(len), &mut encoder, Some(device));
    encoder.copy_buffer_to_buffer(buffer, start, &staging, 0, len);
    scope.exit_recorder(crate::probe::Exit::Continue, &mut encoder);
    let index = queue.submit([encoder.finish()]);

    let waiting = crate::clock::now_ns();
    let (tx, rx) = mpsc::channel();
    staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    let polled = device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None });
    let mapped = match (polled, rx.try_recv()) {
        (Ok(_), Ok(Ok(()))) => true,
        // Polled, the callback not yet run: it runs on the next poll of this device.
        (Ok(_), Err(mpsc::TryRecvError::Empty)) => {
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
            matches!(rx.try_recv(), Ok(Ok(())))
        }
        _ => false,
    };
    if !mapped {
        scope.exit(crate::probe::Exit::Error);
        return Err(wgpu::BufferAsyncError);
    }
    let copying = crate::clock::now_ns();
    let out = match mapped_range(&staging.slice(..)) {
        Ok(view) => read(&view),
        Err(_) => {
            scope.exit(crate::probe::Exit::Error);
            return Err(wgpu::BufferAsyncError);
        }
    };
    let done = crate::clock::now_ns();
    staging.unmap();
    let _ = PHASES.try_with(|p| {
        p.set(Some(ReadBackPhases {
            wait: Interval { start_ns: waiting, end_ns: copying },
            copy_out: Interval { start_ns: copying, end_ns: done },
        }))
    });
    drop(scope);
    // A scope that did not reach the wgpu backend (off, host-timed) leaves the phases unread.
    let _ = take_phases();
    Ok(out)
}
