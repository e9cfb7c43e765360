#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(nmae = "saxpy")]
fn saxpy() {}

fn main() {}
