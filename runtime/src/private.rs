//! What the generated code calls. Not a stable API: anything here may change in any release.

pub use crate::future::ScopedFuture;
pub use crate::probe::{Exit, Probe, ProbeExit, ProbeOther};
pub use crate::scope::Scope;
pub use crate::site::{Backend, Direction, Site, SiteDesc, SiteKind, SiteRef};
pub use crate::switch::{is_on, might_be_on};

/// Opens an annotated call's scope, out of line: the caller tests [`might_be_on`] and calls
/// this only then, so that neither the scope's construction nor the registers it needs are part
/// of the caller's path when gpuspan is off. `open` evaluates the call's fields and sizes and
/// builds its span and scope; it runs only once gpuspan is known to be on.
#[cold]
#[inline(never)]
pub fn open(open: impl FnOnce() -> Scope) -> Scope {
    if crate::switch::is_on() {
        open()
    } else {
        Scope::off()
    }
}

/// [`open`] for an async call: its host span is not entered on opening, but around each poll
/// of the [`ScopedFuture`] it then goes into (as `tracing`'s `Instrumented` enters it).
#[cold]
#[inline(never)]
pub fn open_idle(open: impl FnOnce() -> Scope) -> Scope {
    if crate::switch::is_on() {
        crate::scope::opening_idle(open)
    } else {
        Scope::off()
    }
}

/// Runs an instrumented function's body. A closure passed as `FnOnce` may return borrows of
/// the `&mut` parameters it captured, so every sync function shape can be wrapped this way.
#[inline(always)]
pub fn call_once<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// A parameter recorded by default, as `#[tracing::instrument]` records it: with `Debug`
/// ([`FieldDebug`]) when its type has it, else not at all ([`FieldOther`], an empty field)
/// where `tracing` would refuse to compile. The arm is picked at compile time.
#[derive(Debug)]
pub struct FieldProbe<'a, T>(pub &'a T);

/// The arm of [`FieldProbe`] for a type with `Debug`.
pub trait FieldDebug<'a> {
    /// The value, recorded with `Debug`.
    fn gpuspan_field(&self) -> tracing::field::DebugValue<&'a dyn std::fmt::Debug>;
}

impl<'a, T: std::fmt::Debug> FieldDebug<'a> for FieldProbe<'a, T> {
    #[inline(always)]
    fn gpuspan_field(&self) -> tracing::field::DebugValue<&'a dyn std::fmt::Debug> {
        tracing::field::debug(self.0)
    }
}

/// The arm of [`FieldProbe`] for any other type: nothing recorded.
pub trait FieldOther {
    /// An empty field.
    fn gpuspan_field(&self) -> tracing::field::Empty;
}

impl<T> FieldOther for &FieldProbe<'_, T> {
    #[inline(always)]
    fn gpuspan_field(&self) -> tracing::field::Empty {
        tracing::field::Empty
    }
}

pub use crate::probe::{byte_count, debug_field, display_field};

pub use crate::{__gpuspan_register_site as register_site, __gpuspan_select as select};
pub use gpuspan_macros::__instrumented as instrumented;
pub use inventory;
pub use tracing;

/// `device = ...` next to a recorder or queue: the value as written, converted by the scope
/// (to its other resource's major).
#[inline(always)]
pub fn device_as_written<D: ?Sized>(device: &D) -> &D {
    device
}

pub use crate::submit_probe::{PlainSubmit, SubmitOther, SubmitProbe};

// The backends' entries. The generated code names a resource's backend (`as_stream`,
// `Scope::wgpu_queue`, ...) whether or not that backend is compiled in, so each has its entry
// here and a stand-in for a build without it (timed on the host, said once): with
// `backends.rs`, the one core file that must name backends (docs/architecture.md, "Adding a
// backend").
pub use {cuda_entries::*, wgpu_entries::*};

