//! GPU work in the traces you already use.
//!
//! Put [`gpu_kernel`] on a function that encodes wgpu work or launches CUDA kernels and
//! [`gpu_transfer`] on one that moves data between host and device. Each call then becomes a
//! `tracing` span for the host side and, once the GPU has done the work, a measurement with the
//! GPU's own timestamps, aggregated per function, exported as spans, and drawn on a timeline.
//!
//! ```
//! #[gpuspan::gpu_kernel(threshold_us = 50)]
//! fn blur(pixels: &mut [f32]) {
//!     pixels.iter_mut().for_each(|p| *p *= 0.5);
//! }
//!
//! #[gpuspan::gpu_transfer(direction = cpu_to_gpu)]
//! fn upload(data: &[f32]) -> Vec<f32> {
//!     data.to_vec() // bytes inferred from the slice: 4 × len
//! }
//!
//! fn main() {
//!     // With no configuration: a summary table on stderr and a Perfetto timeline at exit.
//!     let _guard = gpuspan::Config::from_env().no_trace_file().init();
//!     let mut img = upload(&[1.0; 1024]);
//!     blur(&mut img);
//! }
//! ```
//!
//! Functions without a GPU resource in their signature, like these two, are timed on the host
//! and labelled `gpu.timing.source = "host"`; with a `&mut wgpu::CommandEncoder`,
//! `&wgpu::Queue` (feature `wgpu`) or a CUDA stream (feature `cuda`) they get GPU timestamps.
//!
//! # Features
//! - `enabled`: instrumentation on. Without it the attributes expand to the function exactly
//!   as written and every public item is still there, with the same signature, doing nothing:
//!   [`init`] returns a guard that does nothing, [`summary`] is empty. Code never needs a
//!   `#[cfg]` around gpuspan; make your own feature turn this one on
//!   (`profile = ["gpuspan/enabled"]`).
//!
//! The backend features bring a backend's API and types (so that calls like
//! `gpuspan::wgpu::register` compile); they time anything only together with `enabled`.
//! - `wgpu-29`, `wgpu-30`: timestamp queries through wgpu-profiler, for a program on that wgpu
//!   major (both may be on); `wgpu` is the newest.
//! - `cuda`: CUPTI activity records through cudarc, loaded at run time.
//! - `otlp`: OpenTelemetry export over OTLP (gRPC or HTTP/protobuf), started by [`init`] when
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//! - `nvml`: device discovery and metrics through NVML (NVIDIA) and ROCm SMI (AMD), loaded at run time.
//!
//! For tests, the crate `gpuspan-testing` gives `Capture` (every finished call as a record, to
//! assert on), the record model, the clock records are on, CUPTI replay and gpuspan's own
//! diagnostics; it turns nothing on. Add it to `[dev-dependencies]` (docs/decisions.md, 72).
//!
//! At run time `GPUSPAN=off` turns every scope into one relaxed atomic load.
//!
//! The guard's drop writes the summary and the timeline; so do `std::process::exit` with a live
//! guard (an exit hook, on Unix) and SIGINT/SIGTERM (by default; [`Config::flush_on_signal`]),
//! after which the program ends by that signal.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Every public item is documented and every `pub` is reachable: the public API is what the docs
// show, and nothing more.
#![warn(missing_docs, unreachable_pub)]
// Every byte gpuspan writes to stderr goes through `diagnostics::say`, which ignores write
// errors: the standard print macros panic on a closed or full stderr, and the program must not die of that.
// `cargo clippy` (scripts/test) fails on any print macro in the runtime.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

