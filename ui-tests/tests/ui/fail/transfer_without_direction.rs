#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer]
fn upload(data: &[u8]) {}

fn main() {}
