//! The timing compiled against wgpu 29 (`backend/`), in the instrumented build (`enabled`),
//! with what it needs of this major beyond `wgpu`: its wgpu-profiler release, its name, and the
//! items of wgpu's backend interface only this major has.

// What the backend reaches through `super::`, as it would in `v29.rs`.
use super::{major, mapped_range, wgpu};
use ::wgpu_profiler_29 as wgpu_profiler;

pub use major::imp::PassThroughGuard;

/// Items of the backend interface (`wgpu::custom`) only this major has: kept here, dropped in
/// the other (`backend/instrument/forward.rs`).
macro_rules! only_29 {
    ($($item:item)*) => { $($item)* };
}
/// Items only the other major has.
macro_rules! only_30 {
    ($($item:item)*) => {};
}

/// This major as gpuspan names it (the resolver's pending work).
const NAME: &str = "wgpu 29";

// Loaded once per major on purpose (`duplicate_mod`).
#[allow(clippy::duplicate_mod)]
#[path = "../backend/mod.rs"]
pub(crate) mod backend;
