//! Ending a queue bracket with the call's last submission rather than at its exit.
//!
//! In a queue-bracketed body the macro rewrites each `RECV.submit(ARG)` into
//! `RECV.submit((&SubmitProbe(&RECV)).gpuspan_submit().with_end(ARG, &mut scope))`. When `RECV`
//! is a wgpu queue, autoref specialization picks [`SubmitQueue`] and the submission carries one
//! more command buffer of gpuspan's: the bracket's end timestamp, resolved in place. Any other
//! receiver (a thread pool's `submit`, a type parameter) picks `SubmitOther`, whose `with_end`
//! returns `ARG` unchanged. So work the function does after its last submission (mapping a
//! read-back, waiting for it, copying out) is no longer inside the bracket, and nothing is
//! submitted at exit.

use super::resources::AsHandle;
use super::WgpuScope;
use crate::__private::SubmitProbe;
use crate::scope::{GpuScope, Scope};
use std::iter::Chain;
use std::option::IntoIter;

/// The specialized arm: the receiver is a wgpu queue (or a reference or `Arc` of one).
pub trait SubmitQueue<'a> {
    /// The queue being submitted to.
    fn gpuspan_submit(&self) -> QueueSubmit<'a>;
}

impl<'a, T: AsHandle<wgpu::Queue> + ?Sized> SubmitQueue<'a> for SubmitProbe<'a, T> {
    #[inline]
    fn gpuspan_submit(&self) -> QueueSubmit<'a> {
        QueueSubmit(self.0.as_handle())
    }
}

/// A submission on a wgpu queue inside a bracketed body.
#[derive(Debug)]
pub struct QueueSubmit<'a>(&'a wgpu::Queue);

impl QueueSubmit<'_> {
    /// The command buffers to submit: the user's, then, when this is the bracket's queue, the
    /// bracket's end.
    #[inline]
    pub fn with_end<I: IntoIterator<Item = wgpu::CommandBuffer>>(
        self,
        buffers: I,
        scope: &mut Scope,
    ) -> Chain<I::IntoIter, IntoIter<wgpu::CommandBuffer>> {
        let end = match scope.gpu_mut() {
            Some(GpuScope::Wgpu(w)) => w.end_at_submit(self.0),
            _ => None,
        };
        buffers.into_iter().chain(end)
    }
}

impl WgpuScope {
    /// The end-timestamp buffer a submission on `queue` carries, when this scope brackets that
    /// queue. A submission on another queue is not the bracket's.
    fn end_at_submit(&mut self, queue: &wgpu::Queue) -> Option<wgpu::CommandBuffer> {
        if self.queue.as_ref() != Some(queue) {
            return None;
        }
        let opening = self.query.take();
        if opening.is_none() && self.submits == 0 {
            return None; // the bracket never opened
        }
        let end = self.frame.end_at_submit(self.scope_id, opening)?;
        self.submits += 1;
        Some(end)
    }
}
