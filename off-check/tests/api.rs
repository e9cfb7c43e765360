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

/// Each public item is defined once, its off body beside the instrumented one (docs/architecture.md,
/// "The off build"): no module is swapped for a no-op twin under `runtime/src/off/`, where the
/// twins drifted from the real API.
#[test]
fn no_module_is_swapped_for_an_off_twin() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/src");
    let twins: Vec<String> = match std::fs::read_dir(src.join("off")) {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(_) => Vec::new(),
    };
    assert!(twins.is_empty(), "off/ twins of the public API: {twins:?}");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("runtime/src/lib.rs");
    let swapped: Vec<&str> = lib.lines().filter(|line| line.contains("\"off/")).collect();
    assert!(swapped.is_empty(), "modules swapped for off/ twins in lib.rs: {swapped:?}");
    assert!(!lib.lines().any(|line| line.trim() == "mod off;"), "lib.rs declares the off/ module");
}
