#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(ret)]
fn saxpy() -> u32 { 1 }

fn main() {}
