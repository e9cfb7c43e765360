#![allow(unused_variables)]
use gpuspan::gpu_kernel;

trait Kernel {
    #[gpu_kernel]
    fn run(&self);
}

fn main() {}
