//! Test support for [gpuspan](https://docs.rs/gpuspan): assert on what an instrumented call
//! measured.
//!
//! - [`Capture`]: every call finished while it is alive, sampled or not, as a [`Record`].
//! - [`record`]: the record model (host interval, GPU timing, kernels and copies, bytes,
//!   attribution), with constructors for tests that build records.
//! - [`clock::now_ns`]: the clock records are on.
//! - [`cuda`] (feature `cuda`): CUPTI replay of captured buffers, the attribution's counts,
//!   whether CUDA timing started.
//! - [`monitor`] (feature `nvml`): the device monitor's discovery, cost and summaries.
//! - [`OtlpExport`] (feature `otlp`): exports a built record through an OTLP pipeline.
//!
//! It turns nothing on: instrumentation is the `enabled` feature of gpuspan (or of this crate,
//! which forwards it). Without it every item is still here, doing nothing (a capture holds no
//! records), so tests compile either way. Add it to `[dev-dependencies]`:
//!
//! ```toml
//! [dev-dependencies]
//! gpuspan-testing = { version = "0.1", features = ["enabled"] }
//! ```
//!
//! ```
//! #[gpuspan::gpu_kernel]
//! fn blur(pixels: &mut [f32]) {
//!     pixels.iter_mut().for_each(|p| *p *= 0.5);
//! }
//!
//! let capture = gpuspan_testing::Capture::start();
//! blur(&mut [1.0; 64]);
//! gpuspan::flush();
//! for record in capture.of("blur") {
//!     assert!(record.host.end_ns >= record.host.start_ns);
//! }
//! # if cfg!(feature = "enabled") { assert_eq!(capture.of("blur").len(), 1); }
//! ```
//!
//! Not the program's API: gpuspan lends these through a hidden module, as it lends the macros'
//! expansion support (docs/decisions.md, 72); this crate is where they are documented and
//! versioned.

pub use record::Record;

/// What a resolved measurement is: one record per call of an annotated function, with the
/// GPU's own timing when a GPU source exists, and the activities (kernels, copies) inside it.
///
/// The data types are `#[non_exhaustive]` (a backend may learn more); tests build them with
/// their constructors ([`Record::new`], [`GpuTiming::new`](record::GpuTiming::new),
/// [`Activity::new`](record::Activity::new)) and set the public fields.
pub mod record {
    pub use gpuspan::__testing::record::*;
}

/// Memory around a call, for sites annotated with `track_memory`.
pub mod memory {
    pub use gpuspan::__testing::memory::*;
}

/// The clock every record's times are on.
pub mod clock {
    /// Now, in Unix-epoch nanoseconds on the monotonic clock: the scale of every record's
    /// times. Without the `enabled` feature, the wall clock.
    pub fn now_ns() -> u64 {
        gpuspan::__testing::clock::now_ns()
    }
}

/// The instrumented wgpu 30 device's own objects (feature `wgpu-30`): `real_compute_pipeline`,
/// the real pipeline behind one it made, so that a benchmark can time the very pipeline gpuspan
/// timed with raw timestamp writes on the real device (with `enabled`: without it no device is instrumented).
#[cfg(all(feature = "enabled", feature = "wgpu-30"))]
pub mod wgpu30 {
    pub use gpuspan::__testing::wgpu30::*;
}

/// The same for wgpu 29 (feature `wgpu-29`).
#[cfg(all(feature = "enabled", feature = "wgpu-29"))]
pub mod wgpu29 {
    pub use gpuspan::__testing::wgpu29::*;
}

/// CUDA timing's own state, for tests of it (feature `cuda`): CUPTI replay of captured buffers
/// (`GPUSPAN_CUPTI_DUMP`) through the decoder and the attribution, what the attribution has
/// done, whether CUDA timing started. Without the `enabled` feature nothing is timed: each
/// function says "not started" (`None`, 0, `false`) and `replay` holds only its counts.
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use gpuspan::__testing::cuda::*;
}

/// The device monitor's own diagnostics (feature `nvml`): discovery on demand, what the sampler
/// cost, per-device summaries and, with a wgpu feature, how a wgpu adapter was matched to a
/// monitored device. Without the `enabled` feature only `discover`, which finds no device.
#[cfg(feature = "nvml")]
pub mod monitor {
    pub use gpuspan::__testing::monitor::*;
}

/// Collects every record finished while it is alive, for assertions in tests: the calls made
/// on the thread that started it (for an async call: a thread it ran on), so tests running in
/// parallel do not see one another's calls. A test whose calls run on threads of their own
/// (spawned threads, a multi-thread runtime) uses [`Capture::start_all_threads`]. Work no call
/// owned (CUPTI's `unattributed`) is seen by every capture. Without the `enabled` feature it
/// captures nothing.
///
/// GPU records are finished once the GPU's timestamps are read: call `gpuspan::flush()` before
/// reading them.
#[derive(Debug)]
pub struct Capture(gpuspan::__testing::Capture);

impl Capture {
    /// Starts capturing the calls this thread makes from now on, sampled or not, until it is
    /// dropped.
    pub fn start() -> Capture {
        Capture(gpuspan::__testing::Capture::start())
    }

    /// Starts capturing the calls every thread makes from now on (those of tests running at the
    /// same time included), until it is dropped.
    pub fn start_all_threads() -> Capture {
        Capture(gpuspan::__testing::Capture::start_all_threads())
    }

    /// Everything captured so far (always empty without the `enabled` feature).
    pub fn records(&self) -> Vec<Record> {
        self.0.records()
    }

    /// The records of the site with this display name.
    pub fn of(&self, name: &str) -> Vec<Record> {
        self.0.of(name)
    }
}

/// Exports a built record through an OTLP pipeline (feature `otlp`).
#[cfg(feature = "otlp")]
pub trait OtlpExport {
    /// Exports one record now, as spans, whatever the sampling says: a test of what the
    /// exporter sends, or of how it copes with a collector that fails, without annotated calls
    /// to make the records. Does nothing without the `enabled` feature or when the pipeline
    /// exports no traces.
    fn export(&self, record: &Record);
}

#[cfg(feature = "otlp")]
impl OtlpExport for gpuspan::otlp::Otlp {
    fn export(&self, record: &Record) {
        gpuspan::__testing::otlp_export(self, record);
    }
}
