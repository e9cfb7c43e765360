#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(name = , threshold_us = 5)]
fn saxpy() {}

fn main() {}
