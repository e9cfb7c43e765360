#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(err(Display))]
fn saxpy() -> Result<(), String> { Ok(()) }

fn main() {}
