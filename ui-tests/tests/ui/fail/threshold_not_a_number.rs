#![allow(unused_variables)]
use gpuspan::gpu_kernel;

#[gpu_kernel(threshold_us = "fast")]
fn saxpy() {}

fn main() {}
