//! Which wgpu values the generated code accepts as a recorder, queue or device: the objects
//! themselves, references to them, and (for queue and device) `Arc`s.

use std::sync::Arc;
use wgpu_profiler::ProfilerCommandRecorder;

/// Something timestamp queries can be written into.
pub trait Recorder: ProfilerCommandRecorder {
    /// The encoder itself, when this is one: queries can then be resolved right in it.
    fn as_encoder(&mut self) -> Option<&mut wgpu::CommandEncoder>;
    /// Runs `callback` once the command buffer holding this recorder's commands has executed;
    /// drops it unrun if the commands are never submitted.
    fn when_executed(&self, callback: impl FnOnce() + Send + 'static);
}

impl Recorder for wgpu::CommandEncoder {
    fn as_encoder(&mut self) -> Option<&mut wgpu::CommandEncoder> {
        Some(self)
    }
    fn when_executed(&self, callback: impl FnOnce() + Send + 'static) {
        self.on_submitted_work_done(callback);
    }
}

impl Recorder for wgpu::ComputePass<'_> {
    fn as_encoder(&mut self) -> Option<&mut wgpu::CommandEncoder> {
        None
    }
    fn when_executed(&self, callback: impl FnOnce() + Send + 'static) {
        self.on_submitted_work_done(callback);
    }
}

impl Recorder for wgpu::RenderPass<'_> {
    fn as_encoder(&mut self) -> Option<&mut wgpu::CommandEncoder> {
        None
    }
    fn when_executed(&self, callback: impl FnOnce() + Send + 'static) {
        self.on_submitted_work_done(callback);
    }
}

/// A recorder, or a mutable reference to one.
pub trait AsRecorder {
    type Recorder: Recorder;
    fn as_recorder(&mut self) -> &mut Self::Recorder;
}

macro_rules! recorder_is_itself {
    ($($t:ty),*) => {$(
        impl AsRecorder for $t {
            type Recorder = Self;
            fn as_recorder(&mut self) -> &mut Self {
                self
            }
        }
    )*};
}
recorder_is_itself!(wgpu::CommandEncoder, wgpu::ComputePass<'_>, wgpu::RenderPass<'_>);

impl<T: AsRecorder + ?Sized> AsRecorder for &mut T {
    type Recorder = T::Recorder;
    fn as_recorder(&mut self) -> &mut T::Recorder {
        (**self).as_recorder()
    }
}

pub fn as_recorder<A: AsRecorder + ?Sized>(a: &mut A) -> &mut A::Recorder {
    a.as_recorder()
}

/// Borrowing a wgpu handle out of the ways programs hold one.
pub trait AsHandle<T> {
    fn as_handle(&self) -> &T;
}

macro_rules! handle {
    ($($t:ty),*) => {$(
        impl AsHandle<$t> for $t {
            fn as_handle(&self) -> &$t {
                self
            }
        }
        impl AsHandle<$t> for Arc<$t> {
            fn as_handle(&self) -> &$t {
                self
            }
        }
    )*};
}
handle!(wgpu::Queue, wgpu::Device);

impl<T, H: AsHandle<T> + ?Sized> AsHandle<T> for &H {
    fn as_handle(&self) -> &T {
        (**self).as_handle()
    }
}

impl<T, H: AsHandle<T> + ?Sized> AsHandle<T> for &mut H {
    fn as_handle(&self) -> &T {
        (**self).as_handle()
    }
}

pub fn as_queue<Q: AsHandle<wgpu::Queue> + ?Sized>(q: &Q) -> &wgpu::Queue {
    q.as_handle()
}

pub fn as_device<D: AsHandle<wgpu::Device> + ?Sized>(d: &D) -> &wgpu::Device {
    d.as_handle()
}
