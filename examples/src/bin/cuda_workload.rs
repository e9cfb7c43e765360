//! A realistic CUDA loop for the wall-time overhead row of docs/benchmarks.md: each iteration
//! uploads 16 MiB from pinned memory, runs three ~200 µs kernels, downloads 16 MiB, and waits.
//! Run it twice, `GPUSPAN=off` (no CUPTI, no scopes) and on, and compare the time per iteration.
//!
//! `cuda_workload [iterations] [cupti-only]` (default 200). `cupti-only` starts CUPTI as gpuspan
//! configures it, then turns scopes off: what CUPTI alone costs.

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg};
use gpuspan::{gpu_kernel, gpu_transfer};
use std::sync::Arc;
use std::time::Instant;

const SPIN: &str = r#"
extern "C" __global__ void spin(long long cycles, float *x) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    if (threadIdx.x == 0 && blockIdx.x == 0) { x[0] += 1.0f; }
}
"#;

const N: usize = 4 << 20; // 16 MiB of f32

#[gpu_transfer(name = "workload upload", bytes = N * 4)]
fn upload(
    stream: &Arc<CudaStream>,
    host: &cudarc::driver::PinnedHostSlice<f32>,
    dev: &mut CudaSlice<f32>,
) -> Result<(), DriverError> {
    stream.memcpy_htod(host, dev)
}

#[gpu_kernel(name = "workload spin")]
fn spin(stream: &Arc<CudaStream>, f: &CudaFunction, dev: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    let cycles: i64 = 400_000; // ~200 µs at ~2 GHz
    let mut b = stream.launch_builder(f);
    b.arg(&cycles).arg(dev);
    // SAFETY: the kernel writes dev[0] only.
    unsafe { b.launch(LaunchConfig { grid_dim: (132, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 }) }.map(|_| ())
}

#[gpu_transfer(name = "workload download", bytes = N * 4)]
fn download(
    stream: &Arc<CudaStream>,
    dev: &CudaSlice<f32>,
    host: &mut cudarc::driver::PinnedHostSlice<f32>,
) -> Result<(), DriverError> {
    stream.memcpy_dtoh(dev, host)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(200);
    if let Err(e) = gpuspan::cuda::probe() {
        println!("cuda_workload: no CUDA device found ({e})");
        return Ok(());
    }
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    let cupti_only = std::env::args().nth(2).as_deref() == Some("cupti-only");
    if cupti_only {
        gpuspan::cuda::start();
        gpuspan::set_enabled(false);
    }
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let f = ctx.load_module(cudarc::nvrtc::compile_ptx(SPIN)?)?.load_function("spin")?;
    // SAFETY: written before it is read.
    let mut up = unsafe { ctx.alloc_pinned::<f32>(N) }?;
    up.as_mut_slice()?.fill(1.0);
    // SAFETY: written by the download before it is read.
    let mut down = unsafe { ctx.alloc_pinned::<f32>(N) }?;
    let mut dev = stream.alloc_zeros::<f32>(N)?;
    let mut iteration = || -> Result<(), DriverError> {
        upload(&stream, &up, &mut dev)?;
        for _ in 0..3 {
            spin(&stream, &f, &mut dev)?;
        }
        download(&stream, &dev, &mut down)?;
        stream.synchronize()
    };
    for _ in 0..10 {
        iteration()?; // warm-up
    }
    let t = Instant::now();
    for _ in 0..iterations {
        iteration()?;
    }
    let per = t.elapsed().as_secs_f64() * 1e3 / iterations as f64;
    let mode = if cupti_only {
        "off, CUPTI on"
    } else if std::env::var("GPUSPAN").is_ok_and(|v| v == "off") {
        "off"
    } else {
        "on"
    };
    println!("gpuspan {mode}: {per:.4} ms per iteration over {iterations}");
    drop(guard);
    Ok(())
}
