// `#[tracing::instrument]` beside `#[gpu_kernel]`, in both orders: one error at the gpuspan
// attribute each time, never a silent choice of which span gets the GPU time.
use gpuspan::gpu_kernel;
use tracing::instrument;

#[instrument]
#[gpu_kernel]
fn above() {}

#[gpu_kernel]
#[instrument]
fn below() {}

fn main() {
    above();
    below();
}
