// A second gpuspan attribute under another name: the later one cannot see the earlier by name,
// only by the marker its expansion left.
use gpuspan::gpu_kernel;
use gpuspan::gpu_kernel as timed;

#[gpu_kernel]
#[timed]
fn step() {}

#[timed]
#[gpu_kernel]
fn other_step() {}

fn main() {
    step();
    other_step();
}