/// The receiver of a `.begin_compute_pass(..)`/`.begin_render_pass(..)` in an annotated wgpu
/// body (`macros/src/passes.rs`): the call is rewritten to
/// `RECV.__gpuspan_pass_receiver().begin_compute_pass(ARG)`. Method resolution then picks, in
/// this order: a wgpu `CommandEncoder` (this type's own method, `wgpu/major.rs`), the receiver's
/// own method of that name (any type: it is reached through `Deref`), a guard that dereferences
/// to an encoder (`attach`'s, a `Box`, a lock's; the `PassThroughGuard` traits of [`passes`]),
/// and last the encoder's own method. So a pass begun on an encoder gets gpuspan's timestamp
/// writes, the descriptor's type is still inferred from the method (`&Default::default()`
/// works), and a method of that name on any other type is called as written. It is the
/// receiver itself, seen through another type (not a temporary holding a borrow of it), so
/// what the method returns may borrow the receiver as long as the original call's result could.
#[derive(Debug)]
#[repr(transparent)]
pub struct PassReceiver<T: ?Sized>(T);

/// Makes a [`PassReceiver`] of any receiver, by method-call autoref (so `encoder`,
/// `&mut encoder`, `self.encoder` and a guard all become `&mut PassReceiver<T>`).
pub trait BeginPass {
    /// See [`PassReceiver`].
    fn __gpuspan_pass_receiver(&mut self) -> &mut PassReceiver<Self>;
}

impl<T: ?Sized> BeginPass for T {
    #[inline(always)]
    fn __gpuspan_pass_receiver(&mut self) -> &mut PassReceiver<T> {
        // SAFETY: `PassReceiver<T>` is `repr(transparent)` over `T`: the same layout and pointer
        // metadata, and the borrow's lifetime is kept.
        unsafe { &mut *(self as *mut T as *mut PassReceiver<T>) }
    }
}

impl<T: ?Sized> std::ops::Deref for PassReceiver<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> std::ops::DerefMut for PassReceiver<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// What a body whose passes are timed imports (`use __private::passes::*;`): the traits that
/// make [`PassReceiver`] work, unnamed so that they add no name to the user's scope.
pub mod passes {
    pub use super::BeginPass as _;
    #[cfg(feature = "_wgpu")]
    pub use crate::wgpu::pass_traits::*;
}

/// The wgpu backend's entries.
#[cfg(feature = "_wgpu")]
mod wgpu_entries {
    pub use crate::wgpu::handles::{as_device, as_queue, as_recorder};
    pub use crate::wgpu::scope::{BracketEnds, BracketHandle, SubmitQueue};

    /// No `device = ...`: the device parameter's `None`, of a type that is a handle of every
    /// major's device.
    #[inline(always)]
    pub fn no_device() -> Option<&'static NoDevice> {
        None
    }

    /// The type of "no `device = ...`": never a value, a handle of any major's device.
    #[derive(Debug)]
    pub enum NoDevice {}

    impl<T> crate::wgpu::AsHandle<T> for NoDevice {
        fn as_handle(&self) -> &T {
            match *self {}
        }
    }

    /// The descriptor of a pass begun in an annotated wgpu body: on a pass-level device, with
    /// gpuspan's `timestamp_writes` for the innermost scope (`wgpu/backend/passes.rs`; the query set
    /// kept in `holder`, which must live until the pass is begun); else a copy.
    #[inline]
    pub fn wgpu_pass<'a, D: crate::wgpu::PassDescriptor<'a>>(
        holder: &'a mut Option<Box<dyn std::any::Any>>,
        desc: &D,
    ) -> D {
        desc.timed(holder)
    }
}

/// Without the `wgpu` feature: wgpu resources are accepted as they are and the site is timed on
/// the host (said once); nothing is bracketed.
#[cfg(not(feature = "_wgpu"))]
mod wgpu_entries {
    use crate::probe::Exit;
    use crate::scope::Scope;
    use crate::site::Site;
    use tracing::Span;

