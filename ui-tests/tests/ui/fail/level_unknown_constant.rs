#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(level = tracing::Level::LOUD)]
fn saxpy() {}

fn main() {}
