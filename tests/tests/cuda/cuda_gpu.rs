//! CUDA on a real GPU: timing against raw CUPTI, transfers, cuBLAS attribution, many threads,
//! bare and async functions, `cuda::attach` and the CUDA-event fallback. Every test here needs a
//! GPU with CUPTI, so they are `#[ignore = "needs a GPU"]` and fail (never skip) when run without
//! one: `scripts/gpu run` runs them with `--ignored`. Tests that need a process of their own
//! (another timing source) run as a child: the same test again, with `GPUSPAN_CHILD` set.
#![cfg(feature = "cuda")]

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use gpuspan::cuda::Timing;
use gpuspan::{gpu_kernel, gpu_transfer, Backend, Direction, TimingSource};
use gpuspan_testing::record::{ActivityKind, Interval, MemoryKind};
use gpuspan_testing::{Capture, Record};
use rusty_fork::rusty_fork_test;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

const SRC: &str = r#"
extern "C" __global__ void spin(unsigned long long cycles) {
    unsigned long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
extern "C" __global__ void tag() { }
"#;

/// Cycles of the reference spin kernel (about 1 ms on an H100/H200).
const SPIN_CYCLES: u64 = 2_000_000;
const SPIN_CALLS: usize = 30;

/// Kept: CUPTI is process-wide (GPU work outside every scope, which several tests assert on, is
/// `unattributed` whoever launched it; the timing choice and the flush are the process's), so
/// these tests run one at a time, each capturing every thread.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    spin: CudaFunction,
    tag: CudaFunction,
}

/// The GPU; fails the test where there is none.
fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        if let Err(e) = gpuspan::cuda::probe() {
            panic!("this test needs a CUDA device (run it on a GPU machine: scripts/gpu): {e}");
        }
        let ctx = CudaContext::new(0).expect("context");
        let stream = ctx.new_stream().expect("stream");
        let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SRC).expect("NVRTC")).expect("module");
        let spin = module.load_function("spin").expect("spin");
        let tag = module.load_function("tag").expect("tag");
        Gpu { ctx, stream, spin, tag }
    })
}

/// The GPU, with CUPTI timing this process; fails the test otherwise.
fn cupti_gpu() -> &'static Gpu {
    let g = gpu();
    let timing = gpuspan::cuda::start();
    let notes = gpuspan::summary().notes;
    assert_eq!(timing, Timing::Cupti, "this test needs CUPTI (libcupti on LD_LIBRARY_PATH): {notes:?}");
    g
}

/// This process is the child a test started for `role`.
fn is_child(role: &str) -> bool {
    std::env::var("GPUSPAN_CHILD").as_deref() == Ok(role)
}

fn launch_spin(stream: &CudaStream, f: &CudaFunction, cycles: u64) {
    let mut l = stream.launch_builder(f);
    l.arg(&cycles);
    // SAFETY: one u64 parameter, no memory touched.
    unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }) }.expect("spin");
}

fn launch_tag(stream: &CudaStream, f: &CudaFunction, grid: (u32, u32, u32)) {
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: an empty kernel without parameters.
    unsafe { stream.launch_builder(f).launch(cfg) }.expect("tag");
}

