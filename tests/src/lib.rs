//! Helpers shared by gpuspan's integration tests and examples.

#[cfg(feature = "wgpu")]
pub mod gpu;

/// Whether the tests run in CI, where a missing GPU adapter is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// A record's GPU timing; fails the test, naming the site, where there is none.
pub fn gpu_timing(r: &gpuspan::Record) -> &gpuspan::record::GpuTiming {
    r.gpu.as_ref().unwrap_or_else(|| panic!("no GPU timing for {}: {r:?}", r.site.desc.name))
}

/// One test at a time among a file's tests that read process-wide state (records by site, loss
/// counters): each holds the guard of the file's own `static SERIAL: Mutex<()>`.
pub fn serial(lock: &'static std::sync::Mutex<()>) -> std::sync::MutexGuard<'static, ()> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}
