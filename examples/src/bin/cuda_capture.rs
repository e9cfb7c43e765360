//! Captures real CUPTI traffic for gpuspan's fixtures: run on a GPU machine with
//! `GPUSPAN_CUPTI_DUMP=<file>`; the file holds every buffer CUPTI returned, the kernel names,
//! and when scopes ended, for `tests/tests/cuda/cuda_fixtures.rs` to replay without a GPU.
//!
//! The scenario covers what parsing and attribution must get right: a C++ (mangled) and an
//! `extern "C"` kernel, nested scopes, pageable/pinned/device copies both ways, a memset, a cuBLAS
//! sgemm, a kernel outside every scope, a long kernel still running while a short one on
//! another stream finishes, and an async scope polled twice with a synchronous scope inside a
//! poll (external ids beside windows). It prints every record it got, one line each.

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg};
use gpuspan::{gpu_kernel, gpu_transfer};
use gpuspan_testing::record::ActivityKind;
use gpuspan_testing::Capture;
use std::sync::Arc;

const SRC: &str = r#"
extern "C" __global__ void spin(unsigned long long cycles) {
    unsigned long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
extern "C" __global__ void tag() { }
__global__ void scale(float *x, float k, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] *= k; }
}
"#;

fn launch_spin(stream: &CudaStream, f: &CudaFunction, cycles: u64) -> Result<(), DriverError> {
    let mut l = stream.launch_builder(f);
    l.arg(&cycles);
    // SAFETY: the kernel takes one u64 and touches no memory.
    unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }) }.map(|_| ())
}

fn launch_tag(stream: &CudaStream, f: &CudaFunction, grid: (u32, u32, u32)) -> Result<(), DriverError> {
    // SAFETY: an empty kernel without parameters.
    unsafe {
        stream.launch_builder(f).launch(LaunchConfig { grid_dim: grid, block_dim: (32, 1, 1), shared_mem_bytes: 0 })
    }
    .map(|_| ())
}

#[gpu_kernel]
fn spin(stream: &Arc<CudaStream>, f: &CudaFunction, cycles: u64) -> Result<(), DriverError> {
    launch_spin(stream, f, cycles)
}

#[gpu_kernel]
fn scale(stream: &Arc<CudaStream>, f: &CudaFunction, x: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    let n = x.len() as u32;
    let mut l = stream.launch_builder(f);
    l.arg(x).arg(&2.0f32).arg(&n);
    // SAFETY: n floats of x.
    unsafe { l.launch(LaunchConfig::for_num_elems(n)) }.map(|_| ())
}

#[gpu_kernel]
fn inner(stream: &Arc<CudaStream>, tag: &CudaFunction) -> Result<(), DriverError> {
    launch_tag(stream, tag, (2, 1, 1))
}

#[gpu_kernel]
fn outer(stream: &Arc<CudaStream>, tag: &CudaFunction) -> Result<(), DriverError> {
    launch_tag(stream, tag, (1, 1, 1))?;
    inner(stream, tag)?;
    launch_tag(stream, tag, (3, 1, 1))
}

/// Pending once, then ready: a second poll.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

#[gpu_kernel]
fn in_poll_sync(stream: &Arc<CudaStream>, tag: &CudaFunction) -> Result<(), DriverError> {
    launch_tag(stream, tag, (4, 3, 1))
}

#[gpu_kernel]
async fn in_polls(stream: &Arc<CudaStream>, tag: &CudaFunction) -> Result<(), DriverError> {
    launch_tag(stream, tag, (4, 1, 1))?;
    YieldOnce(false).await;
    in_poll_sync(stream, tag)?;
    launch_tag(stream, tag, (4, 2, 1))
}

#[gpu_transfer]
fn up_pageable(stream: &Arc<CudaStream>, host: &[f32]) -> Result<CudaSlice<f32>, DriverError> {
    stream.clone_htod(host)
}

#[gpu_transfer(bytes = host.len() * 4)]
fn up_pinned(
    stream: &Arc<CudaStream>,
    host: &cudarc::driver::PinnedHostSlice<f32>,
) -> Result<CudaSlice<f32>, DriverError> {
    stream.clone_htod(host)
}

#[gpu_transfer]
fn down(stream: &Arc<CudaStream>, dev: &CudaSlice<f32>, host: &mut [f32]) -> Result<(), DriverError> {
    stream.memcpy_dtoh(dev, host)
}

