//! What the machine's GPUs are doing, through gpuspan's device monitor alone: every GPU NVML
//! sees, a few seconds of samples, the newest one, and the device lines of the summary. With
//! feature `wgpu` too, every wgpu adapter is described and matched to its NVML device. Without
//! NVML it says why once and exits 0.
//!
//! `cargo run -p gpuspan-examples --no-default-features --features nvml --bin monitor [seconds]`

use gpuspan::monitor::{self, MonitorConfig, MonitorError};
use std::time::Duration;

fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let guard = gpuspan::Config::from_env().no_trace_file().init();
    // `init()` has started the sampler already unless the environment turned it off; this starts
    // it in that case too.
    match MonitorConfig::from_env().start() {
        Ok(()) | Err(MonitorError::AlreadyRunning) => {}
        Err(e) => println!("monitor: {e}"),
    }
    // Without NVML the reason has been said once already; wgpu adapters are still described.
    let gpus = monitor::ready(Duration::from_secs(10)).unwrap_or_default();
    for g in &gpus {
        let cc = g.compute_capability.map_or("?".into(), |(a, b)| format!("{a}.{b}"));
        let cuda = g.cuda_driver_version.map_or("?".into(), |(a, b)| format!("{a}.{b}"));
        let link = &g.pcie;
        println!(
            "GPU {} {} ({}) {} at {}, {:.1} GiB, compute {cc}, driver {} (CUDA {cuda}), PCIe gen {:?}/{:?} x{:?}/{:?} \
             (current/max), peak {:.1} GB/s",
            g.index,
            g.name,
            g.vendor,
            g.uuid,
            g.pci_bus_id,
            g.memory_total_bytes as f64 / f64::from(1u32 << 30),
            g.driver_version,
            link.current_generation,
            link.max_generation,
            link.current_width,
            link.max_width,
            link.peak_bytes_per_s().unwrap_or(0.0) / 1e9,
        );
    }
    for g in &gpus {
        // What a peer copy's link and efficiency are measured against (docs/multi-gpu.md).
        let speeds: Vec<String> =
            g.nvlinks.iter().map(|l| l.bytes_per_s.map_or("?".into(), |b| format!("{:.1}", b / 1e9))).collect();
        let remotes: Vec<String> = g.nvlinks.iter().map(|l| format!("{:?}", l.remote)).collect();
        println!(
            "GPU {} NVLinks: {} active, GB/s one way each [{}], far ends [{}], NVLink peers {:?}",
            g.index,
            g.nvlinks.len(),
            speeds.join(", "),
            remotes.join(", "),
            g.nvlink_peers
        );
    }
    #[cfg(feature = "wgpu")]
    describe_adapters();
    if gpus.is_empty() {
        return;
    }
    std::thread::sleep(Duration::from_secs(seconds));
    for g in &gpus {
        if let Some(s) = monitor::latest(g.index) {
            println!("GPU {} newest sample: {s:?}", g.index);
        }
    }
    monitor::stop();
    drop(guard); // the summary, with a peak / mean block per device
}

/// Every wgpu adapter, described from its `AdapterInfo` and matched to its vendor's device
/// library (NVML for NVIDIA, ROCm SMI for AMD; none for Intel and Apple, said plainly).
#[cfg(feature = "wgpu")]
fn describe_adapters() {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    for adapter in pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all())) {
        let d = gpuspan_testing::monitor::describe_adapter(&adapter.get_info());
        let device = match (&d.device_library, &d.device) {
            (Ok(library), Some(g)) => format!("{library} GPU {} {}", g.index, g.uuid),
            (Ok(library), None) => format!("no {library} device matches"),
            (Err(why), _) => why.clone(),
        };
        println!(
            "wgpu adapter {} ({}, {}, {}, PCI {:?}): {device}{}",
            d.name,
            d.vendor,
            d.backend,
            d.device_type,
            d.pci_bus_id,
            d.matched_by.map_or(String::new(), |by| format!(" (matched by {by})")),
        );
    }
}
