#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel]
extern "C" {
    fn saxpy();
}

fn main() {}
