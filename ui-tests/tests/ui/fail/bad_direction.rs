#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = up)]
fn upload(data: &[f32]) {}

fn main() {}
