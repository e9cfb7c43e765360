#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu)]
fn upload(n: usize) {}

fn main() {}
