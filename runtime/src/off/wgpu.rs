//! The wgpu API without the `enabled` feature: the same calls, timing nothing.

// The traits that say which wgpu values a site accepts are plain trait impls with no state:
// the same file either way, so user impls for wrapper types compile off too.
#[allow(dead_code, unreachable_pub)]
#[path = "../wgpu/resources.rs"]
pub(crate) mod resources;

pub use resources::{AsHandle, AsRecorder, Recorder};

/// Empty without the `enabled` feature: nothing is timed, so no timestamp feature is needed.
pub fn timestamp_features(_adapter: &wgpu::Adapter) -> wgpu::Features {
    wgpu::Features::empty()
}

/// Does nothing without the `enabled` feature.
pub fn register(_adapter: &wgpu::Adapter, _device: &wgpu::Device, _queue: &wgpu::Queue) {}
