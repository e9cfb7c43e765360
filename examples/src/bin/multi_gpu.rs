//! Several GPUs, timed by gpuspan: on each GPU of the process a kernel compiled with NVRTC and a
//! cuBLAS sgemm; a copy from one GPU to another (`#[gpu_transfer(direction = gpu_to_gpu)]`, with
//! peer access enabled where the GPUs allow it) made two ways: cudarc's `cuMemcpyPeerAsync`
//! (`peer_copy`) and `cuMemcpyAsync` on unified addresses (`peer_copy_uva`); and an NCCL all-reduce
//! inside an annotated function when libnccl can be loaded. Then it checks what gpuspan recorded:
//! every call on the device it ran on, the NCCL kernels inside their call, the results right.
//!
//! Two ways to run it:
//!
//! - one process, every visible GPU: `multi_gpu`. Compute on each GPU, copies 0 → 1 and 1 → 0,
//!   one all-reduce over all of them (a single GPU: everything but the copy, which is said).
//! - one process per GPU, started by `multi_gpu_launch` with `RANK`/`WORLD_SIZE` and a
//!   `CUDA_VISIBLE_DEVICES` that lists the rank's own GPU first: compute on that GPU, a copy from
//!   it to the next rank's GPU, and an all-reduce across the ranks (NCCL's id passed through the
//!   file `MULTI_GPU_NCCL_ID` names).
//!
//! Without a GPU it says so in one line and exits 0 (writing the capture a launcher asked for,
//! empty, so that the job's merge still has every rank). It exits 1 when a check fails.
//!
//! NVLink multicast stays off: the process sets `NCCL_NVLS_ENABLE=0`,
//! `TORCH_SYMM_MEM_DISABLE_MULTICAST=1` and `NVSHMEM_DISABLE_NVLS=1` before anything loads, and
//! nothing here calls `cuMulticastCreate`. docs/multi-gpu.md has the commands.

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError, LaunchConfig, PushKernelArg,
};
use gpuspan::cuda::Timing;
use gpuspan::{gpu_kernel, gpu_transfer, TimingSource};
use gpuspan_testing::record::{ActivityKind, Record};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

const SCALE: &str = r#"
extern "C" __global__ void scale(float a, float *x, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] = a * x[i]; }
}
"#;

/// 64 MiB of f32 per buffer: large enough that a copy's time is the link's, not its launch's.
const N: usize = 16 << 20;
/// Side of the square sgemm.
const M: usize = 2048;
/// Calls of each compute function per GPU.
const CALLS: usize = 4;

/// The variables that keep NVLink multicast off in NCCL, PyTorch and NVSHMEM: on a shared host a
/// multicast object can take the GPUs out of service (docs/multi-gpu.md).
const NO_MULTICAST: [(&str, &str); 3] =
    [("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")];

#[gpu_kernel(trace_all)]
fn scale(stream: &Arc<CudaStream>, f: &CudaFunction, a: f32, x: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    let n = x.len() as u32;
    let mut launch = stream.launch_builder(f);
    launch.arg(&a).arg(x).arg(&n);
    // SAFETY: the kernel reads and writes n floats of x, which is that long.
    unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }.map(|_| ())
}

#[gpu_kernel(trace_all)]
fn sgemm(
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
) -> Result<(), cudarc::cublas::result::CublasError> {
    let _ = stream; // the handle was made on it; the parameter tells gpuspan which stream
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
    unsafe { blas.gemm(cfg, a, b, c) }
}

/// Copies `src` (on another GPU) into `dst` on `stream`'s GPU. cudarc issues
/// `cuMemcpyPeerAsync` on `stream` when the two slices live in different contexts.
#[gpu_transfer(direction = gpu_to_gpu, bytes = src.len() * std::mem::size_of::<f32>(), trace_all)]
fn peer_copy(stream: &Arc<CudaStream>, src: &CudaSlice<f32>, dst: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    stream.memcpy_dtod(src, dst)
}

