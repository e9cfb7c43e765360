#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(target = "kernels")]
fn saxpy() {}

fn main() {}