fn flush() {
    // Two five-second deadlines: the GPU machine's first CUPTI delivery can be slow.
    assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn kernels(r: &Record) -> Vec<(&str, [u32; 3])> {
    r.activities
        .iter()
        .filter_map(|a| match &a.kind {
            ActivityKind::Kernel(g) => Some((a.name.as_ref(), g.grid)),
            _ => None,
        })
        .collect()
}

#[gpu_kernel(name = "spin")]
fn spin(stream: &Arc<CudaStream>, f: &CudaFunction, cycles: u64) {
    launch_spin(stream, f, cycles);
}

/// Runs the reference spin kernel `SPIN_CALLS` times (after 5 warm-ups), one at a time.
fn spin_series(g: &Gpu, annotated: bool) {
    for i in 0..SPIN_CALLS + 5 {
        if annotated && i >= 5 {
            spin(&g.stream, &g.spin, SPIN_CYCLES);
        } else {
            launch_spin(&g.stream, &g.spin, SPIN_CYCLES);
        }
        g.stream.synchronize().expect("sync");
    }
}

/// Runs one (ignored) test of this binary in a child process and returns the value of the line
/// starting with `key=`.
fn child(test: &str, env: &[(&str, &str)], key: &str) -> u64 {
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        &gpuspan_tests::test_path(module_path!(), test),
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("child test");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child `{test}` failed ({}):\n{text}", out.status);
    text.lines()
        .find_map(|l| l.split_once(&format!("{key}=")).and_then(|(_, v)| v.split_whitespace().next()?.parse().ok()))
        .unwrap_or_else(|| panic!("child `{test}` printed no {key}=:\n{text}"))
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn spin_kernel_matches_raw_cupti_and_events_agree() {
        const TEST: &str = "spin_kernel_matches_raw_cupti_and_events_agree";
        if is_child("raw") {
            return raw_cupti_child();
        }
        if is_child("events") {
            return events_child();
        }
        let _s = serial();
        let g = cupti_gpu();
        let raw = child(TEST, &[("GPUSPAN_CHILD", "raw")], "RAW_MEDIAN_NS");
        let events = child(TEST, &[("GPUSPAN_CHILD", "events"), ("GPUSPAN_CUPTI", "off")], "EVENT_MEDIAN_NS");

        let capture = Capture::start_all_threads();
        spin_series(g, true);
        flush();
        let records = capture.of("spin");
        assert_eq!(records.len(), SPIN_CALLS);
        let mut leads = Vec::new();
        for r in &records {
            assert_eq!(r.source(), TimingSource::Cupti);
            assert_eq!(kernels(r), vec![("spin", [1, 1, 1])]);
            assert_eq!(r.duration_ns(), r.activities[0].interval.duration_ns());
            let gpu = r.gpu.as_ref().expect("GPU timing");
            // Strict: before any causality correction, no start earlier than the call's by more
            // than the error the record stated.
            assert!(r.clock_corrected_ns <= gpu.clock_error_ns, "placed beyond its stated bound: {r:?}");
            leads.push(gpu.interval.start_ns as i64 - r.host.start_ns as i64);
        }
        let (offset, error) = gpuspan_testing::cuda::cupti_clock_offset().expect("CUPTI clock");
        let min_lead = leads.iter().min().copied().unwrap_or(0);
        println!(
            "CUPTI clock - gpuspan clock: {offset} ns (+/- {error} ns); kernel start - scope start after mapping: min \
             {min_lead} ns, median {} ns",
            {
                leads.sort_unstable();
                leads[leads.len() / 2]
            }
        );
        assert!(min_lead > -50_000, "a kernel starts {min_lead} ns before the call that launched it");
        let ours = median(records.iter().map(Record::duration_ns).collect());
        let diff = (ours as f64 - raw as f64) / raw as f64;
        println!(
            "spin {SPIN_CYCLES} cycles, median of {SPIN_CALLS}: gpuspan (CUPTI) {ours} ns, raw CUPTI {raw} ns ({:+.3} %), \
             CUDA events {events} ns ({:+.2} %)",
            diff * 100.0,
            (events as f64 - raw as f64) / raw as f64 * 100.0
        );
        assert!(diff.abs() < 0.01, "gpuspan {ours} ns vs raw CUPTI {raw} ns");
        assert!(((events as f64 - raw as f64) / raw as f64).abs() < 0.10, "events {events} ns vs raw CUPTI {raw} ns");
    }
}

/// Child: the spin kernel timed by CUPTI directly, without gpuspan.
fn raw_cupti_child() {
    gpuspan::set_enabled(false);
    let g = gpu();
    raw::start();
    spin_series(g, false);
    let d = raw::kernel_durations();
    assert_eq!(d.len(), SPIN_CALLS + 5);
    println!("RAW_MEDIAN_NS={}", median(d[5..].to_vec()));
}

/// Child: the spin kernel timed by gpuspan's CUDA-event fallback.
fn events_child() {
    let g = gpu();
    assert_eq!(gpuspan::cuda::start(), Timing::CudaEvent);
    let capture = Capture::start_all_threads();
    spin_series(g, true);
    flush();
    let records = capture.of("spin");
    assert_eq!(records.len(), SPIN_CALLS);
    for r in &records {
        assert_eq!(r.source(), TimingSource::CudaEvent);
        let gpu = r.gpu.as_ref().expect("event timing");
        // Stream time between two events is a bound on the call's work, labelled as one.
        assert!(gpu.bracketed && gpu.bracket_at_exit, "events time a bracket to exit: {r:?}");
        assert!(gpu.interval.start_ns + gpu.clock_error_ns >= r.host.start_ns, "starts before its launch");
        assert!(r.clock_corrected_ns <= gpu.clock_error_ns, "placed beyond its stated bound: {r:?}");
    }
    println!("EVENT_MEDIAN_NS={}", median(records.iter().map(Record::duration_ns).collect()));
}

/// CUPTI used directly, as a reference: kernel records only, one buffer per flush.
mod raw {
    use cudarc::cupti::sys::{self, CUptiResult, CUpti_Activity, CUpti_ActivityKind};
    use gpuspan_testing::cuda::replay::{self as parse, Raw};
    use std::sync::Mutex;

    static DURATIONS: Mutex<Vec<u64>> = Mutex::new(Vec::new());

    unsafe extern "C" fn requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
        let b = vec![0u64; (8 << 20) / 8].into_boxed_slice();
        // SAFETY: CUPTI's out-pointers; the buffer is leaked until `completed`.
        unsafe {
            *size = 8 << 20;
            *max = 0;
            *buffer = Box::into_raw(b) as *mut u8;
        }
    }

    unsafe extern "C" fn completed(_: cudarc::driver::sys::CUcontext, _: u32, buffer: *mut u8, _: usize, valid: usize) {
        let mut rec: *mut CUpti_Activity = std::ptr::null_mut();
        loop {
            // SAFETY: walking the buffer CUPTI returned.
            if unsafe { sys::cuptiActivityGetNextRecord(buffer, valid, &mut rec) } != CUptiResult::CUPTI_SUCCESS {
                break;
            }
            let off = rec as usize - buffer as usize;
            // SAFETY: `valid` bytes were written.
            let bytes = unsafe { std::slice::from_raw_parts(buffer.add(off), valid - off) };
            if let Ok(Raw::Kernel(k)) = parse::parse(bytes) {
                DURATIONS.lock().unwrap().push(k.end - k.start);
            }
        }
        // SAFETY: made by `requested` with this size.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buffer as *mut u64, (8 << 20) / 8)) });
    }

    pub fn start() {
        // SAFETY: plain CUPTI set-up with process-lifetime callbacks.
        unsafe {
            assert_eq!(
                sys::cuptiActivityRegisterCallbacks(Some(requested), Some(completed)),
                CUptiResult::CUPTI_SUCCESS
            );
            let k = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            assert_eq!(sys::cuptiActivityEnable(k), CUptiResult::CUPTI_SUCCESS);
        }
    }

    pub fn kernel_durations() -> Vec<u64> {
        // SAFETY: forced flush; the GPU is idle.
        unsafe { sys::cuptiActivityFlushAll(1) };
        DURATIONS.lock().unwrap().clone()
    }
}

