#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(encoder = *enc, stream = s)]
fn mixed(enc: &mut u32, s: &u32) {}

fn main() {}
