#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel]
#[gpu_kernel(name = "again")]
fn saxpy() {}

fn main() {}
