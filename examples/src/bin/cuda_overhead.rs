//! Host cost of launching a tiny kernel. CUPTI, once on, stays on for the process, so the
//! CUPTI configurations are separate processes; within the gpuspan process the variants that
//! share its configuration run in alternating batches, so that they are compared under the same
//! conditions (the lent machines differ by up to 30 % from one process to the next).
//!
//! - `bare`: no gpuspan at run time (`GPUSPAN=off`, CUPTI never loaded): the baseline;
//! - `cupti-kernel`: CUPTI with concurrent-kernel activity only (the issue's "CUPTI on" baseline);
//! - `gpuspan`: CUPTI as gpuspan configures it (kernels, copies, sets, API and external
//!   correlation records), then in turns: `unscoped` launches, `pushpop` (the CUPTI external id
//!   pushed and popped around each launch, nothing else), `host-scope` (the launch inside a
//!   host-timed annotated function) and `annotated` (a `#[gpu_kernel]` with the stream).
//!
//! `cuda_overhead <bare|cupti-kernel|gpuspan> [launches]` prints ns per launch (median of the
//! batches) and the distribution of single launches; in the gpuspan process also the median (and
//! quartiles) of the Annotated/Unscoped ratio over 201 tightly alternating pairs of short batches.
//! `cuda_overhead count-window <host|window|span|others> [calls]` runs the window path without CUDA for callgrind
//! (`scripts/count-window`).
//! `cuda_overhead parts [calls]` times the pieces of a CUDA scope without a launch, and compares
//! CUPTI's clock with the host's clocks (what a scope could read instead). `PIN_CPU=n` pins the launching thread.
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

/// A host-timed scope around the same launch: what gpuspan's scope costs without CUPTI's part.
#[gpuspan::gpu_kernel(name = "tiny on the host")]
fn in_host_scope<T>(launch: impl FnOnce() -> T) -> T {
    launch()
}

