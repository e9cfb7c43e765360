#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(bytes = 64)]
fn saxpy() {}

fn main() {}
