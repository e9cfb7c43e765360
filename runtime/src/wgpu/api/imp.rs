//! What the instrumented build (`enabled`) asks of each major's types beyond the public
//! functions: the scope a function's resource opens and closes, the timestamp writes of the
//! passes an annotated body begins, and the adapter's facts. Implemented in `major/imp.rs`.

use super::{Device, Queue, Recorder};
use crate::site::Site;
use crate::wgpu::scope::{HandleOf, WgpuScope};

/// A `wgpu::Device` of a supported major, as the generated code's scopes use it.
pub trait DeviceScopes: Device {
    /// A function that only takes a device: the submissions on its registered queue are
    /// bracketed.
    fn begin_scope(&self, site: &'static Site) -> Result<WgpuScope, &'static str>;
    /// A host-timed scope just opened whose body may `attach` a recorder of this device.
    fn offer_to_attach(&self);
}

/// A `wgpu::Queue` of a supported major, as the generated code's scopes use it.
pub trait QueueScopes: Queue {
    /// A function that takes the queue: its submissions on it are bracketed.
    fn begin_scope(&self, site: &'static Site, device: Option<&Self::Device>) -> Result<WgpuScope, &'static str>;
    /// The bracket's end to append to a submission on this queue, when `scope` brackets it.
    fn end_for(&self, scope: &mut WgpuScope) -> Option<Self::CommandBuffer>;
    /// The same, for an async body's handle on its bracket.
    fn end_for_handle(&self, handle: &HandleOf) -> Option<Self::CommandBuffer>;
}

/// A command encoder, compute pass or render pass of a supported major, as the generated code's
/// scopes use it.
pub trait RecorderScopes: Recorder {
    /// A query for a scope opens in this recorder.
    fn begin_scope(
        &mut self,
        site: &'static Site,
        scope_id: u64,
        device: Option<&Self::Device>,
    ) -> Result<WgpuScope, &'static str>;
    /// The function leaves: the query `scope` opened in this recorder closes.
    fn end_scope(&mut self, scope: &mut WgpuScope);
}

/// A `wgpu::ComputePassDescriptor` or `wgpu::RenderPassDescriptor` of a supported major: a
/// `begin_compute_pass`/`begin_render_pass` in an annotated body passes its descriptor through
/// `__private::wgpu_pass` (`backend/passes.rs`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a wgpu pass descriptor",
    note = "in a function annotated with a wgpu resource, gpuspan fills the `timestamp_writes` of the passes begun with \
            `.begin_compute_pass(..)`/`.begin_render_pass(..)`; a method of that name on another type \
            needs another name, or a call outside the annotated body"
)]
pub trait PassDescriptor<'a>: Clone {
    /// This descriptor, with gpuspan's `timestamp_writes` where the innermost scope on this
    /// thread is timed by its passes (the query set is kept in `holder`, a temporary of the
    /// call's statement; of one type for every major, so that a wrong argument is one error);
    /// else a copy.
    fn timed(&self, holder: &'a mut Option<Box<dyn std::any::Any>>) -> Self;
}

/// A `wgpu::AdapterInfo` of a supported major.
#[allow(unreachable_pub)] // the bound of the monitor's `describe_adapter` (features `nvml`, `testing`)
pub trait Info {
    /// What the device monitor matches NVML devices by.
    fn facts(&self) -> crate::wgpu::AdapterFacts;
}

// As `api.rs` does for `Device`.
impl<D: DeviceScopes> DeviceScopes for std::sync::Arc<D> {
    fn begin_scope(&self, site: &'static Site) -> Result<WgpuScope, &'static str> {
        (**self).begin_scope(site)
    }
    fn offer_to_attach(&self) {
        (**self).offer_to_attach();
    }
}
