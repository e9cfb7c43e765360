#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu, bytes = 4, skip(a, b, a))]
fn upload(a: &[u8], b: &[u8]) {}

fn main() {}