/// The same copy as one `cuMemcpyAsync` on unified addresses, the call `cudaMemcpyAsync` makes
/// for PyTorch's `copy_` between GPUs: the driver finds both devices from the pointers. On two
/// H200s `cuMemcpyPeerAsync` ran at a tenth of PyTorch's rate (docs/multi-gpu.md); this times
/// the other path beside it.
#[gpu_transfer(direction = gpu_to_gpu, bytes = src.len() * std::mem::size_of::<f32>(), trace_all)]
fn peer_copy_uva(stream: &Arc<CudaStream>, src: &CudaSlice<f32>, dst: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // As cudarc's own cross-context copy: wait for `src` through an event of its stream.
    stream.wait(&src.stream().record_event(None)?)?;
    let (src_ptr, _read) = src.device_ptr(src.stream());
    let (dst_ptr, _write) = dst.device_ptr_mut(stream);
    // SAFETY: both ranges are `src.num_bytes()` long and live until the stream is synchronized.
    unsafe { cudarc::driver::sys::cuMemcpyAsync(dst_ptr, src_ptr, src.num_bytes(), stream.cu_stream()).result() }
}

/// One all-reduce (sum) of `send` into `recv` over every communicator of this process, in one
/// NCCL group: the GPU work NCCL enqueues, on every GPU of the group, is this call's. Not in
/// place: with a single rank NCCL then still copies (in place it would enqueue nothing).
#[cfg(feature = "nccl")]
#[gpu_kernel(backend = cuda, trace_all)]
fn all_reduce(
    comms: &[cudarc::nccl::Comm],
    send: &[CudaSlice<f32>],
    recv: &mut [CudaSlice<f32>],
) -> Result<(), cudarc::nccl::result::NcclError> {
    use cudarc::nccl::{group_end, group_start, ReduceOp};
    group_start()?;
    for ((comm, s), r) in comms.iter().zip(send).zip(recv.iter_mut()) {
        comm.all_reduce(s, r, &ReduceOp::Sum)?;
    }
    group_end()?;
    Ok(())
}

/// This process's place in the job: from the launcher's variables, else alone.
#[derive(Debug, Clone, Copy)]
struct Job {
    rank: usize,
    world: usize,
}

impl Job {
    fn from_env() -> Result<Job, String> {
        let var = |name: &str| -> Result<Option<usize>, String> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse().map(Some).map_err(|_| format!("{name}={v:?} is not a whole number")),
                Err(_) => Ok(None),
            }
        };
        let (rank, world) = (var("RANK")?.unwrap_or(0), var("WORLD_SIZE")?.unwrap_or(1).max(1));
        if rank >= world {
            return Err(format!("RANK={rank} is not below WORLD_SIZE={world}"));
        }
        Ok(Job { rank, world })
    }

    /// Several processes: each owns the first GPU it sees.
    fn ranked(&self) -> bool {
        self.world > 1
    }

    /// This process's span in the job's trace, the parent of its calls' spans (feature `otlp`,
    /// when OTLP export runs): under a launcher, the child of the launcher's span.
    #[cfg(feature = "otlp")]
    fn span(&self, guard: &gpuspan::Guard) -> Option<tracing::span::EnteredSpan> {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry().with(guard.otlp_layer()).try_init().ok()?;
        Some(
            tracing::info_span!("multi_gpu", job.rank = self.rank as i64, job.world_size = self.world as i64).entered(),
        )
    }

    /// Built without OTLP export: none.
    #[cfg(not(feature = "otlp"))]
    fn span(&self, _guard: &gpuspan::Guard) -> Option<std::convert::Infallible> {
        None
    }

    fn who(&self) -> String {
        if self.ranked() {
            format!("multi_gpu rank {}/{}", self.rank, self.world)
        } else {
            "multi_gpu".to_owned()
        }
    }
}

/// One GPU of the process, with what runs on it.
struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
}

impl Gpu {
    fn open(ordinal: usize) -> Result<Gpu, DriverError> {
        let ctx = CudaContext::new(ordinal)?;
        let stream = ctx.default_stream();
        Ok(Gpu { ctx, stream })
    }
}

/// What went wrong with what gpuspan recorded or what the GPUs computed.
#[derive(Default)]
struct Checks {
    failed: Vec<String>,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failed.push(what());
        }
    }
}