#[gpu_transfer]
fn up_pageable(stream: &Arc<CudaStream>, host: &[f32]) -> Result<CudaSlice<f32>, DriverError> {
    stream.clone_htod(host)
}

#[gpu_transfer(bytes = host.len() * 4)]
fn up_pinned(stream: &Arc<CudaStream>, host: &PinnedHostSlice<f32>) -> Result<CudaSlice<f32>, DriverError> {
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

/// The same copy as one `cuMemcpyAsync` on unified addresses (what `cudaMemcpyAsync` does, and
/// the multi-GPU example's `peer_copy_uva`), `src` in another context.
#[gpu_transfer(direction = gpu_to_gpu)]
fn d2d_uva(stream: &Arc<CudaStream>, src: &CudaSlice<f32>, dst: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    use cudarc::driver::{DevicePtr, DevicePtrMut};
    stream.context().bind_to_thread()?;
    stream.wait(&src.stream().record_event(None)?)?;
    let (src_ptr, _read) = src.device_ptr(src.stream());
    let (dst_ptr, _write) = dst.device_ptr_mut(stream);
    // SAFETY: both ranges are `src.num_bytes()` long and outlive the stream's work.
    unsafe { cudarc::driver::sys::cuMemcpyAsync(dst_ptr, src_ptr, src.num_bytes(), stream.cu_stream()).result() }
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn transfers_have_exact_bytes_memory_kinds_and_bandwidth() {
        let _s = serial();
        let g = cupti_gpu();
        let n = 16 << 20; // 64 MiB of f32
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        // SAFETY: filled before use.
        let mut pinned = unsafe { g.ctx.alloc_pinned::<f32>(n) }.expect("pinned");
        pinned.as_mut_slice().expect("map").copy_from_slice(&host);
        let capture = Capture::start_all_threads();
        let mut x = up_pageable(&g.stream, &host).expect("upload");
        let y = up_pinned(&g.stream, &pinned).expect("upload");
        let mut back = vec![0f32; n];
        down(&g.stream, &x, &mut back).expect("download");
        d2d(&g.stream, &y, &mut x).expect("d2d");
        g.stream.synchronize().expect("sync");
        flush();
        assert_eq!(back[12345], 12345.0);
        let bytes = (n * 4) as u64;
        let check = |name: &str, src: MemoryKind, dst: MemoryKind, dir: Direction| {
            let r = capture.of(name);
            assert_eq!(r.len(), 1, "{name}");
            let r = &r[0];
            assert_eq!(r.bytes, Some(bytes), "{name}: bytes");
            let copies: Vec<_> = r
                .activities
                .iter()
                .filter_map(|a| match a.kind {
                    ActivityKind::Copy { bytes, direction, src, dst } => Some((bytes, direction, src, dst)),
                    _ => None,
                })
                .collect();
            assert_eq!(copies, vec![(bytes, Some(dir), src, dst)], "{name}: copies");
            let bw = r.bandwidth_bytes_per_s().expect("bandwidth");
            println!(
                "{name}: {bytes} B in {} ns = {:.2} GB/s ({} -> {})",
                r.duration_ns(),
                bw / 1e9,
                src.as_str(),
                dst.as_str()
            );
        };
        check("up_pageable", MemoryKind::Pageable, MemoryKind::Device, Direction::CpuToGpu);
        check("up_pinned", MemoryKind::Pinned, MemoryKind::Device, Direction::CpuToGpu);
        check("down", MemoryKind::Device, MemoryKind::Pageable, Direction::GpuToCpu);
        check("d2d", MemoryKind::Device, MemoryKind::Device, Direction::GpuToGpu);
        assert!(
            gpuspan::summary().notes.iter().any(|n| n.contains("`up_pageable` copies pageable host memory")),
            "pinning hint"
        );
    }
}

rusty_fork_test! {
    /// A copy between two contexts takes the path of a copy between two GPUs (cudarc calls
    /// `cuMemcpyPeerAsync`, which CUPTI reports as a peer copy, `MEMCPY2`; `d2d_uva` calls
    /// `cuMemcpyAsync` on unified addresses, as `cudaMemcpyAsync` does): on one GPU, with a second
    /// context, each way must be timed by CUPTI and resolved at once (a scope waiting for a record
    /// kind that is not enabled would hold `flush` for 30 s), on device 0, with its bytes.
    #[test]
    #[ignore = "needs a GPU"]
    fn a_copy_between_two_contexts_is_timed_as_a_peer_copy() {
        let _s = serial();
        let g = cupti_gpu();
        let other = CudaContext::new_non_primary(0, 0).expect("a second context on GPU 0");
        let stream2 = other.new_stream().expect("stream");
        let n = 16 << 20; // 64 MiB of f32
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let src = g.stream.clone_htod(&host).expect("upload");
        let mut dst = stream2.alloc_zeros::<f32>(n).expect("alloc");
        g.stream.synchronize().expect("sync");
        stream2.synchronize().expect("sync");
        let capture = Capture::start_all_threads();
        type Copy = fn(&Arc<CudaStream>, &CudaSlice<f32>, &mut CudaSlice<f32>) -> Result<(), DriverError>;
        for (name, copy) in [("d2d", d2d as Copy), ("d2d_uva", d2d_uva)] {
            stream2.memset_zeros(&mut dst).expect("clear");
            for _ in 0..2 {
                copy(&stream2, &src, &mut dst).unwrap_or_else(|e| panic!("{name}: copy between contexts: {e}"));
            }
            stream2.synchronize().expect("sync");
            assert_eq!(stream2.clone_dtoh(&dst).expect("download")[12345], 12345.0, "{name} copied");
        }
        let t = Instant::now();
        flush();
        println!("flush after the copies: {:?}", t.elapsed());
        let records = [capture.of("d2d"), capture.of("d2d_uva")].concat();
        assert_eq!(records.len(), 4);
        let bytes = (n * 4) as u64;
        for r in &records {
            assert_eq!(r.source(), TimingSource::Cupti, "GPU-timed");
            assert_eq!(r.bytes, Some(bytes));
            assert_eq!(r.gpu.as_ref().and_then(|g| g.device.as_ref()).map(|d| d.id), Some(0), "on device 0");
            let copies: Vec<_> = r
                .activities
                .iter()
                .filter_map(|a| match a.kind {
                    ActivityKind::Copy { bytes, direction, .. } => Some((
                        bytes,
                        direction,
                        a.name.to_string(),
                        a.src_device.as_ref().map(|d| d.id),
                        a.dst_device.as_ref().map(|d| d.id),
                    )),
                    _ => None,
                })
                .collect();
            println!(
                "{}: copy between contexts: {copies:?}, {} ns, {:.1} GB/s",
                r.site.desc.name,
                r.duration_ns(),
                r.bandwidth_bytes_per_s().unwrap_or(0.0) / 1e9
            );
            assert_eq!(copies.len(), 1, "one copy: {copies:?}");
            let (b, dir, _, src_dev, dst_dev) = &copies[0];
            assert_eq!((*b, *dir), (bytes, Some(Direction::GpuToGpu)));
            // A peer copy record names both ends; a plain one (CUPTI may report a copy within one
            // device as device to device) names none. Never one without the other.
            assert!(
                matches!((src_dev, dst_dev), (Some(0), Some(0)) | (None, None)),
                "ends of the copy: {src_dev:?} -> {dst_dev:?}"
            );
        }
        assert_eq!(
            gpuspan_testing::cuda::cupti_counts().map(|c| c.stale_scopes),
            Some(0),
            "no scope waited for a record in vain"
        );
    }
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
    unsafe { blas.gemm(cfg, a, a, c) }.expect("sgemm");
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn cublas_kernels_attach_to_the_annotated_scope() {
        let _s = serial();
        let g = cupti_gpu();
        let blas = CudaBlas::new(g.stream.clone()).expect("cuBLAS");
        let m = 1024;
        let a = g.stream.alloc_zeros::<f32>(m * m).expect("a");
        let mut c = g.stream.alloc_zeros::<f32>(m * m).expect("c");
        sgemm(&g.stream, &blas, &a, &mut c, m as i32); // warm-up: cuBLAS loads its kernels
        g.stream.synchronize().expect("sync");
        flush();
        let capture = Capture::start_all_threads();
        for _ in 0..3 {
            sgemm(&g.stream, &blas, &a, &mut c, m as i32);
        }
        g.stream.synchronize().expect("sync");
        flush();
        let records = capture.of("sgemm");
        assert_eq!(records.len(), 3);
        for r in &records {
            let k = kernels(r);
            assert!(!k.is_empty(), "no cuBLAS kernel attached: {r:?}");
            assert_eq!(k.len(), r.activities.len(), "only kernels expected");
            println!(
                "sgemm {m}: {} ns on the GPU, kernels {:?}",
                r.duration_ns(),
                k.iter().map(|k| k.0).collect::<Vec<_>>()
            );
            let gpu = r.gpu.as_ref().expect("timing");
            for u in capture.of("unattributed") {
                let iv = u.interval();
                assert!(iv.end_ns <= gpu.interval.start_ns || iv.start_ns >= gpu.interval.end_ns, "a kernel leaked: {u:?}");
            }
        }
    }
}

#[gpu_kernel]
fn inner(stream: &Arc<CudaStream>, tag: &CudaFunction) {
    launch_tag(stream, tag, (2, 1, 1));
}

#[gpu_kernel]
fn outer(stream: &Arc<CudaStream>, tag: &CudaFunction) {
    launch_tag(stream, tag, (1, 1, 1));
    inner(stream, tag);
    launch_tag(stream, tag, (3, 1, 1));
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn nested_scopes_attribute_to_the_innermost_and_outside_work_is_unattributed() {
        let _s = serial();
        let g = cupti_gpu();
        let capture = Capture::start_all_threads();
        outer(&g.stream, &g.tag);
        launch_tag(&g.stream, &g.tag, (7, 7, 1));
        g.stream.synchronize().expect("sync");
        flush();
        let grids =
            |name: &str| -> Vec<[u32; 3]> { capture.of(name).iter().flat_map(|r| kernels(r)).map(|k| k.1).collect() };
        assert_eq!(grids("outer"), vec![[1, 1, 1], [3, 1, 1]]);
        assert_eq!(grids("inner"), vec![[2, 1, 1]]);
        assert!(grids("unattributed").contains(&[7, 7, 1]), "work outside scopes is recorded as unattributed");
        let counts = gpuspan_testing::cuda::cupti_counts().expect("CUPTI counts");
        assert!(counts.window_scopes >= 2, "synchronous scopes are attributed by their windows: {counts:?}");
        assert_inside(capture.of("inner")[0].host, capture.of("outer")[0].host);
    }
}

/// A nested call's host interval lies strictly inside its caller's.
fn assert_inside(inner: Interval, outer: Interval) {
    assert!(
        outer.start_ns < inner.start_ns && inner.end_ns < outer.end_ns,
        "the inner call lies inside the outer: {inner:?} {outer:?}"
    );
}

/// Outlives many calibrations of CUPTI's clock, while its inner calls end and are mapped.
#[gpu_kernel]
fn long_outer(stream: &Arc<CudaStream>, tag: &CudaFunction) {
    for _ in 0..5 {
        inner(stream, tag);
        // The resolver looks at the queues every 20 ms while scopes wait: it maps this inner
        // call while the outer one is open, with the calibrations taken so far.
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn a_scope_open_across_calibrations_still_holds_its_inner_calls_on_the_host_clock() {
        let _s = serial();
        let g = cupti_gpu();
        let capture = Capture::start_all_threads();
        long_outer(&g.stream, &g.tag);
        flush();
        let o = capture.of("long_outer")[0].host;
        let inner: Vec<_> = capture.of("inner").iter().map(|r| r.host).collect();
        assert_eq!(inner.len(), 5);
        // Window scopes are timed on CUPTI's clock and mapped by the resolver (decision 46): each
        // inner call was mapped while the outer one was still open, the outer one at its end.
        for &i in &inner {
            assert_inside(i, o);
        }
        assert!(inner.windows(2).all(|w| w[0].end_ns < w[1].start_ns), "one after the other: {inner:?}");
        assert!(o.end_ns - o.start_ns >= 150_000_000, "the outer call lasted its sleeps: {o:?}");
    }
}

#[gpu_kernel]
fn tagged(stream: &Arc<CudaStream>, tag: &CudaFunction, t: u32, i: u32) {
    launch_tag(stream, tag, (t + 1, i + 1, 1));
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn sixteen_threads_of_a_thousand_scopes_each_keep_their_kernels() {
        let _s = serial();
        let g = cupti_gpu();
        const THREADS: u32 = 16;
        const SCOPES: u32 = 1000;
        let capture = Capture::start_all_threads();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    let stream = g.ctx.new_stream().expect("stream");
                    for i in 0..SCOPES {
                        tagged(&stream, &g.tag, t, i);
                    }
                    stream.synchronize().expect("sync");
                });
            }
        });
        let launched = t0.elapsed();
        flush();
        let resolved = t0.elapsed();
        let records = capture.of("tagged");
        assert_eq!(records.len(), (THREADS * SCOPES) as usize);
        let mut seen = HashSet::new();
        let mut thread_of: HashMap<u32, u32> = HashMap::new();
        let mut order: HashMap<u32, Vec<(u64, u32)>> = HashMap::new();
        for r in &records {
            let k = kernels(r);
            assert_eq!(k.len(), 1, "exactly its own kernel: {r:?}");
            let [x, y, _] = k[0].1;
            let (t, i) = (x - 1, y - 1);
            assert!(seen.insert((t, i)), "kernel ({t}, {i}) attributed twice");
            assert_eq!(*thread_of.entry(t).or_insert(r.thread), r.thread, "thread {t}'s kernels under another thread");
            order.entry(t).or_default().push((r.scope_id, i));
        }
        for (t, mut v) in order {
            v.sort_unstable();
            assert!(v.iter().enumerate().all(|(n, (_, i))| n as u32 == *i), "thread {t}: call order and kernels disagree");
        }
        println!(
            "{THREADS} threads x {SCOPES} scopes: {} records, each with its own kernel; launched in {:.0} ms, all resolved \
             {:.0} ms after start; {:?}",
            records.len(),
            launched.as_secs_f64() * 1e3,
            resolved.as_secs_f64() * 1e3,
            gpuspan_testing::cuda::cupti_counts()
        );
    }
}

