#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(level = 7)]
fn saxpy() {}

fn main() {}
