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
    // Type errors in the user's expressions exist only where the instrumented code is compiled:
    // with the feature off the function is left as written and these compile.
    // wgpu's own handles, as programs hold them (`Arc<Queue>`, ...): with the backend, on or off.
    #[cfg(feature = "wgpu")]
    t.pass("tests/ui/pass-wgpu/*.rs");
    #[cfg(feature = "enabled")]
    t.compile_fail("tests/ui/fail-enabled/*.rs");
    #[cfg(all(feature = "wgpu", feature = "enabled"))]
    t.compile_fail("tests/ui/fail-wgpu/*.rs");
    // `stream = ...` of a type that is no CUDA stream, with the CUDA backend.
    #[cfg(all(feature = "cuda", feature = "enabled"))]
    t.compile_fail("tests/ui/fail-cuda/*.rs");
}
