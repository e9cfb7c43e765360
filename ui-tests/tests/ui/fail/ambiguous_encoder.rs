#![allow(unused_variables)]
use gpuspan::gpu_kernel;

struct CommandEncoder;

#[gpu_kernel]
fn encode(first: &mut CommandEncoder, second: &mut CommandEncoder) {}

fn main() {}
