#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu, bytes = 4, skip(a), skip_all)]
fn upload(a: &[u8]) {}

fn main() {}