#[gpuspan::gpu_kernel(name = "tiny")]
fn tiny(stream: &Arc<CudaStream>, f: &CudaFunction, x: &mut CudaSlice<f32>) -> Result<(), DriverError> {
    launch(stream, f, x)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "gpuspan".into());
    if let Some(cpu) = std::env::var("PIN_CPU").ok().and_then(|c| c.parse().ok()) {
        pin_this_thread(cpu);
    }
    let launches: usize = std::env::args().nth(2).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    if mode == "count-window" {
        let case = std::env::args().nth(2).unwrap_or_default();
        let calls = std::env::args().nth(3).and_then(|n| n.parse().ok()).unwrap_or(102_400);
        return count_window(&case, calls);
    }
    if let Err(e) = gpuspan::cuda::probe() {
        println!("cuda_overhead: no CUDA device found ({e})");
        return Ok(());
    }
    let (guard, variants): (_, &[Variant]) = match mode.as_str() {
        "bare" => {
            gpuspan::set_enabled(false);
            (None, &[Variant::Unscoped])
        }
        "cupti-kernel" => {
            gpuspan::set_enabled(false);
            raw_cupti::kernel_only()?;
            (None, &[Variant::Unscoped])
        }
        "gpuspan" => {
            let g = gpuspan::Config::from_env().summary(false).no_trace_file().init();
            println!(
                "timing: {:?}; windows read {}",
                gpuspan::cuda::start(),
                if gpuspan_testing::cuda::cupti_windows_read_realtime() {
                    "CLOCK_REALTIME"
                } else {
                    "cuptiGetTimestamp"
                }
            );
            (Some(g), &[Variant::Unscoped, Variant::PushPop, Variant::HostScope, Variant::Annotated])
        }
        "parts" => return parts(launches),
        "window-check" => return window_check(launches),
        other => {
            return Err(format!(
                "unknown mode {other:?}: bare, cupti-kernel, gpuspan, parts, window-check or count-window"
            )
            .into())
        }
    };
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(TINY)?)?;
    let f = module.load_function("tiny")?;
    let mut x = stream.alloc_zeros::<f32>(1)?;
    let mut next_id = 0;
    // Each launch is timed on its own too, so that a constant cost per call (the median moves)
    // can be told from occasional stalls (only the mean and the tail move).
    let mut run = |v: Variant, x: &mut CudaSlice<f32>, n: usize, each: &mut Vec<u32>| -> Result<f64, DriverError> {
        let t = Instant::now();
        for _ in 0..n {
            let t0 = Instant::now();
            match v {
                Variant::Unscoped => launch(&stream, &f, x)?,
                Variant::PushPop => {
                    next_id += 1;
                    raw_cupti::with_external_id(next_id, || launch(&stream, &f, x))?
                }
                Variant::HostScope => in_host_scope(|| launch(&stream, &f, x))?,
                Variant::Annotated => tiny(&stream, &f, x)?,
            }
            each.push(t0.elapsed().as_nanos() as u32);
        }
        let per = t.elapsed().as_nanos() as f64 / n as f64;
        stream.synchronize()?;
        Ok(per)
    };
    const ROUNDS: usize = 9;
    // Enough pairs that the median's 95 % interval (order statistics) is a few tenths of a per
    // cent wide: with 41 the pairs' quartiles spanned up to 15 % and the median moved by more
    // than the cost it measured from one process to the next.
    const PAIRS: usize = 201;
    let mut batches = vec![Vec::new(); variants.len()];
    let mut each = vec![Vec::new(); variants.len()];
    for &v in variants {
        run(v, &mut x, 2_000, &mut Vec::new())?; // warm-up
    }
    for round in 0..ROUNDS {
        // Rotate the order so that no variant always follows the same one.
        for k in 0..variants.len() {
            let i = (round + k) % variants.len();
            batches[i].push(run(variants[i], &mut x, launches, &mut each[i])?);
        }
    }
    // Tightly alternating pairs of short batches, Unscoped and Annotated, the order flipped
    // every pair: a slow stretch of the process slows both halves of a pair, so the ratio of
    // each pair is compared, not batches minutes apart (batches of one mode spread by 20-35 %).
    let pairs = if variants.len() > 1 { PAIRS } else { 0 };
    let short = (launches / 10).max(100);
    let mut ratios = Vec::with_capacity(pairs);
    let mut deltas = Vec::with_capacity(pairs);
    for p in 0..pairs {
        let mut t = [0.0; 2];
        for k in 0..2 {
            let i = (p + k) % 2;
            let v = [Variant::Unscoped, Variant::Annotated][i];
            t[i] = run(v, &mut x, short, &mut Vec::new())?;
        }
        ratios.push(t[1] / t[0]);
        deltas.push(t[1] - t[0]);
    }
    for (i, v) in variants.iter().enumerate() {
        let b = &mut batches[i];
        b.sort_by(f64::total_cmp);
        let e = &mut each[i];
        e.sort_unstable();
        let at = |q: f64| e[((e.len() - 1) as f64 * q) as usize];
        let name = if variants.len() == 1 { mode.clone() } else { format!("{mode}/{v:?}") };
        println!(
            "{name}: {:.0} ns per launch (median of {ROUNDS} × {launches}; batches {b:.0?}); single launches: \
             p50 {} p90 {} p99 {} max {} ns",
            b[ROUNDS / 2],
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
    }
    if pairs > 0 {
        ratios.sort_by(f64::total_cmp);
        deltas.sort_by(f64::total_cmp);
        let q = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        let pct = |r: f64| format!("{:+.1} %", 100.0 * (r - 1.0));
        // The median's 95 % confidence interval: the order statistics n/2 ± 0.98·√n.
        let half = (0.98 * (pairs as f64).sqrt()).ceil() as usize;
        let (lo, hi) = (ratios[pairs / 2 - half], ratios[pairs / 2 + half]);
        println!(
            "{mode}/pairs: Annotated vs Unscoped, median of {pairs} alternating pairs of {short} launches: {} \
             (95 % interval {} .. {}; quartiles {} .. {}, min {} max {}); Annotated - Unscoped {:+.0} ns \
             (quartiles {:+.0} .. {:+.0})",
            pct(q(&ratios, 0.5)),
            pct(lo),
            pct(hi),
            pct(q(&ratios, 0.25)),
            pct(q(&ratios, 0.75)),
            pct(ratios[0]),
            pct(ratios[pairs - 1]),
            q(&deltas, 0.5),
            q(&deltas, 0.25),
            q(&deltas, 0.75),
        );
    }
    if guard.is_some() {
        // Every annotated launch above is a record to resolve: how long the resolver needs for
        // the rest once the loops end, and whether everything was decided (the stress check).
        let t = Instant::now();
        let done = gpuspan::flush();
        let s = gpuspan::summary();
        let calls: u64 = s.reached.iter().map(|r| r.calls).sum();
        println!(
            "{mode}: flush {} in {:.0} ms; {calls} calls recorded; losses {:?}; queues of ended scopes grew by {} segments",
            if done { "resolved everything" } else { "left records pending" },
            t.elapsed().as_secs_f64() * 1e3,
            s.losses,
            gpuspan_testing::cuda::cupti_queue_grown()
        );
    }
    drop(guard);
    Ok(())
}

