//! Misuse of the attributes gives one precise error at the bad token, the same with the
//! `enabled` feature on and off (scripts/test runs this suite both ways); correct uses compile.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
    // `queue = ...` names the user's own queue type; with the wgpu backend it must be a wgpu
    // queue (fail-wgpu); without it any expression compiles.
    #[cfg(not(feature = "wgpu"))]
    t.pass("tests/ui/pass-no-wgpu/*.rs");
    // wgpu's own handles, as programs hold them (`Arc<Queue>`, ...): with the backend, on or off.
    #[cfg(feature = "wgpu")]
    t.pass("tests/ui/pass-wgpu/*.rs");
    #[cfg(all(feature = "wgpu", not(feature = "enabled")))]
    t.pass("tests/ui/pass-wgpu-off/*.rs");
    // Only the instrumented code can fail these; docs/attributes.md says why for each. The
    // cases in both fail-off and fail-enabled fail in both modes, with each mode's wording.
    #[cfg(feature = "enabled")]
    t.compile_fail("tests/ui/fail-enabled/*.rs");
    #[cfg(not(feature = "enabled"))]
    t.compile_fail("tests/ui/fail-off/*.rs");
    // wgpu resources of the wrong type: the off arm type-checks them as the instrumented code.
    #[cfg(feature = "wgpu")]
    t.compile_fail("tests/ui/fail-wgpu/*.rs");
    #[cfg(all(feature = "wgpu", feature = "enabled"))]
    t.compile_fail("tests/ui/fail-wgpu-enabled/*.rs");
    // `device = ..` beside a queue: off it is checked as a device, on against the queue's major
    // (the same error, each mode's notes).
    #[cfg(all(feature = "wgpu", not(feature = "enabled")))]
    t.compile_fail("tests/ui/fail-wgpu-off/*.rs");
    // `stream = ...` of a type that is no CUDA stream, with the CUDA backend, on and off.
    #[cfg(feature = "cuda")]
    t.compile_fail("tests/ui/fail-cuda/*.rs");
}