#[gpu_kernel(backend = cuda)]
fn empty_scope() {}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn what_a_scope_costs_on_the_host() {
        let _s = serial();
        let g = cupti_gpu();
        let n = 20_000;
        let per = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        };
        let capture = Capture::start_all_threads();
        let empty = per(&mut || empty_scope());
        let bare = per(&mut || bare_empty());
        let launch = per(&mut || launch_tag(&g.stream, &g.tag, (1, 1, 1)));
        let scoped = per(&mut || tagged(&g.stream, &g.tag, 0, 0));
        g.stream.synchronize().expect("sync");
        flush();
        assert_eq!(capture.of("tagged").len(), n);
        println!(
            "host cost per call, CUPTI on, {n} calls: empty CUDA scope {empty:.0} ns, empty bare scope {bare:.0} ns; \
             kernel launch {launch:.0} ns plain, {scoped:.0} ns inside a scope (+{:.0} ns)",
            scoped - launch
        );
        assert!(bare < 50_000.0, "an empty bare scope costs {bare} ns");
        assert!(empty < 50_000.0, "an empty scope costs {empty} ns");
    }
}

/// A bare annotation (no stream or context in the signature) on a function that makes its own
/// stream.
#[gpu_kernel]
fn bare_own_stream(g: &Gpu, n: u32) {
    let (ctx, tag) = (&g.ctx, &g.tag);
    let stream = ctx.new_stream().expect("stream");
    // Needed only without CUPTI; must be harmless with it.
    gpuspan::cuda::attach(&stream);
    for i in 0..n {
        launch_tag(&stream, tag, (11, i + 1, 1));
    }
    stream.synchronize().expect("sync");
}

