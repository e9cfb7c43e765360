//! CUDA timing through cudarc, loaded at run time: the crate builds without a CUDA toolkit and an
//! instrumented program runs unchanged where there is no GPU.
//!
//! Which source times a CUDA site is decided once, at the first call of a CUDA site, at
//! [`start`] or [`attach`], or at `gpuspan::init()` when the program has a CUDA site (or has
//! already loaded libcuda) and a device is present; a program that never reaches CUDA is told
//! nothing about it:
//!
//! | found | timing | `gpu.timing.source` |
//! |---|---|---|
//! | driver, device and libcupti ≥ 12.5 | CUPTI activity records, attributed by thread and time window (async: external correlation id) | `cupti` |
//! | driver and device; no CUPTI, or `GPUSPAN_CUPTI=off` | two CUDA events on the site's stream | `cuda_event` |
//! | no driver or no device | the host clock | `host` |
//!
//! Each case is said once (stderr, or the `tracing` subscriber) and shown in the summary.
//! Once CUDA is timed, every scope takes part, bare ones (no stream in the signature)
//! included: under CUPTI each marks its window of its thread's time (an async one pushes its
//! correlation id), so the kernels of a bare `#[gpu_kernel]` are attributed to it; without CUPTI, [`attach`] hands a scope a stream
//! created in its body. See `docs/cuda.md` for how attribution works and what was measured.

// Without the `enabled` feature the public functions below are their no-op bodies (each says
// what it does then) and only the plain data compiles: the timing source and its errors, the
// stream traits, and the attribution's counts.
mod counts;
pub(crate) mod resources;
// What `gpuspan-testing` lends out (through `crate::__testing`).
pub(crate) mod testing_api;
mod timing;
// CUPTI, CUDA events and the scopes they time: the instrumented build's.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::{
    at_shutdown, cupti, scope_bare, scope_start, span_enter, span_exit, span_scope, start_at_init, start_for_spans,
    watching, CudaScope,
};

use crate::record::DeviceLabel;
use cudarc::driver::CudaStream;
use std::sync::Arc;

pub use resources::AsStream;
pub use timing::{CudaError, Timing};

/// Looks for a CUDA driver and devices without ever panicking (cudarc panics when libcuda is
/// missing, so its presence is checked first). The result is kept for the process.
///
/// Without the `enabled` feature: `Ok` with no devices (no driver is loaded to look).
pub fn probe() -> Result<&'static [DeviceLabel], &'static CudaError> {
    #[cfg(feature = "enabled")]
    return imp::probe_once();
    #[cfg(not(feature = "enabled"))]
    Ok(&[])
}

/// Chooses the timing source now instead of at the first CUDA call. Call it before launching
/// work that no annotated function wraps if that work should be recorded too (as `unattributed`),
/// and in a program whose CUDA functions are all bare `#[gpu_kernel]`s (no stream parameter),
/// which nothing else starts CUDA timing for.
///
/// Without the `enabled` feature: [`Timing::Host`] (CUPTI is not started).
pub fn start() -> Timing {
    #[cfg(feature = "enabled")]
    return imp::start_once();
    #[cfg(not(feature = "enabled"))]
    Timing::Host
}

/// Hands a stream created inside an annotated function to the innermost gpuspan scope open on
/// this thread, for the case that scope could not be given one: without CUPTI
/// (`GPUSPAN_CUPTI=off`, or no libcupti) a scope is timed by CUDA events on its stream, and a
/// bare `#[gpu_kernel]` or one whose stream is made in its body has none. The call is timed
/// from here to its end on that stream, which is kept alive until then (the body may drop it
/// before the scope ends). With CUPTI (which sees every stream) or without a device it does
/// nothing, as it does when no scope is open or the scope has a stream already, and without the
/// `enabled` feature.
///
/// ```ignore
/// #[gpuspan::gpu_kernel]
/// fn step(ctx: &Arc<CudaContext>) -> Result<(), DriverError> {
///     let stream = ctx.new_stream()?;
///     gpuspan::cuda::attach(&stream);
///     // launches on `stream`
///     Ok(())
/// }
/// ```
pub fn attach(stream: &Arc<CudaStream>) {
    #[cfg(feature = "enabled")]
    imp::attach(stream);
    #[cfg(not(feature = "enabled"))]
    let _ = stream;
}
