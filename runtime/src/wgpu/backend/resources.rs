//! What the backend needs of a recorder it writes queries into (the values the generated code
//! accepts are `wgpu/handles.rs`'s).

use super::{wgpu, wgpu_profiler};
use wgpu_profiler::ProfilerCommandRecorder;

/// Something timestamp queries can be written into.
pub(crate) trait Recorder: ProfilerCommandRecorder {
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
