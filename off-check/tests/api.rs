//! The whole public API compiles and does nothing with gpuspan's `enabled` feature off
//! (`src/api.rs`; the backends' part with `--features backends`).

#[test]
fn the_core_api_exists_and_does_nothing() {
    gpuspan_off_check::api::call_core();
}

#[test]
fn the_test_api_exists_and_does_nothing() {
    gpuspan_off_check::api::call_testing();
}

#[cfg(feature = "backends")]
#[test]
fn the_backend_api_exists_and_does_nothing() {
    gpuspan_off_check::api::call_cuda();
    gpuspan_off_check::api::call_otlp();
    gpuspan_off_check::api::call_monitor();
    // Compiled, not run: it needs a wgpu device.
    let _ = gpuspan_off_check::api::call_wgpu;
    let _ = gpuspan_off_check::api::on_wgpu29::call_wgpu;
}
