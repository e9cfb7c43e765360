#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel]
struct Saxpy;

fn main() {}