fn main() -> ExitCode {
    // Before any library that reads them is loaded, and before gpuspan starts threads.
    for (name, value) in NO_MULTICAST {
        if std::env::var(name).is_ok_and(|v| v != value) {
            eprintln!("multi_gpu: {name} was set otherwise; setting {name}={value} (NVLink multicast stays off)");
        }
        std::env::set_var(name, value);
    }
    let job = match Job::from_env() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("multi_gpu: {e}");
            return ExitCode::from(2);
        }
    };
    let devices = match gpuspan::cuda::probe() {
        Ok(d) => d,
        Err(e) => {
            // Nothing runs, so no summary, timeline or device monitor (its "no NVML" would be a
            // second line); a capture the launcher asked for is still written (empty), so that
            // its merge shows every rank of the job.
            std::env::set_var("GPUSPAN_MONITOR", "off");
            let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
            let _span = job.span(&guard);
            println!("{}: no CUDA device found, nothing to run ({e})", job.who());
            return ExitCode::SUCCESS;
        }
    };
    match run(job, devices.len()) {
        Ok(checks) if checks.failed.is_empty() => ExitCode::SUCCESS,
        Ok(checks) => {
            for f in &checks.failed {
                println!("{}: CHECK FAILED: {f}", job.who());
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("{}: failed: {e}", job.who());
            ExitCode::FAILURE
        }
    }
}

