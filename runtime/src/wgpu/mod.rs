//! wgpu timing: timestamp queries through wgpu-profiler, placed on the host clock, for every
//! wgpu major this release supports (features `wgpu-29`, `wgpu-30`; `wgpu` is the newest). The
//! functions here are generic over the major: a program on any of them calls them unchanged.
//!
//! ```no_run
//! # use wgpu30 as wgpu;
//! # async fn setup(adapter: wgpu::Adapter) {
//! let (device, queue) = adapter
//!     .request_device(&wgpu::DeviceDescriptor {
//!         required_features: gpuspan::wgpu::timestamp_features(&adapter),
//!         ..Default::default()
//!     })
//!     .await
//!     .unwrap();
//! gpuspan::wgpu::register(&adapter, &device, &queue);
//! # }
//! ```
//!
//! How the majors are built (docs/wgpu.md, "Adding a wgpu major"): `api.rs` and `handles.rs`
//! say what gpuspan needs of a major; `major.rs` (the traits implemented for one major's types)
//! and `backend/` (the timing) are written once and compiled once per major by its file,
//! `v30.rs`, where `wgpu` names that major's crate; `scope.rs` holds a scope's wgpu part, of
//! whichever major, for the rest of gpuspan. With instrumentation off (`enabled`) only `major.rs`
//! is compiled, and every function here times nothing.

use std::fmt::Debug;
use std::ops::{DerefMut, RangeBounds};

/// The wgpu majors this release supports: `with_majors!(callback)` calls `callback! { V29(v29),
/// V30(v30), }` with each major compiled in (its feature on) as `Variant(module)`, so that the
/// code written once per major (`declare_majors` here, `scope.rs`) names no feature. A new major
/// is added to this chain (with its `vNN.rs`, its features in runtime/Cargo.toml and a CI step).
macro_rules! with_majors {
    ($callback:ident) => {
        major_29! { $callback }
    };
}

// One step per major, each defined twice: it adds its major to the list when the major's feature
// is on, then hands the list to the next step; the last step calls the callback.
#[cfg(feature = "wgpu-29")]
macro_rules! major_29 {
    ($callback:ident $($majors:tt)*) => { major_30! { $callback $($majors)* V29(v29), } };
}
#[cfg(not(feature = "wgpu-29"))]
macro_rules! major_29 {
    ($callback:ident $($majors:tt)*) => { major_30! { $callback $($majors)* } };
}
#[cfg(feature = "wgpu-30")]
macro_rules! major_30 {
    ($callback:ident $($majors:tt)*) => { $callback! { $($majors)* V30(v30), } };
}
#[cfg(not(feature = "wgpu-30"))]
macro_rules! major_30 {
    ($callback:ident $($majors:tt)*) => { $callback! { $($majors)* } };
}

macro_rules! declare_majors {
    ($($variant:ident($module:ident)),* $(,)?) => {
        $(pub(crate) mod $module;)*
    };
}
with_majors!(declare_majors);

// The traits' methods take gpuspan's own scope types: the traits are unnameable outside (sealed),
// so those types reach no user.
#[allow(private_interfaces)]
mod api;
pub(crate) mod handles;
/// What only the instrumented build has: a scope's wgpu part, the memory of instrumented
/// devices, the sums of their passes, the scope's constructors for wgpu sites.
#[cfg(feature = "enabled")]
mod imp;
pub use handles::{AsHandle, AsRecorder};
#[cfg(feature = "enabled")]
pub(crate) use {
    // The bound of `__private::wgpu_pass` (a pass begun on an encoder in an annotated body),
    // and what the device monitor knows of an adapter; unnameable outside (sealed).
    api::imp::{Info, PassDescriptor},
    imp::{memory, pass_sum, pass_traits, scope, AdapterFacts},
};

/// The timestamp features of `adapter` that gpuspan can use; add them to
/// `DeviceDescriptor::required_features`. Without `TIMESTAMP_QUERY` gpuspan times wgpu work on
/// the host and says so. Empty without the `enabled` feature: nothing is timed.
pub fn timestamp_features<A: api::Adapter>(adapter: &A) -> A::Features {
    adapter.timestamp_features()
}

/// Tells gpuspan about a device and its queue, so that functions that only take a command
/// encoder or pass can be timed, and names the device after the adapter in traces. Does nothing
/// without the `enabled` feature.
pub fn register<A: api::Adapter>(adapter: &A, device: &A::Device, queue: &A::Queue) {
    adapter.register(device, queue);
}

