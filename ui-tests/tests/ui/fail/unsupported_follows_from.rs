#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(follows_from = [id])]
fn saxpy(id: u64) {}

fn main() {}
