#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(skip_all = true)]
fn saxpy() {}

fn main() {}
