#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(level = log::Severity::INFO)]
fn saxpy() {}

fn main() {}