fn run(job: Job, visible: usize) -> Result<Checks, Box<dyn std::error::Error>> {
    let who = job.who();
    let guard = gpuspan::init();
    let _span = job.span(&guard);
    let timing = gpuspan::cuda::start();
    let capture = gpuspan_testing::Capture::start_all_threads();
    let mut checks = Checks::default();

    // Ranked: the first visible GPU is this rank's (the launcher lists it first), the next one
    // the peer it copies to; the others are left alone (no context on them). Alone: every
    // visible GPU computes.
    let (own, opened): (Vec<usize>, usize) =
        if job.ranked() { (vec![0], visible.min(2)) } else { ((0..visible).collect(), visible) };
    let gpus: Vec<Gpu> = (0..opened).map(Gpu::open).collect::<Result<_, _>>()?;
    let names: Vec<String> = gpus.iter().map(|g| g.ctx.name()).collect::<Result<_, _>>()?;
    println!(
        "{who}: {visible} GPU(s) visible, using {} ({}); computing on {own:?}; {timing:?} timing",
        gpus.len(),
        names.join(", "),
    );

    // Compute on each own GPU; `expected` lists, in call order, the ordinal each call ran on.
    let ptx = cudarc::nvrtc::compile_ptx(SCALE)?;
    let host: Vec<f32> = (0..N).map(|i| (i % 1024) as f32).collect();
    let mut expected: Vec<(&'static str, usize)> = Vec::new();
    let mut kept = Vec::new();
    for &o in &own {
        let g = &gpus[o];
        let f = g.ctx.load_module(ptx.clone())?.load_function("scale")?;
        let blas = CudaBlas::new(g.stream.clone())?;
        let mut x = g.stream.clone_htod(&host)?;
        let a = g.stream.clone_htod(&host[..M * M])?;
        let b = g.stream.clone_htod(&host[..M * M])?;
        let mut c = g.stream.alloc_zeros::<f32>(M * M)?;
        for _ in 0..CALLS {
            scale(&g.stream, &f, 2.0, &mut x)?;
            expected.push(("scale", o));
            sgemm(&g.stream, &blas, &a, &b, &mut c)?;
            expected.push(("sgemm", o));
        }
        let back = g.stream.clone_dtoh(&x)?;
        checks.check(back[3] == 3.0 * 2f32.powi(CALLS as i32), || format!("scale on GPU {o}: x[3] = {}", back[3]));
        kept.push((x, blas, a, b, c));
    }

    // Copies between GPUs.
    let pairs: Vec<(usize, usize)> = match (opened, job.ranked()) {
        (1, _) => Vec::new(),
        (_, true) => vec![(0, 1)],
        (_, false) => vec![(0, 1), (1, 0)],
    };
    if pairs.is_empty() {
        println!("{who}: one GPU visible: no copy between GPUs (it needs two)");
    }
    let mut copies = Vec::new();
    for &(s, d) in &pairs {
        let access = enable_peer_access(&gpus[s], &gpus[d]);
        let src = gpus[s].stream.clone_htod(&host)?;
        let mut dst = gpus[d].stream.alloc_zeros::<f32>(N)?;
        gpus[s].stream.synchronize()?;
        // Each way twice: the first copy also sets the peer mapping up.
        for (name, copy) in COPIES {
            gpus[d].stream.memset_zeros(&mut dst)?;
            for _ in 0..2 {
                copy(&gpus[d].stream, &src, &mut dst)?;
            }
            let back = gpus[d].stream.clone_dtoh(&dst)?;
            checks.check(back[..1024] == host[..1024], || format!("{name} {s} → {d}: wrong data"));
        }
        copies.push((s, d, access));
    }

    // NCCL.
    let nccl = all_reduce_step(job, &gpus, &own, &mut checks);

    for g in &gpus {
        g.stream.synchronize()?;
    }
    gpuspan::flush();
    report(&who, &capture.records(), &expected, &copies, &nccl, &mut checks);
    drop(kept);
    Ok(checks)
}

/// A copy from one GPU to another, on the destination's stream.
type Copy = fn(&Arc<CudaStream>, &CudaSlice<f32>, &mut CudaSlice<f32>) -> Result<(), DriverError>;

/// The two ways a copy between GPUs is made, by site name.
const COPIES: [(&str, Copy); 2] = [("peer_copy", peer_copy), ("peer_copy_uva", peer_copy_uva)];

/// Lets each of two GPUs' contexts reach the other's memory, where the hardware allows it:
/// then a peer copy goes GPU to GPU (NVLink or PCIe) instead of through host memory. Says what
/// happened.
fn enable_peer_access(a: &Gpu, b: &Gpu) -> String {
    use cudarc::driver::sys;
    let mut can = 0;
    // SAFETY: both devices come from live contexts; `can` is an out-parameter.
    let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.ctx.cu_device(), b.ctx.cu_device()) };
    if r != sys::CUresult::CUDA_SUCCESS || can == 0 {
        return "peer access not supported: the driver stages the copy through host memory".to_owned();
    }
    for (from, to) in [(a, b), (b, a)] {
        if let Err(e) = from.ctx.bind_to_thread() {
            return format!("peer access not enabled ({e})");
        }
        // SAFETY: `from`'s context is current on this thread and `to`'s is live.
        let r = unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) };
        if r != sys::CUresult::CUDA_SUCCESS && r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return format!("peer access not enabled ({r:?}): the driver stages the copy through host memory");
        }
        // cudarc allocates from the device's stream-ordered pool where it has one, and peer
        // access does not reach pool memory: without this the driver staged the copy through host
        // memory (1.8 ms for 64 MiB on two H200s, and CUPTI gave two halves) and a copy on
        // unified addresses failed with CUDA_ERROR_INVALID_VALUE.
        if let Err(e) = grant_pool_access(to, from) {
            return format!("peer access enabled, but not to GPU {}'s pool memory ({e})", to.ctx.ordinal());
        }
    }
    "peer access enabled, pool memory included".to_owned()
}

/// Lets `peer` read and write what `owner`'s default memory pool allocates (`cuMemPoolSetAccess`).
fn grant_pool_access(owner: &Gpu, peer: &Gpu) -> Result<(), DriverError> {
    use cudarc::driver::sys;
    if !owner.ctx.has_async_alloc() {
        return Ok(()); // cudarc allocates without a pool there: peer access covers it
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is an out-parameter; the device comes from a live context.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, owner.ctx.cu_device()) }.result()?;
    let access = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: peer.ctx.cu_device(),
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: one valid descriptor; the pool belongs to a live device.
    unsafe { sys::cuMemPoolSetAccess(pool, &access, 1) }.result()
}