#[gpu_transfer]
fn d2d(stream: &Arc<CudaStream>, src: &CudaSlice<f32>, dst: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    stream.memcpy_dtod(src, dst)
}

#[gpu_kernel]
fn zero(stream: &Arc<CudaStream>, x: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    stream.memset_zeros(x)
}

#[gpu_kernel]
fn sgemm(stream: &Arc<CudaStream>, blas: &CudaBlas, a: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: i32) {
    let _ = stream;
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
    // SAFETY: a and c are m×m.
    unsafe { blas.gemm(cfg, a, a, c) }.expect("cuBLAS sgemm");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Err(e) = gpuspan::cuda::probe() {
        println!("cuda_capture: no CUDA device found, nothing to capture ({e})");
        return Ok(());
    }
    let timing = gpuspan::cuda::start();
    println!("timing: {timing:?}");
    let capture = Capture::start_all_threads();
    let ctx = CudaContext::new(0)?;
    let s1 = ctx.new_stream()?;
    let s2 = ctx.new_stream()?;
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SRC)?)?;
    let f_spin = module.load_function("spin")?;
    let f_tag = module.load_function("tag")?;
    let f_scale = module.load_function("_Z5scalePffj")?;
    let blas = CudaBlas::new(s1.clone())?;
    let note = |t: &str| gpuspan_testing::cuda::dump_note(t);

    note("spin 1M cycles in scope `spin`");
    spin(&s1, &f_spin, 1 << 20)?;
    note("nested: outer tag(1) inner tag(2) outer tag(3)");
    outer(&s1, &f_tag)?;
    let host: Vec<f32> = (0..(256 << 10)).map(|i| i as f32).collect();
    // SAFETY: filled below before use.
    let mut pinned = unsafe { ctx.alloc_pinned::<f32>(host.len()) }?;
    pinned.as_mut_slice()?.copy_from_slice(&host);
    note("1 MiB uploads: pageable, pinned; download; device to device; memset");
    let mut x = up_pageable(&s1, &host)?;
    let y = up_pinned(&s1, &pinned)?;
    let mut back = vec![0f32; host.len()];
    down(&s1, &x, &mut back)?;
    d2d(&s1, &y, &mut x)?;
    zero(&s1, &mut x)?;
    note("mangled kernel `scale`");
    scale(&s1, &f_scale, &mut x)?;
    note("cuBLAS sgemm 256");
    let a = s1.clone_htod(&host[..256 * 256])?;
    let mut c = s1.alloc_zeros::<f32>(256 * 256)?;
    sgemm(&s1, &blas, &a, &mut c, 256);
    note("tag(7,7) outside every scope");
    launch_tag(&s1, &f_tag, (7, 7, 1))?;
    s1.synchronize()?;
    note("long spin (~200 ms) on s1 in scope `spin`, then tag(5) in `inner` on s2 while it runs");
    spin(&s1, &f_spin, 400_000_000)?;
    inner(&s2, &f_tag)?;
    s2.synchronize()?;
    note("s2 synchronized; long spin still running");
    std::thread::sleep(std::time::Duration::from_millis(50));
    note("50 ms later");
    s1.synchronize()?;
    note("s1 synchronized");
    note("async `in_polls`: tag(4,1) | await | `in_poll_sync` tag(4,3) tag(4,2)");
    let mut fut = std::pin::pin!(in_polls(&s1, &f_tag));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    while std::future::Future::poll(fut.as_mut(), &mut cx).is_pending() {}
    s1.synchronize()?;
    let flushed = gpuspan::flush();
    note("flushed");
    for r in capture.records() {
        let acts: Vec<String> = r
            .activities
            .iter()
            .map(|a| match &a.kind {
                ActivityKind::Kernel(g) => {
                    format!("{} grid={:?} block={:?} regs={}", a.name, g.grid, g.block, g.registers_per_thread)
                }
                ActivityKind::Copy { bytes, src, dst, .. } => {
                    format!("{} {bytes} B {}->{}", a.name, src.as_str(), dst.as_str())
                }
                ActivityKind::Set { bytes } => format!("memset {bytes} B"),
            })
            .collect();
        println!(
            "record {:<14} scope={:#x} source={} busy={}ns bytes={:?} activities=[{}]",
            r.site.desc.name,
            r.scope_id,
            r.source().as_str(),
            r.duration_ns(),
            r.bytes,
            acts.join("; ")
        );
    }
    println!("flush complete: {flushed}; counts: {:?}", gpuspan_testing::cuda::cupti_counts());
    Ok(())
}
