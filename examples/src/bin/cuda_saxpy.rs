//! A CUDA program timed by gpuspan: a saxpy compiled at run time with NVRTC, an sgemm through
//! cuBLAS, and the same upload from pageable and from pinned host memory, so the summary shows
//! what pinning buys. Runs unchanged without a GPU: it says so in one line and exits 0.
//!
//! `cargo run -p gpuspan-examples --no-default-features --features cuda --bin cuda_saxpy`
//! (on the GPU machine put CUDA's library directory on `LD_LIBRARY_PATH` for NVRTC and CUPTI).

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use gpuspan::{gpu_kernel, gpu_transfer};
use std::sync::Arc;

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = a * x[i] + y[i]; }
}
"#;

/// 64 MiB of f32: large enough that the copy, not its launch, dominates.
const N: usize = 16 << 20;
/// Side of the square sgemm.
const M: usize = 2048;

#[gpu_transfer(name = "upload pageable")]
fn upload_pageable(stream: &Arc<CudaStream>, host: &[f32]) -> Result<CudaSlice<f32>, DriverError> {
    stream.clone_htod(host)
}

#[gpu_transfer(name = "upload pinned", bytes = host.len() * 4)]
fn upload_pinned(stream: &Arc<CudaStream>, host: &PinnedHostSlice<f32>) -> Result<CudaSlice<f32>, DriverError> {
    stream.clone_htod(host)
}

#[gpu_transfer(name = "download")]
fn download(stream: &Arc<CudaStream>, dev: &CudaSlice<f32>, host: &mut [f32]) -> Result<(), DriverError> {
    stream.memcpy_dtoh(dev, host)
}

#[gpu_kernel]
fn saxpy(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    a: f32,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
) -> Result<(), DriverError> {
    let n = x.len() as u32;
    let mut launch = stream.launch_builder(f);
    launch.arg(&a).arg(x).arg(y).arg(&n);
    // SAFETY: the kernel reads n floats of x and writes n floats of y, both that long.
    unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }.map(|_| ())
}

#[gpu_kernel]
fn sgemm(stream: &Arc<CudaStream>, blas: &CudaBlas, a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>) {
    let _ = stream;
    let m = M as i32;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m,
        n: m,
        k: m,
        alpha: 1.0f32,
        lda: m,
        ldb: m,
        beta: 0.0f32,
        ldc: m,
    };
    // SAFETY: a, b and c are M×M.
    unsafe { blas.gemm(cfg, a, b, c) }.expect("cuBLAS sgemm");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Err(e) = gpuspan::cuda::probe() {
        println!("cuda_saxpy: no CUDA device found, nothing to run ({e})");
        return Ok(());
    }
    let _guard = gpuspan::init();
    gpuspan::cuda::start();
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SAXPY)?)?;
    let f = module.load_function("saxpy")?;
    let blas = CudaBlas::new(stream.clone())?;

    let host: Vec<f32> = (0..N).map(|i| i as f32).collect();
    // SAFETY: every element is written below before it is read.
    let mut pinned = unsafe { ctx.alloc_pinned::<f32>(N) }?;
    pinned.as_mut_slice()?.copy_from_slice(&host);

    let mut x = upload_pageable(&stream, &host)?;
    for _ in 0..4 {
        x = upload_pageable(&stream, &host)?;
    }
    let mut y = upload_pinned(&stream, &pinned)?;
    for _ in 0..4 {
        y = upload_pinned(&stream, &pinned)?;
    }
    for _ in 0..10 {
        saxpy(&stream, &f, 2.0, &x, &mut y)?;
    }
    let a = stream.clone_htod(&host[..M * M])?;
    let b = stream.clone_htod(&host[..M * M])?;
    let mut c = stream.alloc_zeros::<f32>(M * M)?;
    for _ in 0..5 {
        sgemm(&stream, &blas, &a, &b, &mut c);
    }
    let mut back = vec![0f32; N];
    download(&stream, &y, &mut back)?;
    stream.synchronize()?;
    // y = x + 10 × 2x for x = i.
    assert_eq!(back[3], 63.0, "saxpy result");

    gpuspan::flush();
    let s = gpuspan::summary();
    // A bandwidth exists only for exact copy times (CUPTI); CUDA events give bounds.
    let bw = |name: &str| {
        s.site(name)
            .and_then(|r| r.bandwidth_bytes_per_s())
            .map_or_else(|| "no bandwidth (its times are bounds)".to_owned(), |b| format!("{:.1} GB/s", b / 1e9))
    };
    println!(
        "cuda_saxpy on {}: pageable upload {}, pinned upload {} ({:?} timing)",
        ctx.name()?,
        bw("upload pageable"),
        bw("upload pinned"),
        gpuspan::cuda::start()
    );
    Ok(())
}
