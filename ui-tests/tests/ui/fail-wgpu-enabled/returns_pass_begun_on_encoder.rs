use gpuspan::gpu_kernel;

// The timestamp query is closed in the encoder when the call returns, so the encoder cannot
// still be lent to a pass the function hands back. Off, nothing touches the encoder: this
// compiles (pass-wgpu-off/returns_pass_begun_on_encoder.rs), and docs/attributes.md says why
// it cannot fail there too. Fix: `untimed(encoder)`, or `queue = ..` to bracket the submission.
#[gpu_kernel]
fn begin(encoder: &mut wgpu::CommandEncoder) -> wgpu::ComputePass<'_> {
    encoder.begin_compute_pass(&Default::default())
}

fn main() {}