/// A bare annotation on a function that launches nothing.
#[gpu_kernel]
fn bare_empty() {}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn a_bare_function_gets_the_kernels_it_launches_on_its_own_stream() {
        let _s = serial();
        let g = cupti_gpu();
        flush();
        let capture = Capture::start_all_threads();
        bare_own_stream(g, 3);
        bare_empty();
        flush();
        let r = capture.of("bare_own_stream");
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.source(), TimingSource::Cupti);
        assert_eq!(r.backend(), Backend::Cuda);
        let grids: Vec<[u32; 3]> = kernels(r).into_iter().map(|k| k.1).collect();
        assert_eq!(grids, vec![[11, 1, 1], [11, 2, 1], [11, 3, 1]]);
        let leaked = capture.of("unattributed");
        assert!(leaked.is_empty(), "GPU work left unattributed: {leaked:?}");
        let empty = capture.of("bare_empty");
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].source(), TimingSource::Host, "a bare call that launched nothing stays host-timed");
        assert!(empty[0].gpu.is_none() && empty[0].activities.is_empty());
        let summary = gpuspan::summary();
        assert_eq!(summary.site("bare_own_stream").expect("row").backend_label(), "cuda (bare)");
        assert_eq!(summary.site("bare_empty").expect("row").backend_label(), "host");
        println!("bare_own_stream: {} ns on the GPU, kernels {:?}", r.duration_ns(), kernels(r));
    }
}

