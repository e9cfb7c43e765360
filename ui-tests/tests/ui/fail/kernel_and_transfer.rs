#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu)]
#[gpuspan::gpu_kernel]
fn upload(data: &[u8]) {}

fn main() {}