/// What the all-reduce did, for the report (without the `nccl` feature it is always skipped).
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
enum Nccl {
    Skipped(String),
    Ran { version: String, ranks: usize, gpus: Vec<usize> },
}

#[cfg(not(feature = "nccl"))]
fn all_reduce_step(_: Job, _: &[Gpu], _: &[usize], _: &mut Checks) -> Nccl {
    Nccl::Skipped("built without the `nccl` feature".to_owned())
}

#[cfg(feature = "nccl")]
fn all_reduce_step(job: Job, gpus: &[Gpu], own: &[usize], checks: &mut Checks) -> Nccl {
    // cudarc panics on a missing library or symbol: asked first, and the calls kept in a
    // catch_unwind so that an NCCL older than cudarc's bindings is a message, not a crash.
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Nccl::Skipped(
            "libnccl not found: put a directory holding libnccl.so (a link to libnccl.so.2) on LD_LIBRARY_PATH; \
             multi_gpu_launch does that with the NCCL of Python's nvidia-nccl wheel"
                .to_owned(),
        );
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nccl_all_reduce(job, gpus, own, checks))) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => Nccl::Skipped(format!("NCCL failed: {e}")),
        Err(_) => Nccl::Skipped("NCCL panicked (a symbol cudarc expects is missing from this libnccl?)".to_owned()),
    }
}

#[cfg(feature = "nccl")]
fn nccl_all_reduce(job: Job, gpus: &[Gpu], own: &[usize], checks: &mut Checks) -> Result<Nccl, String> {
    use cudarc::nccl::{result, Comm, Id};
    let err = |what: &str, e: result::NcclError| format!("{what}: {:?}", e.0);
    let v = result::get_nccl_version().map_err(|e| err("ncclGetVersion", e))?;
    let version = format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
    let comms: Vec<Comm> = if job.ranked() {
        let id = match exchange_id(job)? {
            Some(id) => id,
            None => return Ok(Nccl::Skipped("rank 0 could not make an NCCL id".to_owned())),
        };
        let g = &gpus[own[0]];
        g.ctx.bind_to_thread().map_err(|e| e.to_string())?;
        vec![Comm::from_rank(g.stream.clone(), job.rank, job.world, Id::uninit(id))
            .map_err(|e| err("ncclCommInitRank", e))?]
    } else {
        let streams = own.iter().map(|&o| gpus[o].stream.clone()).collect();
        Comm::from_devices(streams).map_err(|e| err("ncclCommInitAll", e))?
    };
    // Member i of the job contributes i + 1: the sum is n(n+1)/2 everywhere.
    let base = if job.ranked() { job.rank } else { 0 };
    let send: Vec<CudaSlice<f32>> = comms
        .iter()
        .enumerate()
        .map(|(i, c)| c.stream().clone_htod(&vec![(base + i + 1) as f32; N]))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut recv: Vec<CudaSlice<f32>> =
        comms.iter().map(|c| c.stream().alloc_zeros(N)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let ranks = comms.first().map_or(0, |c| c.world_size());
    // Twice: the first call also sets NCCL's channels up.
    for _ in 0..2 {
        all_reduce(&comms, &send, &mut recv).map_err(|e| err("ncclAllReduce", e))?;
    }
    let want = (ranks * (ranks + 1) / 2) as f32;
    for (c, b) in comms.iter().zip(&recv) {
        let got = c.stream().clone_dtoh(b).map_err(|e| e.to_string())?;
        checks.check(got[0] == want && got[N - 1] == want, || {
            format!("all-reduce on GPU {}: {} where {want} was expected", c.ordinal(), got[0])
        });
    }
    Ok(Nccl::Ran { version, ranks, gpus: comms.iter().map(|c| c.ordinal()).collect() })
}

/// Rank 0 makes NCCL's id and writes it to the file `MULTI_GPU_NCCL_ID` names (through a
/// rename, so that no rank reads half of it); the others wait for it (two minutes at most).
#[cfg(feature = "nccl")]
fn exchange_id(job: Job) -> Result<Option<[std::ffi::c_char; 128]>, String> {
    let path = std::env::var_os("MULTI_GPU_NCCL_ID")
        .ok_or("MULTI_GPU_NCCL_ID is not set: start the ranks with multi_gpu_launch, which names the file")?;
    let path = std::path::PathBuf::from(path);
    if job.rank == 0 {
        let text = match cudarc::nccl::Id::new() {
            Ok(id) => id.internal().iter().map(|&c| format!("{:02x}", c as u8)).collect::<String>(),
            Err(e) => format!("none: {:?}", e.0),
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, &path)).map_err(|e| e.to_string())?;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let text = loop {
        match std::fs::read_to_string(&path) {
            Ok(t) => break t,
            Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => return Err(format!("no NCCL id from rank 0 in {} after 2 min: {e}", path.display())),
        }
    };
    if text.starts_with("none") || text.len() != 256 {
        return Ok(None);
    }
    let mut id = [0 as std::ffi::c_char; 128];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())? as std::ffi::c_char;
    }
    Ok(Some(id))
}

