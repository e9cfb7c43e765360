#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu, bytes = "4k")]
fn upload() {}

fn main() {}