/// Times a function that encodes or launches GPU work.
///
/// | argument | meaning |
/// |---|---|
/// | `name = "..."` | display name (default: the function's name); also `name = CONST` or `"..."` alone |
/// | `target = "..."` | the span's target (default: the module path, as `#[tracing::instrument]`) |
/// | `parent = <expr>`, `follows_from = <expr>` | the span's explicit parent and causes, as in `tracing` |
/// | `backend = wgpu \| cuda \| auto` | which backend times it (default `auto`: from the parameter types) |
/// | `encoder = <place>` | the wgpu `CommandEncoder`/`ComputePass`/`RenderPass` to put the queries in |
/// | `queue = <expr>` | the wgpu `Queue` whose submissions are bracketed |
/// | `device = <expr>` | the wgpu `Device` (inferred from a `&Device` parameter) |
/// | `stream = <expr>` | the CUDA stream (for the CUDA-event fallback) |
/// | `threshold_us = N` | calls shorter than N µs are only aggregated (default: global, 100) |
/// | `trace_all` | export every call |
/// | `fields(x, key = expr, key = %expr, {CONST} = expr, later)` | fields of the span, as in `tracing` |
/// | `skip(x, self)`, `skip_all` | neither record these parameters nor use them for resource or size inference |
/// | `err`, `ret` (with `(Debug)`, `(Display)`, `(level = ..)`) | `tracing`'s events for an `Err` and the returned value |
/// | `level = "debug"` | level of the host `tracing` span (default `info`) |
/// | `crate = path` | path to the gpuspan crate, when renamed |
///
/// The host span is the one `#[tracing::instrument]` makes: every parameter not skipped is
/// recorded, with `Debug` (or as a value for integers, `bool`, `str` and `String`). See
/// docs/attributes.md, "Coming from `#[instrument]`", for what differs.
#[doc(inline)]
pub use gpuspan_macros::gpu_kernel;

/// Times a function that moves data between host and device.
///
/// Takes the arguments of [`gpu_kernel`] and:
///
/// | argument | meaning |
/// |---|---|
/// | `direction = cpu_to_gpu \| gpu_to_cpu \| gpu_to_gpu` | required, except with CUDA (CUPTI reports it) |
/// | `bytes = <expr>` | bytes moved (default: the size of the one slice parameter) |
#[doc(inline)]
pub use gpuspan_macros::gpu_transfer;

/// Times a block that encodes or launches GPU work: code in `main`, a loop or a closure.
///
/// The name comes first, then any argument of [`gpu_kernel`], then the block; the macro's value
/// is the block's. Resources are named explicitly (there is no signature to infer them from).
/// `break`, `continue`, `return` and `?` keep their meaning; the scope closes however the block
/// is left, and a `?` that leaves marks the call as an error. With the `enabled` feature off it
/// is the block as written.
///
/// ```
/// let mut frame_total = 0.0;
/// for step in 0..3 {
///     frame_total += gpuspan::kernel!("physics step", trace_all, {
///         // record and submit work here; with a queue: `queue = &queue` before the block
///         step as f32 * 0.5
///     });
/// }
/// # assert_eq!(frame_total, 1.5);
/// ```
#[doc(inline)]
pub use gpuspan_macros::kernel;

/// Times a block that moves data between host and device; the block form of [`gpu_transfer`].
///
/// `direction` is required and `bytes` too (there is no slice parameter to take it from):
///
/// ```
/// let data = vec![0u8; 4096];
/// let copy = gpuspan::transfer!("stage", direction = cpu_to_gpu, bytes = data.len(), {
///     data.clone()
/// });
/// # assert_eq!(copy.len(), 4096);
/// ```
#[doc(inline)]
pub use gpuspan_macros::transfer;

mod config;
mod init;
pub use {
    config::{Config, TraceFormat},
    init::{init, shutdown, Guard},
};

// The data types (sites, summaries, the record model) compile either way, so that code reading
// them compiles with instrumentation off; what fills them is each module's `imp`, the
// instrumented build's (decision 73), so the compiler checks dead code in each feature set.
mod causality;
mod export;
mod site;

// The record model is what a test sees of a call (`Capture`): lent to `gpuspan-testing` through
// `__testing`; a program sees sites, summaries, spans and the timeline.
mod memory;
mod record;

// The behaviour. Each public item is defined once; without `enabled` its body is the no-op
// (docs/architecture.md, "The off build").
mod capture;
mod clock;
// Without `enabled` what would be said is dropped.
mod diagnostics;
// Expansion support, reached only through the hidden `__private`: not documented API.
#[allow(missing_docs)]
mod probe;
mod span_scopes;
mod switch;

// The machinery only the instrumented build has (the collector, the pipeline, the scope, the
// backends' seam, the resolver, ...): one door, its modules named from here as `crate::<name>`.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(all(feature = "enabled", any(feature = "_wgpu", feature = "cuda")))]
use imp::placement;
#[cfg(feature = "enabled")]
use imp::{
    aggregate, backends, call, collector, env, future, hooks, parent, pipeline, resolver, ring, running, sampling,
    scope, settings, signal, sites, spans, submit_probe, thread,
};

#[cfg(feature = "_wgpu")]
pub mod wgpu;

#[cfg(feature = "cuda")]
pub mod cuda;

#[cfg(feature = "nvml")]
pub mod monitor;

