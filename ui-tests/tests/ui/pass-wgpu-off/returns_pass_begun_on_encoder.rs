//! With measuring off nothing borrows the encoder at the call's end: a function may return a
//! pass begun on it (with measuring on it must say `untimed(encoder)`; see
//! fail-wgpu-enabled/returns_pass_begun_on_encoder.rs).
use gpuspan::gpu_kernel;

#[gpu_kernel]
fn begin(encoder: &mut wgpu::CommandEncoder) -> wgpu::ComputePass<'_> {
    encoder.begin_compute_pass(&Default::default())
}

fn main() {
    let _ = begin;
}
