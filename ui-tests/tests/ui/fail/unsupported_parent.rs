#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(parent = None)]
fn saxpy() {}

fn main() {}