pub use span_scopes::{layer, layer_with, SpanLayer, SpanScopes, SpanSelection};
pub use {
    causality::Trust,
    export::summary::{SiteSummary, Summary},
    record::{Attributed, DeviceLabel, TimingSource},
    site::{Backend, Direction, Site, SiteDesc, SiteKind},
};

pub use {export::summary::summary, init::flush, switch::set_enabled};

// OpenTelemetry export over OTLP (its own docs are the module's).
#[cfg(feature = "otlp")]
#[path = "export/otlp/mod.rs"]
pub mod otlp;

// The trace context a call's spans hang under, and the OTLP export a `Config` holds: chosen at
// compile time (OpenTelemetry's with the `otlp` feature, nothing without), so that the scope, the
// record and `config.rs` name no exporter.
mod otlp_choice;

#[doc(hidden)]
#[cfg(feature = "enabled")]
#[path = "private.rs"]
pub mod __private;

// What the crate `gpuspan-testing` reaches (its public, documented API is there), in every
// feature set: without `enabled` its items do nothing.
#[doc(hidden)]
#[path = "testing.rs"]
pub mod __testing;

#[doc(hidden)]
#[cfg(not(feature = "enabled"))]
pub mod __private {
    //! Not a stable API.
    pub use crate::__gpuspan_select as select;
    pub use gpuspan_macros::__instrumented as instrumented;
    pub use tracing;

    // What the off expansion names in dead code (`if false { .. }`, no machine code) so that an
    // argument of the wrong type is the same error as with instrumentation on: a resource's
    // backend's check, one module per side (as `private.rs`'s entries).
    pub use {cuda_handles::*, wgpu_handles::*};

    pub use crate::probe::{byte_count, debug_field, display_field};

    /// A `kernel!`/`transfer!` block opens its scope at run time, so it cannot be evaluated in a
    /// const context, on or off: naming this (not `const`) in the off block says so.
    pub fn gpu_scope_opens_at_run_time() {}

    /// The wgpu backend's checks of `encoder = ..`, `queue = ..` and `device = ..`.
    #[cfg(feature = "_wgpu")]
    mod wgpu_handles {
        pub use crate::wgpu::handles::{as_device, as_queue, as_recorder};
    }

    /// Without the wgpu backend `encoder = ..`, `queue = ..` and `device = ..` name the
    /// user's own types, as with instrumentation on.
    #[cfg(not(feature = "_wgpu"))]
    mod wgpu_handles {
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
    }

    /// The CUDA backend's check of `stream = ..`.
    #[cfg(feature = "cuda")]
    mod cuda_handles {
        pub use crate::cuda::resources::as_stream;
    }

    /// Without the CUDA backend `stream = ..` names the user's own type.
    #[cfg(not(feature = "cuda"))]
    mod cuda_handles {
        /// The stream as written.
        pub fn as_stream<T: ?Sized>(t: &T) -> &T {
            t
        }
    }

    /// Names a `parent = ..` argument in the off build (never called: it sits under `if false`),
    /// typed as `tracing` types it, so an import used only there is not unused.
    pub fn parent<P: Into<Option<tracing::Id>>>(_: P) {}

    /// The same for `follows_from = ..`: an iterator of causes.
    pub fn follows_from<I>(_: I)
    where
        I: IntoIterator,
        I::Item: Into<Option<tracing::Id>>,
    {
    }
}

/// Keeps the instrumented arm when `enabled` is on. Not a stable API.
#[doc(hidden)]
#[cfg(feature = "enabled")]
#[macro_export]
macro_rules! __gpuspan_select {
    ({ $($on:tt)* } { $($off:tt)* }) => { $($on)* };
}

/// Keeps the function as written when `enabled` is off. Not a stable API.
#[doc(hidden)]
#[cfg(not(feature = "enabled"))]
#[macro_export]
macro_rules! __gpuspan_select {
    ({ $($on:tt)* } { $($off:tt)* }) => { $($off)* };
}

/// Registers a site with `inventory`. Not a stable API.
#[doc(hidden)]
#[cfg(feature = "enabled")]
#[macro_export]
macro_rules! __gpuspan_register_site {
    ($site:ident) => {
        $crate::__private::inventory::submit! { $crate::__private::SiteRef(&$site) }
    };
}

// Structural checks of the layout (the backends' seam, the collector's layering, the settings'
// one reader), on the sources: in every feature set.
#[cfg(test)]
mod structure;
