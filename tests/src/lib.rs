//! Helpers shared by gpuspan's integration tests and examples.

#[cfg(feature = "wgpu")]
pub mod gpu;

/// Whether the tests run in CI, where a missing GPU adapter is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}
