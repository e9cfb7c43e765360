#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(backend = metal)]
fn encode() {}

fn main() {}
