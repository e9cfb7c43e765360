//! The constructors and methods of [`Scope`] the generated code calls for wgpu sites (a
//! recorder's query, a queue's or a device's bracket, an attachable call), and a sync body's
//! bracket end. Above the scope and the wgpu part of it (`wgpu/scope.rs`), so that the backend's
//! own modules never open a `Scope` (imports run one way, decision 66).

use crate::backends::GpuScope;
use crate::probe::Exit;
use crate::scope::Scope;
use crate::site::Site;
use crate::wgpu::api;
use crate::wgpu::handles::AsHandle;
use crate::wgpu::scope::{BracketEnds, BracketHandle, WgpuScope};
use tracing::Span;

/// The scope's GPU part, or host timing with the reason kept for the summary.
fn started(site: &'static Site, begun: Result<WgpuScope, &'static str>) -> GpuScope {
    match begun {
        Ok(w) => GpuScope::Wgpu(w),
        Err(why) => {
            site.timed_on_host(why);
            GpuScope::None
        }
    }
}

impl Scope {
    /// A scope timed by queries in a command encoder or pass.
    #[inline]
    pub fn wgpu_recorder<R: api::Recorder, D: AsHandle<R::Device> + ?Sized>(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        recorder: &mut R,
        device: Option<&D>,
    ) -> Scope {
        let device = device.map(AsHandle::as_handle);
        let mut scope =
            Scope::open(site, span, bytes, |scope_id| started(site, recorder.begin_scope(site, scope_id, device)));
        // On a pass-level device the passes the body begins in the encoder time the call.
        if let Some(GpuScope::Wgpu(w)) = scope.gpu_mut() {
            w.offer_pass_target();
        }
        scope
    }

    /// A scope whose submissions on `queue` are bracketed by timestamp writes.
    #[inline]
    pub fn wgpu_queue<Q: api::Queue, D: AsHandle<Q::Device> + ?Sized>(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        queue: &Q,
        device: Option<&D>,
    ) -> Scope {
        let device = device.map(AsHandle::as_handle);
        let mut scope = Scope::open(site, span, bytes, |_| started(site, queue.begin_scope(site, device)));
        scope.offer_bracket_device();
        scope
    }

    /// An `attach` in a bracketed call replaces the bracket: it records on the bracket's device.
    fn offer_bracket_device(&mut self) {
        if let Some(GpuScope::Wgpu(w)) = self.gpu_mut() {
            w.offer_bracket_device();
        }
    }

    /// A host-timed scope whose function records into a recorder it creates and hands over with
    /// `gpuspan::wgpu::attach`: the attachment uses `device`.
    #[inline]
    pub fn wgpu_attachable<D: api::Device>(site: &'static Site, span: Span, bytes: Option<u64>, device: &D) -> Scope {
        let scope = Scope::open(site, span, bytes, |_| GpuScope::None);
        if scope.is_active() {
            device.offer_to_attach();
        }
        scope
    }

    /// A scope whose submissions on the device's registered queue are bracketed.
    #[inline]
    pub fn wgpu_device<D: api::Device>(site: &'static Site, span: Span, bytes: Option<u64>, device: &D) -> Scope {
        let mut scope = Scope::open(site, span, bytes, |_| started(site, device.begin_scope(site)));
        scope.offer_bracket_device();
        scope
    }

    /// The function leaves: closes the query in the recorder it was opened in.
    #[inline]
    pub fn exit_recorder<R: api::Recorder>(&mut self, exit: Exit, recorder: &mut R) {
        self.exit(exit);
        if let Some(GpuScope::Wgpu(w)) = self.gpu_mut() {
            recorder.end_scope(w);
        }
    }

    /// A `?` in the function: when it leaves (`Err`, `None`), the query is closed.
    #[inline]
    pub fn try_exit_recorder<R: api::Recorder>(&mut self, exit: Exit, recorder: &mut R) {
        if matches!(exit, Exit::Error | Exit::Early) {
            self.exit_recorder(exit, recorder);
        }
    }

    /// The handle an async body's rewritten submissions use.
    #[inline]
    pub fn bracket_handle(&mut self) -> BracketHandle {
        match self.gpu_mut() {
            Some(GpuScope::Wgpu(w)) => BracketHandle(w.bracket_handle()),
            _ => BracketHandle(None),
        }
    }
}

/// A sync body's rewritten submissions ask the scope itself for the bracket's end.
impl<Q: api::Queue> BracketEnds<Q> for Scope {
    #[inline]
    fn end_for(&mut self, queue: &Q) -> Option<Q::CommandBuffer> {
        match self.gpu_mut() {
            Some(GpuScope::Wgpu(w)) => queue.end_for(w),
            _ => None,
        }
    }
}
