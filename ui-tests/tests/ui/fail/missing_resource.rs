#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(backend = wgpu)]
fn encode(n: u32) {}

fn main() {}
