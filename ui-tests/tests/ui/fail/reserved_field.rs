#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(fields(error = 1))]
fn saxpy() {}

fn main() {}
