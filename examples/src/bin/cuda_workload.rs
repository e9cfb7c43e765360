//! A realistic CUDA loop for the wall-time overhead row of docs/benchmarks.md: each iteration
//! uploads 16 MiB from pinned memory, runs three ~200 µs kernels, downloads 16 MiB, and waits.
//!
//! One process, in batches of iterations: first `bare` (gpuspan off, CUPTI never started),
//! then CUPTI is started as gpuspan configures it and batches alternate between `cupti-only`
//! (scopes off) and `on` (every call annotated). The lent machines differ by more than the
//! effect from one process to the next, so the comparison stays inside one.
//!
//! `cuda_workload [iterations per batch] [rounds]` (default 100, 9): prints the median time
//! per iteration of each mode and the ratios.

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
    let per_batch: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(100);
    let rounds: usize = std::env::args().nth(2).and_then(|n| n.parse().ok()).unwrap_or(9);
    if let Err(e) = gpuspan::cuda::probe() {
        println!("cuda_workload: no CUDA device found ({e})");
        return Ok(());
    }
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    gpuspan::set_enabled(false);
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let f = ctx.load_module(cudarc::nvrtc::compile_ptx(SPIN)?)?.load_function("spin")?;
    // SAFETY: written before it is read.
    let mut up = unsafe { ctx.alloc_pinned::<f32>(N) }?;
    up.as_mut_slice()?.fill(1.0);
    // SAFETY: written by the download before it is read.
    let mut down = unsafe { ctx.alloc_pinned::<f32>(N) }?;
    let mut dev = stream.alloc_zeros::<f32>(N)?;
    // Milliseconds per iteration over one batch.
    let mut batch = |n: usize| -> Result<f64, DriverError> {
        let t = Instant::now();
        for _ in 0..n {
            upload(&stream, &up, &mut dev)?;
            for _ in 0..3 {
                spin(&stream, &f, &mut dev)?;
            }
            download(&stream, &dev, &mut down)?;
            stream.synchronize()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / n as f64)
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    batch(10)?; // warm-up
    let bare = median((0..rounds).map(|_| batch(per_batch)).collect::<Result<_, _>>()?);
    println!("timing: {:?}", gpuspan::cuda::start());
    let (mut cupti_only, mut on) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for scopes in [round % 2 == 0, round % 2 == 1] {
            gpuspan::set_enabled(scopes);
            let t = batch(per_batch)?;
            if scopes {
                on.push(t)
            } else {
                cupti_only.push(t)
            }
        }
    }
    gpuspan::set_enabled(true);
    let (cupti_only, on) = (median(cupti_only), median(on));
    let pct = |x: f64, base: f64| 100.0 * (x - base) / base;
    println!(
        "bare {bare:.4} ms, cupti-only {cupti_only:.4} ms ({:+.2} %), on {on:.4} ms ({:+.2} % over bare, {:+.2} % over \
         cupti-only) per iteration; medians of {rounds} batches of {per_batch}",
        pct(cupti_only, bare),
        pct(on, bare),
        pct(on, cupti_only)
    );
    drop(guard);
    Ok(())
}
