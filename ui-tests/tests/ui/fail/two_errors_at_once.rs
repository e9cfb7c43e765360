#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(backend = metal, level = "loud")]
fn saxpy() {}

fn main() {}
