#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(skip = n)]
fn saxpy(n: u32) {}

fn main() {}
