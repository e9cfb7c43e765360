#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(level = "loud")]
fn saxpy() {}

fn main() {}