/// The records of one way of copying (`site`): two calls per pair of GPUs, the second reported
/// and checked (the first also set the peer mapping up).
fn report_copies(
    who: &str,
    site: &str,
    records: &[Record],
    copies: &[(usize, usize, String)],
    cuda_timed: bool,
    cupti: bool,
    checks: &mut Checks,
) {
    // Records arrive as they are resolved; the calls' order is their host start's.
    let mut calls: Vec<&Record> = records.iter().filter(|r| r.site.desc.name == site).collect();
    calls.sort_by_key(|r| r.host.start_ns);
    checks.check(calls.len() == 2 * copies.len(), || {
        format!("{} {site} records for {} copies", calls.len(), 2 * copies.len())
    });
    for (i, (s, d, access)) in copies.iter().enumerate() {
        let Some(r) = calls.get(2 * i + 1) else { continue };
        let attrs = r.attributes();
        let attr = |k: &str| attrs.iter().find(|(n, _)| *n == k).map(|(_, v)| format!("{v:?}"));
        let bw = r.bandwidth_bytes_per_s().unwrap_or(0.0);
        println!(
            "{who}: {site} GPU {s} → GPU {d} ({access}): {} B in {:.1} µs = {:.1} GB/s, {:?} timing; link {}, efficiency {}",
            r.bytes.unwrap_or(0),
            r.duration_ns() as f64 / 1e3,
            bw / 1e9,
            r.source(),
            attr("gpu_transfer.link").unwrap_or_else(|| "unknown".into()),
            attr("gpu_transfer.link_efficiency").unwrap_or_else(|| "unknown (needs the nvml feature and NVML)".into()),
        );
        checks.check(r.bytes == Some((N * 4) as u64), || format!("{site} {s} → {d}: {:?} bytes recorded", r.bytes));
        if cuda_timed {
            let copied: Vec<_> = r
                .activities
                .iter()
                .filter_map(|a| match a.kind {
                    ActivityKind::Copy { bytes, .. } => {
                        Some((bytes, a.src_device.as_ref().map(|x| x.id), a.dst_device.as_ref().map(|x| x.id)))
                    }
                    _ => None,
                })
                .collect();
            if cupti {
                checks.check(r.source() == TimingSource::Cupti, || format!("{site} {s} → {d} was not GPU-timed"));
                checks.check(copied == [((N * 4) as u64, Some(*s as u32), Some(*d as u32))], || {
                    format!("{site} {s} → {d}: CUPTI recorded {copied:?}")
                });
            }
        }
    }
}

