//! A function that hands back a pass begun on its encoder: the pass still borrows the encoder
//! when the call returns, so the encoder does not time the call (as if `untimed(encoder)`) and
//! the call is host-timed; the same program compiles with measuring on and off (issue 42). With
//! a queue beside it, the queue brackets the call instead.
#![deny(warnings)]
use gpuspan::gpu_kernel;

#[gpu_kernel]
fn begin(encoder: &mut wgpu::CommandEncoder) -> wgpu::ComputePass<'_> {
    encoder.begin_compute_pass(&Default::default())
}

#[gpu_kernel]
fn begin_render<'e>(
    encoder: &'e mut wgpu::CommandEncoder,
    desc: &wgpu::RenderPassDescriptor<'_>,
) -> Option<wgpu::RenderPass<'e>> {
    Some(encoder.begin_render_pass(desc))
}

#[gpu_kernel]
fn begin_with_queue<'e>(queue: &wgpu::Queue, encoder: &'e mut wgpu::CommandEncoder) -> wgpu::ComputePass<'e> {
    let _ = queue;
    encoder.begin_compute_pass(&Default::default())
}

fn main() {
    let _ = (begin, begin_render, begin_with_queue);
}