/// The device and queue to hand to a framework (bevy, vello, burn) or any code that encodes
/// its own passes: they forward every call to `device` and `queue`, and every compute and
/// render pass begun on them gets timestamp writes, so each pass is timed exactly and belongs
/// to the innermost annotated call or selected span entered on the thread that began it (else
/// it is listed as `unattributed: <pass label>`). Registers the device, as [`register`] does.
///
/// ```no_run
/// # use wgpu30 as wgpu;
/// # async fn setup(adapter: wgpu::Adapter) {
/// let (device, queue) = adapter
///     .request_device(&wgpu::DeviceDescriptor {
///         required_features: gpuspan::wgpu::timestamp_features(&adapter),
///         ..Default::default()
///     })
///     .await
///     .unwrap();
/// let (device, queue) = gpuspan::wgpu::instrument(&adapter, device, queue);
/// # }
/// ```
///
/// Objects made through the returned device work only with it (as objects of two devices do
/// in wgpu). A window surface is configured with it only if the surface was made through
/// [`instrument_instance`]'s instance. A device already instrumented (from an adapter of that
/// instance) is returned as it is. Without the `enabled` feature it returns its arguments
/// unchanged.
pub fn instrument<A: api::Adapter>(adapter: &A, device: A::Device, queue: A::Queue) -> (A::Device, A::Queue) {
    adapter.instrument(device, queue)
}

/// The instance to hand to a framework that makes its own adapters, devices and window
/// surfaces (bevy's `RenderCreation::Manual`): it forwards every call to `instance`, its
/// adapters' `request_device` returns devices and queues as [`instrument`] does (every pass
/// timed), and its surfaces can be configured with, and present through, those devices.
///
/// ```no_run
/// # use wgpu30 as wgpu;
/// # async fn setup() {
/// let instance = gpuspan::wgpu::instrument_instance(wgpu::Instance::default());
/// let adapter = instance.request_adapter(&Default::default()).await.unwrap();
/// let (device, queue) = adapter
///     .request_device(&wgpu::DeviceDescriptor {
///         required_features: gpuspan::wgpu::timestamp_features(&adapter),
///         ..Default::default()
///     })
///     .await
///     .unwrap(); // already instrumented
/// # }
/// ```
///
/// Without the `enabled` feature it returns its argument unchanged.
pub fn instrument_instance<I: api::Instance>(instance: I) -> I {
    instance.instrument_instance()
}

/// Times the commands recorded into `recorder` as the GPU work of the innermost annotated
/// function running on this thread, for recorders the function creates itself:
///
/// ```no_run
/// # use wgpu30 as wgpu;
/// # struct Compute { device: wgpu::Device, queue: wgpu::Queue }
/// # impl Compute {
/// #[gpuspan::gpu_kernel]
/// fn step(&self) {
///     let mut encoder = self.device.create_command_encoder(&Default::default());
///     {
///         let mut timed = gpuspan::wgpu::attach(&mut encoder);
///         let pass = timed.begin_compute_pass(&Default::default());
///         // ... dispatches
///     }
///     self.queue.submit([encoder.finish()]);
/// }
/// # }
/// ```
///
/// The query opens here and closes when the guard is dropped, so its interval covers exactly
/// the commands recorded through the guard. The device is the one the function names
/// (`device = ...`, or a queue or device parameter's) or the only registered one. One
/// attachment per call is timed. It replaces a queue bracket (a `&Queue` parameter or `queue =
/// ...`): the call is then timed by the attached commands alone, exactly, and nothing is
/// bracketed. A function that already has an exact source (a recorder parameter) keeps it. Outside an
/// annotated function, or with gpuspan off, the guard only passes the recorder through.
#[must_use = "the query closes when this guard is dropped: encode through it, then drop it"]
pub fn attach<R: api::Recorder>(recorder: &mut R) -> impl DerefMut<Target = R> + Debug + '_ {
    recorder.attach()
}

/// Reads `range` of `buffer` (which needs `COPY_SRC`) back to the host and hands the bytes to
/// `read`, returning what it returns; waits for the GPU. One transfer record, `read_buffer`:
/// its duration and bandwidth are the GPU copy's (timestamp queries around it), and it carries
/// the host's wait for the mapping and its copy-out (`read`) as `gpu_transfer.wait_us` and
/// `gpu_transfer.copy_out_us`. Fails as mapping fails (the device was lost). Untimed without the
/// `enabled` feature.
///
/// ```no_run
/// # use wgpu30 as wgpu;
/// # fn f(device: &wgpu::Device, queue: &wgpu::Queue, buffer: &wgpu::Buffer) {
/// let sum: f32 = gpuspan::wgpu::read_buffer(device, queue, buffer, .., |bytes| {
///     bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).sum()
/// })
/// .expect("device lost");
/// # }
/// ```
pub fn read_buffer<T, D: api::Device>(
    device: &D,
    queue: &D::Queue,
    buffer: &D::Buffer,
    range: impl RangeBounds<u64>,
    read: impl FnOnce(&[u8]) -> T,
) -> Result<T, D::MapError> {
    device.read_buffer(queue, buffer, range, read)
}