/// What gpuspan recorded, checked against what was done, and the figures of the run.
fn report(
    who: &str,
    records: &[Record],
    expected: &[(&'static str, usize)],
    copies: &[(usize, usize, String)],
    nccl: &Nccl,
    checks: &mut Checks,
) {
    let cuda_timed = gpuspan_testing::cuda::timing().is_some_and(|t| t != Timing::Host);
    // Under CUPTI every piece of GPU work is seen, so more can be checked.
    let cupti = gpuspan_testing::cuda::timing() == Some(Timing::Cupti);
    let device = |r: &Record| r.gpu.as_ref().and_then(|g| g.device.as_ref()).map(|d| d.id as usize);

    // Every compute call on the device it ran on, in call order.
    let mut compute: Vec<&Record> = records.iter().filter(|r| matches!(r.site.desc.name, "scale" | "sgemm")).collect();
    compute.sort_by_key(|r| r.host.start_ns);
    let got: Vec<(&str, Option<usize>)> = compute.iter().map(|r| (r.site.desc.name, device(r))).collect();
    let want: Vec<(&str, Option<usize>)> = expected.iter().map(|&(n, o)| (n, cuda_timed.then_some(o))).collect();
    checks.check(got == want, || format!("compute calls and their devices: recorded {got:?}, made {want:?}"));
    for r in &compute {
        checks.check(
            r.activities
                .iter()
                .all(|a| a.device.is_none() || a.device == r.gpu.as_ref().and_then(|g| g.device.clone())),
            || format!("{} has kernels on another device than its own", r.site.desc.name),
        );
    }

    // Busy time per device: the union of each device's kernels and copies.
    let mut per_device: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for r in records {
        for a in &r.activities {
            if let Some(d) = &a.device {
                per_device.entry(d.id as usize).or_default().push((a.interval.start_ns, a.interval.end_ns));
            }
        }
    }
    for (d, mut iv) in per_device {
        iv.sort_unstable();
        let (mut busy, mut end) = (0u64, 0u64);
        for (s, e) in iv {
            busy += e.saturating_sub(s.max(end));
            end = end.max(e);
        }
        let calls = compute.iter().filter(|r| device(r) == Some(d)).count();
        println!("{who}: GPU {d}: {calls} compute calls, busy {:.3} ms (kernels and copies, union)", busy as f64 / 1e6);
    }

    // Copies, each way: bytes, bandwidth, link.
    for (name, _) in COPIES {
        report_copies(who, name, records, copies, cuda_timed, cupti, checks);
    }

    match nccl {
        Nccl::Skipped(why) => println!("{who}: NCCL all-reduce skipped: {why}"),
        Nccl::Ran { version, ranks, gpus } => {
            let mut calls: Vec<&Record> = records.iter().filter(|r| r.site.desc.name == "all_reduce").collect();
            calls.sort_by_key(|r| r.host.start_ns);
            checks.check(calls.len() == 2, || format!("{} all_reduce records for 2 calls", calls.len()));
            if let Some(r) = calls.last() {
                let kernels: Vec<&str> = r
                    .activities
                    .iter()
                    .filter(|a| matches!(a.kind, ActivityKind::Kernel(_)))
                    .map(|a| a.name.as_ref())
                    .collect();
                let on: std::collections::BTreeSet<u32> =
                    r.activities.iter().filter_map(|a| a.device.as_ref().map(|d| d.id)).collect();
                println!(
                    "{who}: NCCL {version} all-reduce of {} MiB over {ranks} rank(s), GPUs {gpus:?} here: {:.1} µs busy \
                     ({:?}); inside the call {} kernel(s) ({}) and {} other GPU activities, on devices {on:?}",
                    (N * 4) >> 20,
                    r.duration_ns() as f64 / 1e3,
                    r.source(),
                    kernels.len(),
                    kernels.first().copied().unwrap_or("none"),
                    r.activities.len() - kernels.len(),
                );
                if cupti {
                    // One rank: NCCL copies send to recv. Several: its kernels do the work.
                    checks.check(r.source() == TimingSource::Cupti, || "the all_reduce call was not GPU-timed".into());
                    checks.check(*ranks == 1 || !kernels.is_empty(), || {
                        "no NCCL kernel inside the all_reduce call".into()
                    });
                    let want: std::collections::BTreeSet<u32> = gpus.iter().map(|&g| g as u32).collect();
                    checks.check(on == want, || format!("all_reduce's GPU work on devices {on:?}, expected {want:?}"));
                }
            }
        }
    }
    let stray = records.iter().filter(|r| r.site.desc.name == "unattributed").count();
    println!("{who}: {stray} GPU activities outside annotated calls (buffers filled, NCCL's setup)");
}
