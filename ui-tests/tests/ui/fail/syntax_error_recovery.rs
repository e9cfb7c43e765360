#![allow(unused_variables)]
use gpuspan::gpu_transfer;

#[gpu_transfer(direction = 5, bytes = n *, threshold_us = 50 us)]
fn upload(n: usize) {}

fn main() {}
