//! The wgpu API without the `enabled` feature: the same calls, timing nothing.

// The traits that say which wgpu values a site accepts are plain trait impls with no state:
// the same file either way, so user impls for wrapper types compile off too.
#[allow(dead_code, unreachable_pub)]
#[path = "../wgpu/backend/resources.rs"]
pub(crate) mod resources;

pub use resources::{AsHandle, AsRecorder};
// Sealed: the bound of `attach` and of `AsRecorder::Recorder`, implemented by wgpu's encoder and
// passes only, so nameable nowhere outside.
use resources::Recorder;

/// Empty without the `enabled` feature: nothing is timed, so no timestamp feature is needed.
pub fn timestamp_features(_adapter: &wgpu::Adapter) -> wgpu::Features {
    wgpu::Features::empty()
}

/// Does nothing without the `enabled` feature.
pub fn register(_adapter: &wgpu::Adapter, _device: &wgpu::Device, _queue: &wgpu::Queue) {}

/// Without the `enabled` feature: only passes the recorder through.
struct Attached<'a, R: Recorder> {
    recorder: &'a mut R,
}

impl<R: Recorder> std::fmt::Debug for Attached<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached").finish_non_exhaustive()
    }
}

/// Without the `enabled` feature: returns a guard that only passes the recorder through.
#[must_use = "the query closes when this guard is dropped: encode through it, then drop it"]
pub fn attach<R: Recorder>(recorder: &mut R) -> impl std::ops::DerefMut<Target = R> + std::fmt::Debug + '_ {
    Attached { recorder }
}

impl<R: Recorder> std::ops::Deref for Attached<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        self.recorder
    }
}

impl<R: Recorder> std::ops::DerefMut for Attached<'_, R> {
    fn deref_mut(&mut self) -> &mut R {
        self.recorder
    }
}

/// Without the `enabled` feature: copies `range` of `buffer` into a mappable buffer, waits for
/// it and hands the bytes to `read`, untimed.
pub fn read_buffer<T>(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    range: impl std::ops::RangeBounds<u64>,
    read: impl FnOnce(&[u8]) -> T,
) -> Result<T, wgpu::BufferAsyncError> {
    let (start, len) = resources::byte_range(range, buffer.size());
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpuspan read_buffer"),
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    encoder.copy_buffer_to_buffer(buffer, start, &staging, 0, len);
    queue.submit([encoder.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device.poll(wgpu::PollType::wait_indefinitely()).map_err(|_| wgpu::BufferAsyncError)?;
    rx.recv().map_err(|_| wgpu::BufferAsyncError)??;
    let out = read(&staging.slice(..).get_mapped_range().map_err(|_| wgpu::BufferAsyncError)?);
    staging.unmap();
    Ok(out)
}
