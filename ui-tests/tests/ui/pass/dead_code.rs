//! An unused annotated function is still reported as dead code, with instrumentation on or off
//! (the body keeps its own braces, as tracing-attributes does since tokio-rs/tracing#3108).
#![deny(warnings)]
use gpuspan::{gpu_kernel, gpu_transfer};

#[expect(dead_code)]
#[gpu_kernel]
fn never_called() {}

#[expect(dead_code)]
#[gpu_kernel(skip_all)]
async fn never_awaited(n: u32) -> u32 {
    n
}

#[expect(dead_code)]
#[gpu_transfer(direction = cpu_to_gpu)]
fn never_copied(data: &[u8]) -> usize {
    data.len()
}

fn main() {}
