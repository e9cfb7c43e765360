//! wgpu 29 (feature `wgpu-29`): `major.rs` and the backend compiled against it, with its
//! wgpu-profiler release. Adding a major is a copy of this file and of `v29/imp.rs`
//! (docs/wgpu.md).

use ::wgpu29 as wgpu;

// Implements `api.rs`'s sealed traits, whose methods take gpuspan's own scope types. Loaded once
// per major on purpose (`duplicate_mod`), as is the backend.
#[allow(private_interfaces, clippy::duplicate_mod)]
#[path = "major.rs"]
mod major;

/// The timing, compiled against this major (`v29/imp.rs`), and the pass guards' trait.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub use imp::*;

/// The calls whose shape differs between majors, for `major.rs` and the backend.
///
/// `BufferSlice::get_mapped_range`: cannot fail in wgpu 29.
fn mapped_range<'a>(slice: &wgpu::BufferSlice<'a>) -> Result<wgpu::BufferView, String> {
    Ok(slice.get_mapped_range())
}
