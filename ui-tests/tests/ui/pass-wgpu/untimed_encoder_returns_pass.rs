//! `untimed(encoder)`: the encoder does not time the call (here it cannot, the pass outlives
//! it), so the call is host-timed and may return a pass begun on it, on and off.
#![deny(warnings)]
use gpuspan::gpu_kernel;

#[gpu_kernel(untimed(encoder), skip_all)]
fn begin(encoder: &mut wgpu::CommandEncoder) -> wgpu::ComputePass<'_> {
    encoder.begin_compute_pass(&Default::default())
}

fn main() {
    let _ = begin;
}
