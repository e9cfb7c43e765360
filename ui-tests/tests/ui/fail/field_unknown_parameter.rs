#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(fields(nope))]
fn saxpy(n: u32) {}

fn main() {}
