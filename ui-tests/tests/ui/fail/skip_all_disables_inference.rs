#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu, skip_all)]
fn upload(data: &[u8]) {}

fn main() {}
