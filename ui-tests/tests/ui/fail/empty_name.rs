#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(name = "")]
fn saxpy() {}

fn main() {}