/// An annotated CUDA function that launches nothing: the scope alone.
#[gpuspan::gpu_kernel(name = "empty CUDA scope")]
fn empty_cuda_scope(_stream: &Arc<CudaStream>) {}

/// An annotated host function that does nothing.
#[gpuspan::gpu_kernel(name = "empty host scope")]
fn empty_host_scope() {}

/// `count-window <host|window|span|others> [calls]`, for `scripts/count-window` on a machine
/// without CUDA: `calls` empty bare scopes, host-timed (`host`) or marking CUPTI windows
/// (`window`; simulated: no CUPTI here), or entries of one span already made (`span`: one the
/// span layer selects, each entry a window of its scope; `others`: one only a no-op layer wants,
/// what `tracing` itself costs there, as `span_vs_window`'s `others_span_reenter`), in batches of
/// 256 in a function of their own for callgrind to count, the queues drained between batches as
/// the resolver would.
fn count_window(case: &str, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    /// A layer that wants spans of one target and does nothing with them.
    struct Noop;
    impl<S: tracing::Subscriber> Layer<S> for Noop {}
    #[inline(never)]
    fn counted(n: usize, span: Option<&tracing::Span>) {
        match span {
            Some(span) => (0..n).for_each(|_| span.in_scope(|| ())),
            None => (0..n).for_each(|_| empty_host_scope()),
        }
    }
    let spans = matches!(case, "span" | "others");
    if spans {
        let subscriber = tracing_subscriber::registry()
            .with(gpuspan::layer_with("count_window::selected=info"))
            .with(Noop.with_filter(Targets::new().with_target("count_window::others", LevelFilter::INFO)));
        tracing::subscriber::set_global_default(subscriber)?;
    }
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    if gpuspan_testing::cuda::timing().is_some() {
        return Err("count-window needs a machine where CUDA timing never starts (no driver or device)".into());
    }
    let mut ended = 0;
    match case {
        "host" => {}
        "window" | "span" | "others" => {
            ended = gpuspan_testing::cuda::simulate_cupti_windows().ok_or("CUDA timing started")?
        }
        other => return Err(format!("count-window host|window|span|others, not {other:?}").into()),
    }
    let span = match case {
        "span" => Some(tracing::info_span!(target: "count_window::selected", "selected")),
        "others" => Some(tracing::info_span!(target: "count_window::others", "others")),
        _ => None,
    };
    // The span's first entry opens its scope: outside the count.
    if let Some(span) = &span {
        span.in_scope(|| ());
    }
    for _ in 0..n / 256 {
        counted(256, span.as_ref());
        if case != "host" {
            ended += gpuspan_testing::cuda::simulate_cupti_windows().unwrap_or(0);
        }
    }
    drop(span);
    ended += gpuspan_testing::cuda::simulate_cupti_windows().unwrap_or(0);
    println!("count-window: {} scopes ({case}), {ended} windows queued and drained", n / 256 * 256);
    if case == "span" && ended < n / 256 * 256 {
        return Err(format!("a selected span's entries queued {ended} windows, not one per entry").into());
    }
    drop(guard);
    Ok(())
}