    /// The recorder as written.
    pub fn as_recorder<T: ?Sized>(t: &mut T) -> &mut T {
        t
    }
    /// The queue as written.
    pub fn as_queue<T: ?Sized>(t: &T) -> &T {
        t
    }
    /// The device as written.
    pub fn as_device<T: ?Sized>(t: &T) -> &T {
        t
    }

    /// The device parameter is generic: its `None` needs a type.
    #[inline(always)]
    pub fn no_device() -> Option<&'static ()> {
        None
    }

    /// No receiver is a queue gpuspan brackets.
    pub trait SubmitQueue {}

    /// An async body's submissions have no bracket to end.
    #[derive(Debug)]
    pub struct BracketHandle;

    fn without_feature(site: &'static Site) {
        site.timed_on_host("built without the wgpu feature");
        crate::diagnostics::note_once(format_args!(
            "`{}` uses wgpu, but gpuspan was built without its `wgpu` feature: timing it on the host",
            site.desc.name
        ));
    }

    impl Scope {
        /// Nothing to hand an async body.
        #[inline(always)]
        pub fn bracket_handle(&mut self) -> BracketHandle {
            BracketHandle
        }
        pub fn wgpu_recorder<R: ?Sized, D: ?Sized>(
            site: &'static Site,
            span: Span,
            bytes: Option<u64>,
            _: &mut R,
            _: Option<&D>,
        ) -> Scope {
            without_feature(site);
            Scope::host(site, span, bytes)
        }
        pub fn wgpu_queue<Q: ?Sized, D: ?Sized>(
            site: &'static Site,
            span: Span,
            bytes: Option<u64>,
            _: &Q,
            _: Option<&D>,
        ) -> Scope {
            without_feature(site);
            Scope::host(site, span, bytes)
        }
        pub fn wgpu_device<D: ?Sized>(site: &'static Site, span: Span, bytes: Option<u64>, _: &D) -> Scope {
            without_feature(site);
            Scope::host(site, span, bytes)
        }
        pub fn wgpu_attachable<D: ?Sized>(site: &'static Site, span: Span, bytes: Option<u64>, _: &D) -> Scope {
            without_feature(site);
            Scope::host(site, span, bytes)
        }
        pub fn exit_recorder<R: ?Sized>(&mut self, exit: Exit, _: &mut R) {
            self.exit(exit);
        }
        pub fn try_exit_recorder<R: ?Sized>(&mut self, exit: Exit, _: &mut R) {
            self.exit(exit);
        }
    }
}

/// The CUDA backend's entries.
#[cfg(feature = "cuda")]
mod cuda_entries {
    pub use crate::cuda::resources::as_stream;

    /// No stream: the stream parameter's `None`, typed.
    #[inline(always)]
    pub fn no_stream() -> Option<&'static cudarc::driver::CudaStream> {
        None
    }
}

/// Without the `cuda` feature, CUDA sites are timed on the host (said once).
#[cfg(not(feature = "cuda"))]
mod cuda_entries {
    use crate::scope::Scope;
    use crate::site::Site;
    use tracing::Span;

    /// The stream as written.
    pub fn as_stream<T: ?Sized>(t: &T) -> &T {
        t
    }

    /// The stream parameter is generic: its `None` needs a type.
    #[inline(always)]
    pub fn no_stream() -> Option<&'static ()> {
        None
    }

    impl Scope {
        pub fn cuda<S: ?Sized>(site: &'static Site, span: Span, bytes: Option<u64>, _: Option<&S>) -> Scope {
            site.timed_on_host("built without the cuda feature");
            crate::diagnostics::note_once(format_args!(
                "`{}` uses CUDA, but gpuspan was built without its `cuda` feature: timing it on the host",
                site.desc.name
            ));
            Scope::host(site, span, bytes)
        }
    }
}