/// A site that says it is CUDA but has no stream to name: `attach` gives it one.
#[gpu_kernel(backend = cuda)]
fn declared_own_stream(ctx: &Arc<CudaContext>, f: &CudaFunction) {
    let stream = ctx.new_stream().expect("stream");
    gpuspan::cuda::attach(&stream);
    launch_spin(&stream, f, SPIN_CYCLES);
    stream.synchronize().expect("sync");
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn attach_gives_event_timing_a_stream_made_in_the_body() {
        if is_child("attach") {
            return attach_child();
        }
        let _s = serial();
        let _ = gpu();
        let ok = child(
            "attach_gives_event_timing_a_stream_made_in_the_body",
            &[("GPUSPAN_CHILD", "attach"), ("GPUSPAN_CUPTI", "off")],
            "ATTACH_OK",
        );
        assert_eq!(ok, 1);
    }
}

/// Child, under `GPUSPAN_CUPTI=off`: attached streams are timed by CUDA events.
fn attach_child() {
    let g = gpu();
    assert_eq!(gpuspan::cuda::start(), Timing::CudaEvent);
    let capture = Capture::start_all_threads();
    gpuspan::cuda::attach(&g.stream); // no scope open: nothing happens
    bare_own_stream(g, 2);
    declared_own_stream(&g.ctx, &g.spin);
    bare_empty();
    flush();
    for name in ["bare_own_stream", "declared_own_stream"] {
        let r = capture.of(name);
        assert_eq!(r.len(), 1, "{name}");
        assert_eq!(r[0].source(), TimingSource::CudaEvent, "{name}");
        assert_eq!(r[0].backend(), Backend::Cuda, "{name}");
        let gpu = r[0].gpu.as_ref().expect("event timing");
        // The end event is recorded as the call returns and timestamped when the stream
        // reaches it, so the GPU interval may end after the host's: only its start is bounded
        // (the start event is recorded inside the call).
        assert!(gpu.busy_ns > 0, "{name}: {r:?}");
        assert!(gpu.interval.start_ns + gpu.clock_error_ns >= r[0].host.start_ns, "{name} starts in its call: {r:?}");
        assert!(r[0].clock_corrected_ns <= gpu.clock_error_ns, "{name} placed beyond its stated bound: {r:?}");
        println!("{name}: {} ns by CUDA events (host {} ns)", gpu.busy_ns, r[0].host.duration_ns());
    }
    let spin = &capture.of("declared_own_stream")[0];
    assert!(spin.duration_ns() > 500_000, "the spin kernel (~1 ms) is inside the events: {spin:?}");
    assert_eq!(capture.of("bare_empty")[0].source(), TimingSource::Host);
    let notes = gpuspan::summary().notes;
    assert!(!notes.iter().any(|n| n.contains("has no CUDA stream parameter")), "attach was not seen: {notes:?}");
    println!("ATTACH_OK=1");
}

