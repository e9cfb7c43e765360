#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(untimed(queue))]
fn draw(n: u32) {}

fn main() {}
