//! One wgpu major's side of gpuspan's generic API: the traits of `api.rs` and `handles.rs`
//! implemented for this major's types. Written once, compiled once per major (`v30.rs`, ...),
//! where `wgpu` is that major's crate.

use super::wgpu;
use crate::wgpu::api;
use crate::wgpu::handles::{byte_range, AsHandle, AsRecorder};
use std::sync::Arc;

/// The passes' timestamp writes and the adapter's facts.
#[cfg(feature = "enabled")]
#[path = "major/imp.rs"]
pub(super) mod imp;

// The traits of `api.rs` (which documents them), one module per side: with `enabled` each call
// goes to the backend that times it, without it each does what wgpu alone would. The compiler
// checks each side against the traits in its own build, and ui-tests name these impls.

/// With `enabled`: the backend (`backend/`) times each call.
#[cfg(feature = "enabled")]
mod timed {
    use super::super::backend;
    use super::{api, byte_range, wgpu};
    use crate::site::Site;
    use crate::wgpu::scope::WgpuScope;

    impl api::Adapter for wgpu::Adapter {
        type Device = wgpu::Device;
        type Queue = wgpu::Queue;
        type Features = wgpu::Features;

        fn timestamp_features(&self) -> wgpu::Features {
            self.features() & backend::TIMER_FEATURES
        }

        fn register(&self, device: &wgpu::Device, queue: &wgpu::Queue) {
            backend::register(self, device, queue);
        }

        fn instrument(&self, device: wgpu::Device, queue: wgpu::Queue) -> (wgpu::Device, wgpu::Queue) {
            backend::instrument::instrument(self, device, queue)
        }
    }

    impl api::Instance for wgpu::Instance {
        fn instrument_instance(self) -> wgpu::Instance {
            backend::instrument::instrument_instance(self)
        }
    }

    impl api::Device for wgpu::Device {
        type Queue = wgpu::Queue;
        type Buffer = wgpu::Buffer;
        type MapError = wgpu::BufferAsyncError;

        fn read_buffer<T>(
            &self,
            queue: &wgpu::Queue,
            buffer: &wgpu::Buffer,
            range: impl std::ops::RangeBounds<u64>,
            read: impl FnOnce(&[u8]) -> T,
        ) -> Result<T, wgpu::BufferAsyncError> {
            let (start, len) = byte_range(range, buffer.size());
            backend::read_back::read_buffer(self, queue, buffer, start, len, read)
        }

        fn begin_scope(&self, site: &'static Site) -> Result<WgpuScope, &'static str> {
            backend::WgpuScope::begin_on_device(site, self).map(WgpuScope::from)
        }

        fn offer_to_attach(&self) {
            backend::attach::set_device(self);
        }
    }

    impl api::Queue for wgpu::Queue {
        type Device = wgpu::Device;
        type CommandBuffer = wgpu::CommandBuffer;

        fn begin_scope(&self, site: &'static Site, device: Option<&wgpu::Device>) -> Result<WgpuScope, &'static str> {
            backend::WgpuScope::begin_on_queue(site, self, device).map(WgpuScope::from)
        }

        fn end_for(&self, scope: &mut WgpuScope) -> Option<wgpu::CommandBuffer> {
            match backend::WgpuScope::of_mut(scope)? {
                backend::WgpuScope::Bracket(b) => b.end_at_submit(self),
                // A span's brackets end when it closes: no annotated body submits for them.
                backend::WgpuScope::Recorder(_)
                | backend::WgpuScope::SpanBrackets(_)
                | backend::WgpuScope::Passes(_)
                | backend::WgpuScope::Summed(_) => None,
            }
        }

        fn end_for_handle(&self, handle: &crate::wgpu::scope::HandleOf) -> Option<wgpu::CommandBuffer> {
            backend::bracket::Shared::of(handle)?.end_for(self)
        }
    }

    /// The recorders: the api trait over the backend's (`backend/resources.rs`).
    macro_rules! recorder {
        ($($ty:ty),*) => {$(
            impl api::Recorder for $ty {
                type Device = wgpu::Device;

                fn attach(&mut self) -> impl std::ops::DerefMut<Target = Self> + std::fmt::Debug + '_ {
                    backend::attach::attach(self)
                }

                fn begin_scope(
                    &mut self,
                    site: &'static Site,
                    scope_id: u64,
                    device: Option<&wgpu::Device>,
                ) -> Result<WgpuScope, &'static str> {
                    backend::WgpuScope::begin_in_recorder(site, scope_id, self, device).map(WgpuScope::from)
                }

                fn end_scope(&mut self, scope: &mut WgpuScope) {
                    if let Some(w) = backend::WgpuScope::of_mut(scope) {
                        w.end_in_recorder(self);
                    }
                }
            }
        )*};
    }
    recorder!(wgpu::CommandEncoder, wgpu::ComputePass<'_>, wgpu::RenderPass<'_>);
}

