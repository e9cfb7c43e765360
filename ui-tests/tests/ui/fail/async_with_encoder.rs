#![allow(unused_variables)]
use gpuspan::gpu_kernel;

struct CommandEncoder;

#[gpu_kernel]
async fn encode(encoder: &mut CommandEncoder) {}

fn main() {}
