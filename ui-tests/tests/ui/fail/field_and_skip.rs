#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(fields(n), skip(n))]
fn saxpy(n: u32) {}

fn main() {}
