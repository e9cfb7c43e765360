//! One wgpu major's side of gpuspan's generic API: the traits of `api.rs` and `handles.rs`
//! implemented for this major's types. Written once, compiled once per major (`v30.rs`, ...),
//! where `wgpu` is that major's crate.

use super::wgpu;
use crate::wgpu::api;
use crate::wgpu::handles::{byte_range, AsHandle, AsRecorder};
use std::sync::Arc;

#[cfg(feature = "enabled")]
use {super::backend, crate::site::Site, crate::wgpu::scope::WgpuScope};

/// The passes' timestamp writes and the adapter's facts.
#[cfg(feature = "enabled")]
#[path = "major/imp.rs"]
pub(super) mod imp;

impl api::Adapter for wgpu::Adapter {
    type Device = wgpu::Device;
    type Queue = wgpu::Queue;
    type Features = wgpu::Features;

    fn timestamp_features(&self) -> wgpu::Features {
        #[cfg(feature = "enabled")]
        return self.features() & backend::TIMER_FEATURES;
        // Nothing is timed, so no timestamp feature is needed.
        #[cfg(not(feature = "enabled"))]
        return wgpu::Features::empty();
    }

    #[allow(unused_variables)] // off
    fn register(&self, device: &wgpu::Device, queue: &wgpu::Queue) {
        #[cfg(feature = "enabled")]
        backend::register(self, device, queue);
    }

    fn instrument(&self, device: wgpu::Device, queue: wgpu::Queue) -> (wgpu::Device, wgpu::Queue) {
        #[cfg(feature = "enabled")]
        return backend::instrument::instrument(self, device, queue);
        #[cfg(not(feature = "enabled"))]
        return (device, queue);
    }
}

impl api::Instance for wgpu::Instance {
    fn instrument_instance(self) -> wgpu::Instance {
        #[cfg(feature = "enabled")]
        return backend::instrument::instrument_instance(self);
        #[cfg(not(feature = "enabled"))]
        return self;
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
        #[cfg(feature = "enabled")]
        return backend::read_back::read_buffer(self, queue, buffer, start, len, read);
        #[cfg(not(feature = "enabled"))]
        return read_untimed(self, queue, buffer, start, len, read);
    }

    #[cfg(feature = "enabled")]
    fn begin_scope(&self, site: &'static Site) -> Result<WgpuScope, &'static str> {
        backend::WgpuScope::begin_on_device(site, self).map(WgpuScope::from)
    }

    #[cfg(feature = "enabled")]
    fn offer_to_attach(&self) {
        backend::attach::set_device(self);
    }
}

impl api::Queue for wgpu::Queue {
    type Device = wgpu::Device;
    type CommandBuffer = wgpu::CommandBuffer;

    #[cfg(feature = "enabled")]
    fn begin_scope(&self, site: &'static Site, device: Option<&wgpu::Device>) -> Result<WgpuScope, &'static str> {
        backend::WgpuScope::begin_on_queue(site, self, device).map(WgpuScope::from)
    }

    #[cfg(feature = "enabled")]
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

    #[cfg(feature = "enabled")]
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
                #[cfg(feature = "enabled")]
                return backend::attach::attach(self);
                #[cfg(not(feature = "enabled"))]
                return crate::wgpu::passthrough::Passthrough(self);
            }

            #[cfg(feature = "enabled")]
            fn begin_scope(
                &mut self,
                site: &'static Site,
                scope_id: u64,
                device: Option<&wgpu::Device>,
            ) -> Result<WgpuScope, &'static str> {
                backend::WgpuScope::begin_in_recorder(site, scope_id, self, device).map(WgpuScope::from)
            }

            #[cfg(feature = "enabled")]
            fn end_scope(&mut self, scope: &mut WgpuScope) {
                if let Some(w) = backend::WgpuScope::of_mut(scope) {
                    w.end_in_recorder(self);
                }
            }
        }
    )*};
}
recorder!(wgpu::CommandEncoder, wgpu::ComputePass<'_>, wgpu::RenderPass<'_>);

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

/// Without the `enabled` feature: copies `start..start + len` of `buffer` into a mappable
/// buffer, waits for it and hands the bytes to `read`, untimed.
#[cfg(not(feature = "enabled"))]
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
    let out = read(&super::mapped_range(&staging.slice(..)).map_err(|_| wgpu::BufferAsyncError)?);
    staging.unmap();
    Ok(out)
}
