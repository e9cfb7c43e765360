// tracing-attributes 0.1.31's ui case tests/ui/fail/async_instrument.rs, with #[tracing::instrument]
// replaced: each type error must be at the same user token as tracing's.
#![allow(unreachable_code)]

#[gpuspan::gpu_kernel]
async fn unit() {
    ""
}

#[gpuspan::gpu_kernel]
async fn simple_mismatch() -> String {
    ""
}

#[gpuspan::gpu_kernel]
async fn opaque_unsatisfied() -> impl std::fmt::Display {
    ("",)
}

struct Wrapper<T>(T);

#[gpuspan::gpu_kernel]
async fn mismatch_with_opaque() -> Wrapper<impl std::fmt::Display> {
    ""
}

#[gpuspan::gpu_kernel]
async fn early_return_unit() {
    if true {
        return "";
    }
}

#[gpuspan::gpu_kernel]
async fn early_return() -> String {
    if true {
        return "";
    }
    String::new()
}

#[gpuspan::gpu_kernel]
async fn extra_semicolon() -> i32 {
    1;
}

fn main() {}
