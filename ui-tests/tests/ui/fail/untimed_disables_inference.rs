#![allow(unused_variables)]
use gpuspan::gpu_transfer;

// `untimed` keeps the slice out of size inference (`skip`/`skip_all` do not: they only say
// what is recorded).
#[gpu_transfer(direction = cpu_to_gpu, untimed(data))]
fn upload(data: &[u8]) {}

fn main() {}
