//! Helpers shared by gpuspan's integration tests and examples.

#[cfg(feature = "wgpu-suite")]
pub mod gpu;

// The wgpu the suite runs on: the newest major whose feature is on. Test files
// `use gpuspan_tests::wgpu;` instead of naming a major.
#[cfg(all(feature = "wgpu-29", not(feature = "wgpu-30")))]
pub use wgpu29 as wgpu;
#[cfg(feature = "wgpu-30")]
pub use wgpu30 as wgpu;
// gpuspan-testing's items for that major.
#[cfg(all(feature = "wgpu-29", not(feature = "wgpu-30")))]
use gpuspan_testing::wgpu29 as wgpu_testing;
#[cfg(feature = "wgpu-30")]
use gpuspan_testing::wgpu30 as wgpu_testing;

/// The bytes of a mapped slice: `get_mapped_range` returns a `Result` since wgpu 30.
#[cfg(feature = "wgpu-suite")]
pub fn mapped<'a>(slice: &wgpu::BufferSlice<'a>) -> wgpu::BufferView {
    #[cfg(feature = "wgpu-30")]
    return slice.get_mapped_range().expect("mapped");
    #[cfg(not(feature = "wgpu-30"))]
    return slice.get_mapped_range();
}

/// Whether the tests run in CI, where a missing GPU adapter is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// A record's GPU timing; fails the test, naming the site, where there is none.
pub fn gpu_timing(r: &gpuspan_testing::Record) -> &gpuspan_testing::record::GpuTiming {
    r.gpu.as_ref().unwrap_or_else(|| panic!("no GPU timing for {}: {r:?}", r.site.desc.name))
}

/// The name the test harness gives `test`, a test function of the module whose `module_path!()`
/// is `module_path`: that path without the test binary's own name (each test binary is one crate
/// with a module per subject, docs/decisions.md 77). For running one test again in a child process
/// with `--exact`.
pub fn test_path(module_path: &str, test: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_owned(),
    }
}
