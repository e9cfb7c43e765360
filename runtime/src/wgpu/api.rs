//! The traits each wgpu major implements for its own types (`major.rs`, compiled once per major):
//! gpuspan's public functions and the generated code are generic over them, so a program on any
//! supported major calls them unchanged. Public so that they can bound public functions, in a
//! private module so that nothing outside can name (or implement) them.

use std::fmt::Debug;
use std::ops::{DerefMut, RangeBounds};

#[cfg(feature = "enabled")]
use {super::scope::WgpuScope, crate::site::Site};

/// The traits only the instrumented build has: pass descriptors, adapter facts.
#[cfg(feature = "enabled")]
pub(super) mod imp;

/// A `wgpu::Adapter` of a supported major.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `wgpu::Adapter` of a wgpu major gpuspan supports",
    label = "expected a `wgpu::Adapter` or an `Arc` of one",
    note = "the majors are gpuspan's features `wgpu-29` and `wgpu-30`; a wrapper type: pass the adapter inside it"
)]
pub trait Adapter {
    /// The major's `Device`.
    type Device;
    /// The major's `Queue`.
    type Queue;
    /// The major's `Features`.
    type Features;
    /// The timestamp features of this adapter gpuspan can use.
    fn timestamp_features(&self) -> Self::Features;
    /// `gpuspan::wgpu::register`.
    fn register(&self, device: &Self::Device, queue: &Self::Queue);
    /// `gpuspan::wgpu::instrument`.
    fn instrument(&self, device: Self::Device, queue: Self::Queue) -> (Self::Device, Self::Queue);
}

/// A `wgpu::Instance` of a supported major.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `wgpu::Instance` of a wgpu major gpuspan supports",
    note = "the majors are gpuspan's features `wgpu-29` and `wgpu-30`"
)]
pub trait Instance {
    /// `gpuspan::wgpu::instrument_instance`.
    fn instrument_instance(self) -> Self;
}

// The methods the generated code's scopes call (`begin_scope`, ...) are the traits' own, each
// `enabled` only, not a second trait in `imp.rs`: a value of the wrong type (`queue = device`)
// then fails one bound, one error, where a second trait would add its own error
// (ui-tests `fail-wgpu/queue_wrong_type`).

/// A `wgpu::Device` of a supported major.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `wgpu::Device`",
    label = "expected a `wgpu::Device`, a reference to one or an `Arc` of one"
)]
pub trait Device {
    /// The major's `Queue`.
    type Queue;
    /// The major's `Buffer`.
    type Buffer;
    /// The major's `BufferAsyncError`.
    type MapError;
    /// `gpuspan::wgpu::read_buffer`.
    fn read_buffer<T>(
        &self,
        queue: &Self::Queue,
        buffer: &Self::Buffer,
        range: impl RangeBounds<u64>,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, Self::MapError>;
    /// A function that only takes a device: the submissions on its registered queue are
    /// bracketed.
    #[cfg(feature = "enabled")]
    fn begin_scope(&self, site: &'static Site) -> Result<WgpuScope, &'static str>;
    /// A host-timed scope just opened whose body may `attach` a recorder of this device.
    #[cfg(feature = "enabled")]
    fn offer_to_attach(&self);
}

/// A `wgpu::Queue` of a supported major (the generated code's; with `enabled` off too, for the
/// off arm's check of `queue = ..`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `wgpu::Queue`",
    label = "expected a `wgpu::Queue`, a reference to one or an `Arc` of one"
)]
pub trait Queue {
    /// The major's `Device`.
    type Device;
    /// The major's `CommandBuffer`.
    type CommandBuffer;
    /// A function that takes the queue: its submissions on it are bracketed.
    #[cfg(feature = "enabled")]
    fn begin_scope(&self, site: &'static Site, device: Option<&Self::Device>) -> Result<WgpuScope, &'static str>;
    /// The bracket's end to append to a submission on this queue, when `scope` brackets it.
    #[cfg(feature = "enabled")]
    fn end_for(&self, scope: &mut WgpuScope) -> Option<Self::CommandBuffer>;
    /// The same, for an async body's handle on its bracket.
    #[cfg(feature = "enabled")]
    fn end_for_handle(&self, handle: &super::scope::HandleOf) -> Option<Self::CommandBuffer>;
}

/// A command encoder, compute pass or render pass of a supported major: the bound of
/// `gpuspan::wgpu::attach` and of `AsRecorder::Recorder`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a wgpu command encoder, compute pass or render pass of a wgpu major gpuspan supports",
    note = "the majors are gpuspan's features `wgpu-29` and `wgpu-30`"
)]
pub trait Recorder {
    /// The major's `Device`.
    type Device;
    /// `gpuspan::wgpu::attach`.
    fn attach(&mut self) -> impl DerefMut<Target = Self> + Debug + '_;
    /// A query for a scope opens in this recorder.
    #[cfg(feature = "enabled")]
    fn begin_scope(
        &mut self,
        site: &'static Site,
        scope_id: u64,
        device: Option<&Self::Device>,
    ) -> Result<WgpuScope, &'static str>;
    /// The function leaves: the query `scope` opened in this recorder closes.
    #[cfg(feature = "enabled")]
    fn end_scope(&mut self, scope: &mut WgpuScope);
}

// An `Arc` of an adapter or device is one too, as a `&Arc<Adapter>` argument was when these
// functions took wgpu 30's types (deref coercion): `register(&adapter, ..)` stays unchanged for a
// program that keeps its adapter in an `Arc`.
impl<A: Adapter> Adapter for std::sync::Arc<A> {
    type Device = A::Device;
    type Queue = A::Queue;
    type Features = A::Features;
    fn timestamp_features(&self) -> A::Features {
        (**self).timestamp_features()
    }
    fn register(&self, device: &A::Device, queue: &A::Queue) {
        (**self).register(device, queue);
    }
    fn instrument(&self, device: A::Device, queue: A::Queue) -> (A::Device, A::Queue) {
        (**self).instrument(device, queue)
    }
}

impl<D: Device> Device for std::sync::Arc<D> {
    type Queue = D::Queue;
    type Buffer = D::Buffer;
    type MapError = D::MapError;
    fn read_buffer<T>(
        &self,
        queue: &D::Queue,
        buffer: &D::Buffer,
        range: impl RangeBounds<u64>,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, D::MapError> {
        (**self).read_buffer(queue, buffer, range, read)
    }
    #[cfg(feature = "enabled")]
    fn begin_scope(&self, site: &'static Site) -> Result<WgpuScope, &'static str> {
        (**self).begin_scope(site)
    }
    #[cfg(feature = "enabled")]
    fn offer_to_attach(&self) {
        (**self).offer_to_attach();
    }
}