/// A synchronous scope called inside an async one's poll (it pushes its id, on top of the
/// async scope's).
#[gpu_kernel]
fn sync_in_async(stream: &Arc<CudaStream>, tag: &CudaFunction, k: u32) {
    launch_tag(stream, tag, (22, k, 1));
}

/// A bare async function whose launches straddle `.await`s, so that its polls run on
/// different worker threads.
#[gpu_kernel]
async fn across_awaits(g: &'static Gpu, k: u32) {
    let stream = g.ctx.new_stream().expect("stream");
    launch_tag(&stream, &g.tag, (21, k, 1));
    tokio::time::sleep(Duration::from_millis(2)).await;
    sync_in_async(&stream, &g.tag, k);
    launch_tag(&stream, &g.tag, (21, k, 2));
    tokio::task::yield_now().await;
    launch_tag(&stream, &g.tag, (21, k, 3));
    stream.synchronize().expect("sync");
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn async_launches_across_awaits_on_a_multi_thread_runtime_are_attributed() {
        let _s = serial();
        let g = cupti_gpu();
        flush();
        const TASKS: u32 = 32;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_time().build().expect("runtime");
        let capture = Capture::start_all_threads();
        rt.block_on(async {
            let tasks: Vec<_> = (1..=TASKS).map(|k| tokio::spawn(across_awaits(g, k))).collect();
            for t in tasks {
                t.await.expect("task");
            }
        });
        flush();
        let records = capture.of("across_awaits");
        assert_eq!(records.len(), TASKS as usize);
        let mut seen = HashSet::new();
        for r in &records {
            assert_eq!(r.source(), TimingSource::Cupti);
            let grids: Vec<[u32; 3]> = kernels(r).into_iter().map(|k| k.1).collect();
            assert_eq!(grids.len(), 3, "three kernels per call: {grids:?}");
            let k = grids[0][1];
            assert!(seen.insert(k), "task {k} seen twice");
            assert_eq!(grids, vec![[21, k, 1], [21, k, 2], [21, k, 3]]);
        }
        let inner: HashSet<[u32; 3]> = capture.of("sync_in_async").iter().flat_map(|r| kernels(r)).map(|k| k.1).collect();
        assert_eq!(inner, (1..=TASKS).map(|k| [22, k, 1]).collect(), "each sync scope inside a poll has its kernel");
        let leaked = capture.of("unattributed");
        assert!(leaked.is_empty(), "GPU work left unattributed: {leaked:?}");
        assert_eq!(capture.of("sync_in_async").len(), TASKS as usize);
        println!(
            "{TASKS} async calls on 4 workers: each record holds its own 3 kernels, each sync scope inside one its \
             kernel, none unattributed"
        );
    }
}
