//! The wgpu API without the `enabled` feature: the same calls, timing nothing.

// The traits that say which wgpu values a site accepts are plain trait impls with no state:
// the same file either way, so user impls for wrapper types compile off too.
#[allow(dead_code, unreachable_pub)]
#[path = "../wgpu/resources.rs"]
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
#[must_use = "the query closes when this guard is dropped: encode through it, then drop it"]
pub struct Attached<'a, R: Recorder> {
    recorder: &'a mut R,
}

impl<R: Recorder> std::fmt::Debug for Attached<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached").finish_non_exhaustive()
    }
}

/// Without the `enabled` feature: returns a guard that only passes the recorder through.
pub fn attach<R: Recorder>(recorder: &mut R) -> Attached<'_, R> {
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