/// `parts`: what each piece of a CUDA scope costs without a launch, CUPTI on as gpuspan
/// configures it, the pieces in alternating batches (medians of 9 batches of `n` calls).
fn parts(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    println!(
        "timing: {:?}; windows read {}",
        gpuspan::cuda::start(),
        if gpuspan_testing::cuda::cupti_windows_read_realtime() { "CLOCK_REALTIME" } else { "cuptiGetTimestamp" }
    );
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let mut id = 0;
    let mut stamp = 0u64;
    let names = ["empty host scope", "CUPTI push + pop", "cuptiGetTimestamp", "empty CUDA scope"];
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 0..10 {
        for (i, times) in per.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..n {
                match i {
                    0 => empty_host_scope(),
                    1 => {
                        id += 1;
                        raw_cupti::with_external_id(id, || ())
                    }
                    2 => stamp ^= raw_cupti::timestamp(),
                    _ => empty_cuda_scope(&stream),
                }
            }
            if round > 0 {
                times.push(t.elapsed().as_nanos() as f64 / n as f64); // round 0 warms up
            }
        }
    }
    for (name, mut times) in names.iter().zip(per) {
        times.sort_by(f64::total_cmp);
        println!("parts/{name}: {:.0} ns per call (median of 9 × {n}; batches {times:.0?})", times[4]);
    }
    std::hint::black_box(stamp);
    clock_probe();
    drop(guard);
    Ok(())
}

