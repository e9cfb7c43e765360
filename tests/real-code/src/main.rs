//! A program annotated the way its author would: `main` itself, a loop body timed with the
//! block form, and async work spawned on a multi-thread tokio runtime.

use gpuspan_real_code::{upload, Compute, Model};
use std::sync::Arc;

#[gpuspan::gpu_kernel]
fn main() -> anyhow::Result<()> {
    let _guard = gpuspan::init();
    let compute = Arc::new(Compute::new(1 << 14)?);
    upload(compute.queue(), compute.buffer(), &vec![1.0; 1 << 14]);
    for frame in 0..3 {
        gpuspan::kernel!("frame", queue = compute.queue(), {
            compute.step(1 + frame % 2)?;
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let spawned = {
            let compute = compute.clone();
            tokio::spawn(async move { compute.step_async(2).await })
        };
        let model: Arc<dyn Model> = compute.clone();
        let forward = tokio::spawn(async move { model.forward(1).await });
        spawned.await??;
        forward.await??;
        anyhow::Ok(())
    })?;
    if !gpuspan::flush() {
        eprintln!("some GPU timings were still pending at exit");
    }
    Ok(())
}
