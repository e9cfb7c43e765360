// tracing-attributes 0.1.31's ui case tests/ui/fail/unused_instrumented_fn.rs: dead code is reported at the
// function's name, with instrumentation on and off.
#![deny(dead_code)]

#[gpuspan::gpu_kernel]
fn never_used() {}

fn main() {}
