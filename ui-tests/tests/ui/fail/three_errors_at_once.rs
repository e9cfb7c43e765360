#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(nmae = "upload", direction = cpu_to_gpu, bytes = -1, fields(n, n))]
fn upload(n: usize) {}

fn main() {}
