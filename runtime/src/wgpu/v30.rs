//! wgpu 30 (feature `wgpu-30`): `major.rs` and the backend compiled against it, with its
//! wgpu-profiler release. Adding a major is a copy of this file (docs/wgpu.md).

use ::wgpu30 as wgpu;
#[cfg(feature = "enabled")]
use ::wgpu_profiler_30 as wgpu_profiler;

/// Items of the backend interface (`wgpu::custom`) only this major has: kept here, dropped in
/// the other (`backend/instrument/forward.rs`).
#[cfg(feature = "enabled")]
macro_rules! only_30 {
    ($($item:item)*) => { $($item)* };
}
/// Items only the other major has.
#[cfg(feature = "enabled")]
macro_rules! only_29 {
    ($($item:item)*) => {};
}

// Implements `api.rs`'s sealed traits, whose methods take gpuspan's own scope types. Loaded once
// per major on purpose (`duplicate_mod`), as is the backend.
#[allow(private_interfaces, clippy::duplicate_mod)]
#[path = "major.rs"]
mod major;
#[cfg(feature = "enabled")]
pub use major::imp::PassThroughGuard;

/// This major as gpuspan names it (the resolver's pending work).
#[cfg(feature = "enabled")]
const NAME: &str = "wgpu 30";

#[cfg(feature = "enabled")]
#[allow(clippy::duplicate_mod)]
#[path = "backend/mod.rs"]
pub(crate) mod backend;

/// The calls whose shape differs between majors, for `major.rs` and the backend.
///
/// `BufferSlice::get_mapped_range`: a `Result` since wgpu 30.
fn mapped_range<'a>(slice: &wgpu::BufferSlice<'a>) -> Result<wgpu::BufferView, String> {
    slice.get_mapped_range().map_err(|e| e.to_string())
}
