#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(fields(n, scaled = n * 2, n = 3))]
fn saxpy(n: u32) {}

fn main() {}
