//! The traits each wgpu major implements for its own types (`major.rs`, compiled once per major):
//! gpuspan's public functions and the generated code are generic over them, so a program on any
//! supported major calls them unchanged. Public so that they can bound public functions, in a
//! private module so that nothing outside can name (or implement) them.

use std::fmt::Debug;
use std::ops::{DerefMut, RangeBounds};

/// What the instrumented build asks of the majors' types besides.
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
}
