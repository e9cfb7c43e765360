//! Device monitoring on a real NVIDIA GPU (scripts/gpu-monitor runs it on the lent machine):
//! what gpuspan reads through NVML against what `nvidia-smi` prints in the same run, the
//! sampler's own cost, and (feature `cuda`) slow CUDA spans carrying the device's state.
//!
//! Without NVML the test says so and passes, unless `GPUSPAN_REQUIRE_GPU=1` makes that a failure.
//! It runs in phases and collects failures, so one wrong figure does not hide the others; run it
//! with `--nocapture` for the figures docs/monitor.md records.
#![cfg(feature = "nvml")]

use gpuspan::monitor::{self, GpuInfo, MonitorConfig};
use std::process::Command;
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

fn require_gpu() -> bool {
    std::env::var_os("GPUSPAN_REQUIRE_GPU").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Seconds of idle sampling measured for the overhead figure.
fn idle_seconds() -> u64 {
    std::env::var("GPUSPAN_MONITOR_IDLE_S").ok().and_then(|v| v.parse().ok()).unwrap_or(6)
}

/// One GPU as `nvidia-smi --query-gpu` prints it.
#[derive(Debug)]
struct Smi {
    name: String,
    uuid: String,
    bus_id: String,
    total_mib: f64,
    used_mib: f64,
    gen_max: u32,
    gen_current: u32,
    width_max: u32,
    width_current: u32,
    driver: String,
    compute_cap: String,
}

const SMI_FIELDS: &str = "index,name,uuid,pci.bus_id,memory.total,memory.used,pcie.link.gen.max,pcie.link.gen.current,\
                          pcie.link.width.max,pcie.link.width.current,driver_version,compute_cap";

fn nvidia_smi() -> Result<Vec<Smi>, String> {
    let out = Command::new("nvidia-smi")
        .args([&format!("--query-gpu={SMI_FIELDS}"), "--format=csv,noheader,nounits"])
        .output()
        .map_err(|e| format!("nvidia-smi: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    println!("nvidia-smi --query-gpu={SMI_FIELDS}:\n{text}");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).ok_or(format!("field {i} of {l:?}"));
            Ok(Smi {
                name: f[1].to_owned(),
                uuid: f[2].to_owned(),
                bus_id: f[3].to_owned(),
                total_mib: n(4)?,
                used_mib: n(5)?,
                gen_max: n(6)? as u32,
                gen_current: n(7)? as u32,
                width_max: n(8)? as u32,
                width_current: n(9)? as u32,
                driver: f[10].to_owned(),
                compute_cap: f[11].to_owned(),
            })
        })
        .collect()
}

fn check(failures: &mut Vec<String>, ok: bool, what: String) {
    println!("  {} {what}", if ok { "ok  " } else { "FAIL" });
    if !ok {
        failures.push(what);
    }
}

/// Phase A: every figure of discovery and of a sample against nvidia-smi read between them.
fn agrees_with_nvidia_smi(failures: &mut Vec<String>) {
    let before = gpuspan_testing::monitor::discover().expect("discovery");
    let smi_time = gpuspan_testing::clock::now_ns();
    let smi = match nvidia_smi() {
        Ok(s) => s,
        Err(e) => return failures.push(e),
    };
    let after = gpuspan_testing::monitor::discover().expect("discovery");
    // The sample taken next after nvidia-smi ran.
    std::thread::sleep(Duration::from_millis(250));
    check(failures, smi.len() == after.len(), format!("GPU count: gpuspan {} / nvidia-smi {}", after.len(), smi.len()));
    for ((g, b), s) in after.iter().zip(&before).zip(&smi) {
        println!("GPU {}: {g:#?}", g.index);
        println!("  link peak {:.2} GB/s", g.pcie.peak_bytes_per_s().unwrap_or(0.0) / 1e9);
        check(failures, g.name == s.name, format!("name {:?} / {:?}", g.name, s.name));
        check(failures, g.uuid == s.uuid, format!("uuid {} / {}", g.uuid, s.uuid));
        check(
            failures,
            g.pci_bus_id.eq_ignore_ascii_case(&s.bus_id),
            format!("PCI bus id {} / {}", g.pci_bus_id, s.bus_id),
        );
        check(failures, g.driver_version == s.driver, format!("driver {} / {}", g.driver_version, s.driver));
        let cc = g.compute_capability.map(|(a, b)| format!("{a}.{b}")).unwrap_or_default();
        check(failures, cc == s.compute_cap, format!("compute capability {cc} / {}", s.compute_cap));
        let total = g.memory_total_bytes as f64 / MIB;
        check(failures, (total - s.total_mib).abs() <= 1.0, format!("VRAM total {total:.1} MiB / {} MiB", s.total_mib));
        let sample = monitor::history(g.index).into_iter().find(|x| x.time_ns >= smi_time);
        let used = sample.and_then(|x| x.memory_used_bytes).map_or(f64::NAN, |u| u as f64 / MIB);
        check(failures, (used - s.used_mib).abs() <= 1.0, format!("VRAM used {used:.1} MiB / {} MiB", s.used_mib));
        let link = |l: &GpuInfo| (l.pcie.max_generation, l.pcie.max_width);
        check(
            failures,
            link(g) == (Some(s.gen_max), Some(s.width_max)),
            format!("PCIe max gen/width {:?} / ({}, {})", link(g), s.gen_max, s.width_max),
        );
        // The current generation follows the load; it must match a reading on either side.
        let now = |l: &GpuInfo| (l.pcie.current_generation, l.pcie.current_width);
        let want = (Some(s.gen_current), Some(s.width_current));
        check(
            failures,
            now(g) == want || now(b) == want,
            format!("PCIe current gen/width {:?} (before {:?}) / {want:?}", now(g), now(b)),
        );
    }
}

/// Phase C: what each kind of reading costs the sampler (measured by the sampler itself, at its
/// own pace, so NVML's caches are as cold or warm as they are in use) and how often it is made.
fn query_costs() {
    let Some(s) = gpuspan_testing::monitor::sampler_stats() else { return };
    println!(
        "readings (sampler thread CPU per reading, the cold first one included; rounds every {:?} on average):",
        s.mean_spacing
    );
    for q in &s.queries {
        println!(
            "  {:<34} calls {:>5}  mean {:>9.1} µs  max {:>9.1} µs  at most every {:?}",
            q.name,
            q.calls,
            q.mean_cpu.as_secs_f64() * 1e6,
            q.max_cpu.as_secs_f64() * 1e6,
            q.min_period
        );
    }
}

/// Long enough for a PCIe reading to be made: two of the sampler's mean spacings, and a margin.
/// Only the CUDA phase waits for one.
#[cfg(feature = "cuda")]
fn pcie_wait() -> Duration {
    let spacing = gpuspan_testing::monitor::sampler_stats().map_or(Duration::from_secs(1), |s| s.mean_spacing);
    2 * spacing + Duration::from_millis(300)
}

fn print_stats(what: &str) -> Option<f64> {
    let s = gpuspan_testing::monitor::sampler_stats()?;
    let fraction = s.core_fraction();
    println!(
        "{what}: {} rounds over {:.2} s (one every {:?}, grid {} ms) on {} device(s); sampler CPU {:?} = {} of \
         one core (budget {:.3} %); setup CPU {:?}; round mean {:?} max {:?}; PCIe from {}",
        s.rounds,
        s.wall.as_secs_f64(),
        s.mean_spacing,
        s.interval.as_millis(),
        s.devices,
        s.cpu,
        fraction.map_or("unknown".into(), |f| format!("{:.4} %", f * 100.0)),
        s.cpu_budget * 100.0,
        s.setup_cpu,
        s.mean_round,
        s.max_round,
        s.pcie_source
    );
    fraction
}

#[test]
fn nvml_agrees_with_nvidia_smi_and_the_sampler_is_cheap() {
    if let Err(e) = gpuspan_testing::monitor::discover() {
        assert!(!require_gpu(), "GPUSPAN_REQUIRE_GPU is set but: {e}");
        return eprintln!("skipped: {e}");
    }
    let _guard = gpuspan::Config::from_env().no_trace_file().init();
    let mut failures = Vec::new();
    let t = Instant::now();
    // `init` starts the sampler (GPUSPAN_MONITOR defaults to on), with the default settings.
    match MonitorConfig::default().start() {
        Ok(()) | Err(gpuspan::monitor::MonitorError::AlreadyRunning) => {}
        Err(e) => panic!("sampler: {e}"),
    }
    println!("start returned in {:?}", t.elapsed());
    let gpus = monitor::ready(Duration::from_secs(10)).expect("devices");
    println!("ready after {:?}: {} GPU(s)", t.elapsed(), gpus.len());

    println!("\n== A: gpuspan against nvidia-smi");
    agrees_with_nvidia_smi(&mut failures);

    println!("\n== B: sampler cost at 100 ms, idle GPU, {} s", idle_seconds());
    std::thread::sleep(Duration::from_secs(idle_seconds()));
    if let Some(f) = print_stats("idle") {
        check(&mut failures, f <= 0.001, format!("idle sampler CPU {:.4} % of one core (≤ 0.1 %)", f * 100.0));
    }
    if let Some(s) = monitor::latest(gpus[0].index) {
        println!("latest sample of GPU {}: {s:#?}", gpus[0].index);
    }

    println!("\n== C: cost of each kind of reading");
    query_costs();

    #[cfg(feature = "cuda")]
    {
        println!("\n== D: CUDA work, slow spans carry the device state");
        cuda::slow_spans(&mut failures);
    }

    println!("\n== E: stop");
    let t = Instant::now();
    let stopped = monitor::stop();
    let took = t.elapsed();
    check(&mut failures, stopped && took <= Duration::from_secs(1), format!("stop() = {stopped} in {took:?}"));
    if let Some(f) = print_stats("whole run") {
        check(&mut failures, f <= 0.001, format!("sampler CPU over the run {:.4} % of one core (≤ 0.1 %)", f * 100.0));
    }
    // The summary's device section.
    println!("{}", gpuspan::summary());
    assert!(failures.is_empty(), "{} check(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::check;
    use cudarc::driver::{
        CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
    };
    use gpuspan::monitor;
    use gpuspan::{gpu_kernel, gpu_transfer};
    use gpuspan_testing::record::Value;
    use gpuspan_testing::Capture;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const SPIN: &str = r#"
    extern "C" __global__ void spin(unsigned long long cycles) {
        unsigned long long t0 = clock64();
        while (clock64() - t0 < cycles) { }
    }
    "#;

    /// 256 MiB: a few milliseconds over a gen 5 x16 link.
    const BYTES: usize = 256 << 20;

    #[gpu_transfer(name = "upload pinned", direction = cpu_to_gpu, bytes = host.len())]
    fn upload(
        stream: &Arc<CudaStream>,
        host: &PinnedHostSlice<u8>,
        dev: &mut CudaSlice<u8>,
    ) -> Result<(), DriverError> {
        stream.memcpy_htod(host, dev)
    }

    #[gpu_transfer(name = "download pinned", direction = gpu_to_cpu, bytes = host.len())]
    fn download(
        stream: &Arc<CudaStream>,
        dev: &CudaSlice<u8>,
        host: &mut PinnedHostSlice<u8>,
    ) -> Result<(), DriverError> {
        stream.memcpy_dtoh(dev, host)
    }

    #[gpu_kernel(name = "spin 20 ms")]
    fn spin(stream: &Arc<CudaStream>, f: &CudaFunction, cycles: u64) -> Result<(), DriverError> {
        let mut l = stream.launch_builder(f);
        l.arg(&cycles);
        // SAFETY: one u64 parameter, no memory touched.
        unsafe { l.launch(LaunchConfig { grid_dim: (132, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }
            .map(|_| ())
    }

    fn attr<'a>(a: &'a [(&'static str, Value)], key: &str) -> Option<&'a Value> {
        a.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn slow_spans(failures: &mut Vec<String>) {
        if let Err(e) = gpuspan::cuda::probe() {
            return check(failures, false, format!("CUDA: {e}"));
        }
        println!("CUDA timing: {:?}", gpuspan::cuda::start());
        let ctx = CudaContext::new(0).expect("context");
        let stream = ctx.new_stream().expect("stream");
        let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SPIN).expect("NVRTC")).expect("module");
        let f = module.load_function("spin").expect("spin");
        // SAFETY: written before read.
        let mut host = unsafe { ctx.alloc_pinned::<u8>(BYTES) }.expect("pinned");
        host.as_mut_slice().expect("map").fill(7);
        let mut dev = stream.alloc_zeros::<u8>(BYTES).expect("device buffer");
        // About 20 ms at the 1980 MHz an H100/H200 boosts to under load.
        let cycles = 40_000_000;
        stream.synchronize().expect("sync");
        // PCIe bytes counted so far, once a PCIe reading has been made after the setup above.
        std::thread::sleep(super::pcie_wait());
        let io = || {
            gpuspan_testing::monitor::device_summaries()
                .first()
                .map_or((0.0, 0.0), |d| (d.pcie_tx_bytes, d.pcie_rx_bytes))
        };
        let io_before = io();
        let capture = Capture::start();
        let t = Instant::now();
        let start_ns = gpuspan_testing::clock::now_ns();
        let (mut ups, mut downs) = (0u64, 0u64);
        while t.elapsed() < Duration::from_secs(4) {
            for _ in 0..8 {
                upload(&stream, &host, &mut dev).expect("upload");
                ups += 1;
            }
            for _ in 0..4 {
                download(&stream, &dev, &mut host).expect("download");
                downs += 1;
            }
            for _ in 0..8 {
                spin(&stream, &f, cycles).expect("spin");
            }
            stream.synchronize().expect("sync");
        }
        let end_ns = gpuspan_testing::clock::now_ns();
        gpuspan::flush();
        std::thread::sleep(super::pcie_wait());
        let io_after = io();
        // The PCIe counters against the bytes the program moved: direction and amount.
        let (sent, received) = (io_after.0 - io_before.0, io_after.1 - io_before.1);
        let (down_bytes, up_bytes) = ((downs * BYTES as u64) as f64, (ups * BYTES as u64) as f64);
        let source = gpuspan_testing::monitor::sampler_stats().map_or("?", |s| s.pcie_source);
        println!(
            "  PCIe bytes while the work ran ({source}): received by the GPU {:.3} GB for {:.3} GB uploaded ({:+.2} %), \
             sent {:.3} GB for {:.3} GB downloaded ({:+.2} %)",
            received / 1e9,
            up_bytes / 1e9,
            (received / up_bytes - 1.0) * 100.0,
            sent / 1e9,
            down_bytes / 1e9,
            (sent / down_bytes - 1.0) * 100.0
        );
        // GPM and 64-bit counters average over whole periods, so their totals are the link's
        // bytes: the payload plus packet headers, and on the GPU's transmit side also the read
        // requests of the uploads (the H200 run of docs/monitor.md: +7 % received, +22 % sent).
        // The windowed query's totals are estimates and only printed.
        if source == "gpm" || source == "counters" {
            let link = |x: f64, payload: f64| x >= payload && x <= 1.3 * payload;
            check(failures, link(received, up_bytes), format!("received {received:.0} B for {up_bytes:.0} B uploaded"));
            check(failures, link(sent, down_bytes), format!("sent {sent:.0} B for {down_bytes:.0} B downloaded"));
        }
        let records = capture.records();
        for name in ["upload pinned", "download pinned", "spin 20 ms"] {
            let rs: Vec<_> = records.iter().filter(|r| r.site.desc.name == name).collect();
            let with_snapshot =
                rs.iter().filter(|r| attr(&r.attributes(), "gpu.device.sm_clock_mhz").is_some()).count();
            check(
                failures,
                !rs.is_empty() && with_snapshot == rs.len(),
                format!("{name}: {with_snapshot} of {} records carry a device snapshot", rs.len()),
            );
            if let Some(r) = rs.get(rs.len() / 2) {
                let a = r.attributes();
                println!("  {name}, one record ({:?}, {} µs):", r.source(), r.duration_ns() / 1000);
                for (k, v) in a.iter().filter(|(k, _)| k.starts_with("gpu.device") || k.starts_with("gpu_transfer")) {
                    println!("    {k} = {v:?}");
                }
            }
            if name != "spin 20 ms" {
                let effs: Vec<f64> = rs
                    .iter()
                    .filter_map(|r| match attr(&r.attributes(), "gpu_transfer.link_efficiency") {
                        Some(Value::F64(e)) => Some(*e),
                        _ => None,
                    })
                    .collect();
                let mean = effs.iter().sum::<f64>() / effs.len().max(1) as f64;
                println!("  {name}: link efficiency mean {mean:.3} over {} records", effs.len());
                check(
                    failures,
                    effs.len() == rs.len() && mean > 0.2 && mean <= 1.0,
                    format!("{name}: link efficiency {mean:.3}"),
                );
            }
        }
        // What the sampler saw while the work ran.
        let during: Vec<_> =
            monitor::history(0).into_iter().filter(|s| s.time_ns >= start_ns && s.time_ns <= end_ns).collect();
        let max = |f: &dyn Fn(&monitor::Sample) -> Option<f64>| during.iter().filter_map(f).fold(0.0, f64::max);
        let rx = max(&|s| s.pcie_rx_bytes_per_s);
        let tx = max(&|s| s.pcie_tx_bytes_per_s);
        let util = max(&|s| s.gpu_utilization_pct.map(f64::from));
        let power = max(&|s| s.power_w);
        println!(
            "  during the work ({} samples): peak PCIe to GPU {:.2} GB/s, from GPU {:.2} GB/s, utilization {util} %, power {power:.0} W",
            during.len(),
            rx / 1e9,
            tx / 1e9
        );
        check(failures, util > 0.0, format!("utilization seen under load: {util} %"));
        check(
            failures,
            rx > 1e9 && tx > 1e9,
            format!("PCIe traffic seen: to GPU {:.2} GB/s, from GPU {:.2} GB/s", rx / 1e9, tx / 1e9),
        );
    }
}
