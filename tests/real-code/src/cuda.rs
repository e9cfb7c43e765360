//! The CUDA half, written as cudarc users write it: the context in a struct field, a stream
//! created inside each function, kernels compiled at start-up, cudarc's errors through
//! `anyhow`, async work spawned on tokio. The attributes carry no arguments: gpuspan finds the
//! CUDA work of each call on its own.

use anyhow::{ensure, Context as _};
use async_trait::async_trait;
use cudarc::driver::{CudaContext, CudaFunction, LaunchConfig, PushKernelArg};
use gpuspan::{gpu_kernel, gpu_transfer};
use std::sync::Arc;
use std::time::Duration;

const SRC: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = a * x[i] + y[i]; }
}
"#;

/// `y = a·x + y` on the first CUDA device.
#[derive(Debug)]
pub struct Saxpy {
    ctx: Arc<CudaContext>,
    saxpy: CudaFunction,
}

impl Saxpy {
    /// The first device, with the kernel compiled by NVRTC.
    pub fn new() -> anyhow::Result<Self> {
        let ctx = CudaContext::new(0).context("no CUDA device")?;
        // This library's functions are annotated without arguments (their streams are made in
        // the body), so gpuspan is told here that the program uses CUDA: its timing starts now,
        // before the first call, instead of at the first call that shows a stream.
        gpuspan::cuda::start();
        let ptx = cudarc::nvrtc::compile_ptx(SRC).context("NVRTC")?;
        let saxpy = ctx.load_module(ptx)?.load_function("saxpy")?;
        Ok(Saxpy { ctx, saxpy })
    }

    /// Uploads `x` and `y`, runs `iters` saxpy kernels and reads `y` back, all on a stream made
    /// here. A bare attribute: the kernels and copies are found by CUPTI.
    #[gpu_kernel]
    pub fn run(&self, a: f32, x: &[f32], y: &[f32], iters: u32) -> anyhow::Result<Vec<f32>> {
        ensure!(x.len() == y.len(), "x has {} elements, y {}", x.len(), y.len());
        let stream = self.ctx.new_stream()?;
        // Also times the call with CUDA events when CUPTI is unavailable.
        gpuspan::cuda::attach(&stream);
        let n = u32::try_from(x.len())?;
        let dx = stream.clone_htod(x)?;
        let mut dy = stream.clone_htod(y)?;
        for _ in 0..iters {
            let mut launch = stream.launch_builder(&self.saxpy);
            launch.arg(&a).arg(&dx).arg(&mut dy).arg(&n);
            // SAFETY: the kernel reads n floats of x and writes n floats of y, both n long.
            unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }?;
        }
        Ok(stream.clone_dtoh(&dy)?)
    }

    /// Copies `data` to the device and back on a stream made here.
    #[gpu_transfer(direction = cpu_to_gpu, bytes = 4 * data.len())]
    pub fn round_trip(&self, data: &[f32]) -> anyhow::Result<Vec<f32>> {
        let stream = self.ctx.new_stream()?;
        let on_device = stream.clone_htod(data)?;
        Ok(stream.clone_dtoh(&on_device)?)
    }

    /// Async, spawned on tokio: launches before and after an `.await`, on whichever worker
    /// thread polls it.
    #[gpu_kernel]
    pub async fn run_async(&self, a: f32, n: u32) -> anyhow::Result<()> {
        let stream = self.ctx.new_stream()?;
        let dx = stream.clone_htod(&vec![1.0f32; n as usize])?;
        let mut dy = stream.alloc_zeros::<f32>(n as usize)?;
        for round in 0..2 {
            if round == 1 {
                tokio::task::yield_now().await;
            }
            let mut launch = stream.launch_builder(&self.saxpy);
            launch.arg(&a).arg(&dx).arg(&mut dy).arg(&n);
            // SAFETY: as in `run`.
            unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }?;
        }
        stream.synchronize()?;
        Ok(())
    }
}

/// A model behind a trait object, as inference servers write them.
#[async_trait]
pub trait Infer: Send + Sync {
    async fn infer(&self, n: u32) -> anyhow::Result<f32>;
}

#[async_trait]
impl Infer for Saxpy {
    /// Waits 20 ms on the host (a batch filling up), then runs on a stream of its own.
    #[gpu_kernel(name = "infer")]
    async fn infer(&self, n: u32) -> anyhow::Result<f32> {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let stream = self.ctx.new_stream()?;
        let dx = stream.clone_htod(&vec![1.0f32; n as usize])?;
        let mut dy = stream.clone_htod(&vec![0.5f32; n as usize])?;
        let a = 2.0f32;
        let mut launch = stream.launch_builder(&self.saxpy);
        launch.arg(&a).arg(&dx).arg(&mut dy).arg(&n);
        // SAFETY: as in `run`.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }?;
        let y = stream.clone_dtoh(&dy)?;
        Ok(y[0])
    }
}