/// Without `enabled`: nothing is timed, so no timestamp feature is needed, nothing is
/// registered or wrapped, and a read-back is a plain copy.
#[cfg(not(feature = "enabled"))]
mod untimed {
    use super::{api, byte_range, read_staging, wgpu};

    impl api::Adapter for wgpu::Adapter {
        type Device = wgpu::Device;
        type Queue = wgpu::Queue;
        type Features = wgpu::Features;

        fn timestamp_features(&self) -> wgpu::Features {
            wgpu::Features::empty()
        }

        fn register(&self, _: &wgpu::Device, _: &wgpu::Queue) {}

        fn instrument(&self, device: wgpu::Device, queue: wgpu::Queue) -> (wgpu::Device, wgpu::Queue) {
            (device, queue)
        }
    }

    impl api::Instance for wgpu::Instance {
        fn instrument_instance(self) -> wgpu::Instance {
            self
        }
    }

    impl api::Device for wgpu::Device {
        type Queue = wgpu::Queue;
        type Buffer = wgpu::Buffer;
        type MapError = wgpu::BufferAsyncError;

        fn read_buffer<T>(
            &self,
            queue: &wgpu::Queue,
            buffer: &wgpu::Buffer,
            range: impl std::ops::RangeBounds<u64>,
            read: impl FnOnce(&[u8]) -> T,
        ) -> Result<T, wgpu::BufferAsyncError> {
            let (start, len) = byte_range(range, buffer.size());
            read_untimed(self, queue, buffer, start, len, read)
        }
    }

    impl api::Queue for wgpu::Queue {
        type Device = wgpu::Device;
        type CommandBuffer = wgpu::CommandBuffer;
    }

    /// The recorders: `attach` only passes the recorder through.
    macro_rules! recorder {
        ($($ty:ty),*) => {$(
            impl api::Recorder for $ty {
                type Device = wgpu::Device;

                fn attach(&mut self) -> impl std::ops::DerefMut<Target = Self> + std::fmt::Debug + '_ {
                    Passthrough(self)
                }
            }
        )*};
    }
    recorder!(wgpu::CommandEncoder, wgpu::ComputePass<'_>, wgpu::RenderPass<'_>);

    /// What `attach` returns: it only passes the recorder through.
    struct Passthrough<'a, R>(&'a mut R);

    impl<R> std::fmt::Debug for Passthrough<'_, R> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Attached").finish_non_exhaustive()
        }
    }

    impl<R> std::ops::Deref for Passthrough<'_, R> {
        type Target = R;
        fn deref(&self) -> &R {
            self.0
        }
    }

    impl<R> std::ops::DerefMut for Passthrough<'_, R> {
        fn deref_mut(&mut self) -> &mut R {
            self.0
        }
    }

    /// Copies `start..start + len` of `buffer` into a mappable
    /// buffer, waits for it and hands the bytes to `read`, untimed.
    fn read_untimed<T>(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
        start: u64,
        len: u64,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, wgpu::BufferAsyncError> {
        let staging = read_staging(device, len);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(buffer, start, &staging, 0, len);
        queue.submit([encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        device.poll(wgpu::PollType::wait_indefinitely()).map_err(|_| wgpu::BufferAsyncError)?;
        rx.recv().map_err(|_| wgpu::BufferAsyncError)??;
        let out = read(&super::super::mapped_range(&staging.slice(..)).map_err(|_| wgpu::BufferAsyncError)?);
        staging.unmap();
        Ok(out)
    }
}

// Written out rather than by a macro: rustc lists these impls in the error for a wrong
// `encoder = ...`, and a macro would add "in this macro invocation" snippets to it.
impl AsRecorder for wgpu::CommandEncoder {
    type Recorder = Self;
    fn as_recorder(&mut self) -> &mut Self {
        self
    }
}

impl AsRecorder for wgpu::ComputePass<'_> {
    type Recorder = Self;
    fn as_recorder(&mut self) -> &mut Self {
        self
    }
}

impl AsRecorder for wgpu::RenderPass<'_> {
    type Recorder = Self;
    fn as_recorder(&mut self) -> &mut Self {
        self
    }
}

// Written out rather than by a macro, for the same reason as the `AsRecorder` impls.
impl AsHandle<wgpu::Queue> for wgpu::Queue {
    fn as_handle(&self) -> &wgpu::Queue {
        self
    }
}

impl AsHandle<wgpu::Queue> for Arc<wgpu::Queue> {
    fn as_handle(&self) -> &wgpu::Queue {
        self
    }
}

impl AsHandle<wgpu::Device> for wgpu::Device {
    fn as_handle(&self) -> &wgpu::Device {
        self
    }
}

impl AsHandle<wgpu::Device> for Arc<wgpu::Device> {
    fn as_handle(&self) -> &wgpu::Device {
        self
    }
}

/// The mappable buffer `read_buffer` copies `len` bytes into, timed (`backend/read_back.rs`) or
/// not.
pub(super) fn read_staging(device: &wgpu::Device, len: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpuspan read_buffer"),
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}
