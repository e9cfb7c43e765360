#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(name = "a", threshold_us = 5, name = "b")]
fn saxpy() {}

fn main() {}