/// CUPTI's clock against the host's clocks: what reading each costs, whether CUPTI's is
/// `CLOCK_REALTIME` (within the bracket of one read), and how far its readings lie from a
/// straight line through the TSC's, interpolated between readings 10 ms, 50 ms and 1 s apart:
/// the error a scope would carry if it read the TSC and the resolver mapped it.
#[cfg(target_arch = "x86_64")]
fn clock_probe() {
    use core::arch::x86_64::_rdtsc;
    let realtime = || {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: plain out-parameter.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    // SAFETY: rdtsc exists on every x86-64 CPU.
    let tsc = || unsafe { _rdtsc() };
    let n = 200_000;
    let cost = |f: &dyn Fn() -> u64| {
        let t = Instant::now();
        let mut acc = 0;
        for _ in 0..n {
            acc ^= f();
        }
        std::hint::black_box(acc);
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let (c_cupti, c_real, c_tsc) = (cost(&raw_cupti::timestamp), cost(&realtime), cost(&tsc));
    // CUPTI - CLOCK_REALTIME, each bracketed by two realtime reads.
    let mut offs: Vec<(i64, u64)> = (0..2000)
        .map(|_| {
            let r0 = realtime();
            let c = raw_cupti::timestamp();
            let r1 = realtime();
            (c as i64 - (r0 / 2 + r1 / 2) as i64, (r1 - r0).div_ceil(2))
        })
        .collect();
    offs.sort_by_key(|o| o.1);
    let tight: Vec<i64> = offs[..200].iter().map(|o| o.0).collect();
    println!(
        "clock/read cost: cuptiGetTimestamp {c_cupti:.1} ns, clock_gettime(REALTIME) {c_real:.1} ns, rdtsc {c_tsc:.1} \
         ns; CUPTI - REALTIME over the 200 tightest of 2000 brackets: {} .. {} ns (half-bracket <= {} ns)",
        tight.iter().min().unwrap_or(&0),
        tight.iter().max().unwrap_or(&0),
        offs[199].1
    );
    // (TSC, CUPTI) pairs every 10 ms for 2 s, each the tightest of 5 brackets.
    let mut pairs = Vec::new();
    for _ in 0..201 {
        let best = (0..5)
            .map(|_| {
                let t0 = tsc();
                let c = raw_cupti::timestamp();
                let t1 = tsc();
                (t1 - t0, t0 / 2 + t1 / 2, c)
            })
            .min_by_key(|p| p.0)
            .unwrap_or((0, 0, 0));
        pairs.push(best);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (t_base, c_base) = (pairs[0].1, pairs[0].2);
    let at = |i: usize| ((pairs[i].1 - t_base) as f64, (pairs[i].2 - c_base) as f64);
    let last = pairs.len() - 1;
    let ns_per_tick = (at(last).1) / (at(last).0);
    let worst_bracket = pairs.iter().map(|p| p.0).max().unwrap_or(0) as f64 * ns_per_tick / 2.0;
    let mut line = format!(
        "clock/TSC->CUPTI: {:.6} ns per tick over 2 s, brackets <= {worst_bracket:.0} ns; worst distance from the line through readings",
        ns_per_tick
    );
    for k in [1usize, 5, 100] {
        let mut worst: f64 = 0.0;
        let mut i = 0;
        while i + k <= last {
            let ((ta, ca), (tb, cb)) = (at(i), at(i + k));
            for j in i + 1..i + k {
                let (t, c) = at(j);
                worst = worst.max((c - (ca + (cb - ca) * (t - ta) / (tb - ta))).abs());
            }
            if k == 1 {
                // Extrapolated one step past the pair instead (no later reading yet).
                if i + 2 <= last {
                    let (t, c) = at(i + 2);
                    worst = worst.max((c - (ca + (cb - ca) * (t - ta) / (tb - ta))).abs());
                }
            }
            i += k;
        }
        let what = if k == 1 {
            "10 ms apart, extrapolated 10 ms"
        } else if k == 5 {
            "50 ms apart"
        } else {
            "1 s apart"
        };
        line += &format!("; {what}: {worst:.0} ns");
    }
    println!("{line}");
}

#[cfg(not(target_arch = "x86_64"))]
fn clock_probe() {}

/// `window-check`: can a scope find its launches by thread and time instead of an external id?
/// Reads CUPTI's clock around each launch and checks that the launch's API record lies inside
/// that window, on the calling thread's OS id (the measurement behind the next step in
/// docs/benchmarks.md).
fn window_check(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    gpuspan::set_enabled(false);
    raw_cupti::api_records()?;
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(TINY)?)?;
    let f = module.load_function("tiny")?;
    let mut x = stream.alloc_zeros::<f32>(1)?;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut windows = Vec::with_capacity(n);
    for _ in 0..n {
        let start = raw_cupti::timestamp();
        launch(&stream, &f, &mut x)?;
        windows.push((start, raw_cupti::timestamp()));
    }
    stream.synchronize()?;
    let launches = raw_cupti::launch_records()?;
    let mine: Vec<_> = launches.iter().filter(|a| a.thread_id == tid).collect();
    let (mut inside, mut lead, mut trail) = (0, u64::MAX, u64::MAX);
    for (a, (start, end)) in mine.iter().zip(&windows) {
        if *start <= a.start && a.end <= *end {
            inside += 1;
            lead = lead.min(a.start - start);
            trail = trail.min(end - a.end);
        }
    }
    println!(
        "window-check: {n} launches, {} kernel-launch API records, {} on this thread (OS id {tid}); {inside} inside \
         their window; closest margins: API start - window start {lead} ns, window end - API end {trail} ns",
        launches.len(),
        mine.len()
    );
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Variant {
    Unscoped,
    PushPop,
    HostScope,
    Annotated,
}

/// CUPTI driven directly, without gpuspan's scopes.
mod raw_cupti {
    use cudarc::cupti::sys::{self, CUptiResult, CUpti_ActivityKind as K};

    const BUF: usize = 8 << 20;

    unsafe extern "C" fn requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
        let b = vec![0u64; BUF / 8].leak();
        // SAFETY: CUPTI passes valid out-pointers.
        unsafe {
            *buffer = b.as_mut_ptr().cast();
            *size = BUF;
            *max = 0;
        }
    }

    fn ok(what: &str, r: CUptiResult) -> Result<(), String> {
        if r == CUptiResult::CUPTI_SUCCESS {
            Ok(())
        } else {
            Err(format!("{what}: {r:?}"))
        }
    }

    /// Kernel-launch API records seen so far (only `api_records` turns API records on).
    static RECORDS: std::sync::Mutex<Vec<gpuspan_testing::cuda::replay::RawApi>> = std::sync::Mutex::new(Vec::new());

    unsafe extern "C" fn completed(_: cudarc::driver::sys::CUcontext, _: u32, buffer: *mut u8, _: usize, valid: usize) {
        use gpuspan_testing::cuda::replay::{self as parse, Raw};
        let mut offsets = Vec::new();
        let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
        // SAFETY: CUPTI hands back a buffer `requested` leaked; it is read, then freed.
        unsafe {
            while sys::cuptiActivityGetNextRecord(buffer, valid, &mut record) == CUptiResult::CUPTI_SUCCESS {
                offsets.push((record as usize - buffer as usize) as u32);
            }
            let bytes = std::slice::from_raw_parts(buffer, valid);
            if let Ok(mut keep) = RECORDS.lock() {
                for r in parse::dump::records(&offsets, bytes) {
                    if let Ok(Raw::Api(a)) = parse::parse(r) {
                        if parse::work_of(a.domain, a.cbid) == Some(parse::Work::Kernel) {
                            keep.push(a);
                        }
                    }
                }
            }
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(buffer.cast::<u64>(), BUF / 8)));
        }
    }

    /// The issue's baseline: CUPTI with concurrent-kernel activity only.
    pub fn kernel_only() -> Result<(), String> {
        // SAFETY: CUPTI setup with valid arguments; the callbacks live for the whole process.
        unsafe {
            ok(
                "cuptiActivityRegisterCallbacks",
                sys::cuptiActivityRegisterCallbacks(Some(requested), Some(completed)),
            )?;
            ok("cuptiActivityEnable", sys::cuptiActivityEnable(K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
        }
    }

    /// Driver API records (and kernels), with OS thread ids.
    pub fn api_records() -> Result<(), String> {
        // SAFETY: CUPTI setup with valid arguments; the callbacks live for the whole process.
        unsafe {
            ok(
                "cuptiSetThreadIdType",
                sys::cuptiSetThreadIdType(sys::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM),
            )?;
            ok(
                "cuptiActivityRegisterCallbacks",
                sys::cuptiActivityRegisterCallbacks(Some(requested), Some(completed)),
            )?;
            ok("cuptiActivityEnable", sys::cuptiActivityEnable(K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))?;
            ok("cuptiActivityEnable", sys::cuptiActivityEnable(K::CUPTI_ACTIVITY_KIND_DRIVER))
        }
    }

    /// Every kernel-launch API record so far, in correlation order.
    pub fn launch_records() -> Result<Vec<gpuspan_testing::cuda::replay::RawApi>, String> {
        // SAFETY: a forced flush has no preconditions.
        unsafe { sys::cuptiActivityFlushAll(1) };
        let mut all = RECORDS.lock().map_err(|e| e.to_string())?.clone();
        all.sort_by_key(|a| a.correlation_id);
        Ok(all)
    }

    /// CUPTI's clock, which its API records use.
    pub fn timestamp() -> u64 {
        let mut t = 0;
        // SAFETY: plain out-parameter.
        unsafe { sys::cuptiGetTimestamp(&mut t) };
        t
    }

    /// What a gpuspan CUDA scope asks of CUPTI, and nothing else: push and pop an external id.
    pub fn with_external_id<T>(id: u64, f: impl FnOnce() -> T) -> T {
        let kind = sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
        let mut last = 0;
        // SAFETY: a push and its pop on this thread.
        unsafe { sys::cuptiActivityPushExternalCorrelationId(kind, id) };
        let out = f();
        // SAFETY: as above.
        unsafe { sys::cuptiActivityPopExternalCorrelationId(kind, &mut last) };
        out
    }
}

/// Pins the calling thread (only it: CUPTI's and gpuspan's threads stay free) to `cpu`.
fn pin_this_thread(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; 0 = the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("cuda_overhead: could not pin to cpu {cpu}");
        }
    }
}
