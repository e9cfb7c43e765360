//! Host cost of launching a tiny kernel, in three modes run as separate processes on the same
//! machine (CUPTI, once on, stays on for the process):
//!
//! - `bare`: no gpuspan at run time (`GPUSPAN=off`, CUPTI never loaded): the baseline;
//! - `cupti`: CUPTI activity on as gpuspan sets it up (kernels, copies, API and external
//!   correlation records), launches not annotated;
//! - `gpuspan`: the same launches through a `#[gpu_kernel]` function.
//!
//! `cuda_overhead <bare|cupti|gpuspan> [launches]` prints ns per launch (median of 5 batches).
//! docs/benchmarks.md records the runs; the PyTorch comparison is scripts/torch_overhead.py.

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg};
use std::sync::Arc;
use std::time::Instant;

const TINY: &str = r#"
extern "C" __global__ void tiny(float *x) { if (threadIdx.x == 0) { x[blockIdx.x] += 1.0f; } }
"#;

fn launch(stream: &Arc<CudaStream>, f: &CudaFunction, x: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    let mut b = stream.launch_builder(f);
    b.arg(x);
    // SAFETY: one block of 32 threads writes x[0], which exists.
    unsafe { b.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }.map(|_| ())
}

#[gpuspan::gpu_kernel(name = "tiny")]
fn tiny(stream: &Arc<CudaStream>, f: &CudaFunction, x: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    launch(stream, f, x)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "gpuspan".into());
    let launches: usize = std::env::args().nth(2).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    if let Err(e) = gpuspan::cuda::probe() {
        println!("cuda_overhead: no CUDA device found ({e})");
        return Ok(());
    }
    let guard = match mode.as_str() {
        "bare" => {
            gpuspan::set_enabled(false);
            None
        }
        "cupti" | "gpuspan" => {
            let g = gpuspan::Config::from_env().summary(false).no_trace_file().init();
            println!("timing: {:?}", gpuspan::cuda::start());
            Some(g)
        }
        other => return Err(format!("unknown mode {other:?}: bare, cupti or gpuspan").into()),
    };
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(TINY)?)?;
    let f = module.load_function("tiny")?;
    let mut x = stream.alloc_zeros::<f32>(1)?;
    let run = |x: &mut CudaSlice<f32>, n: usize| -> Result<f64, DriverError> {
        let t = Instant::now();
        for _ in 0..n {
            if mode == "gpuspan" {
                tiny(&stream, &f, x)?;
            } else {
                launch(&stream, &f, x)?;
            }
        }
        let per = t.elapsed().as_nanos() as f64 / n as f64;
        stream.synchronize()?;
        Ok(per)
    };
    run(&mut x, 2_000)?; // warm-up
    let mut batches = (0..5).map(|_| run(&mut x, launches)).collect::<Result<Vec<f64>, _>>()?;
    batches.sort_by(f64::total_cmp);
    println!("{mode}: {:.0} ns per launch (median of 5 × {launches}; batches {batches:.0?})", batches[2]);
    drop(guard);
    Ok(())
}
