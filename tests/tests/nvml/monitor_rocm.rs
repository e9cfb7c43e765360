//! AMD GPUs through ROCm SMI, against a fake `librocm_smi64` compiled from C by the test
//! (`tests/fixtures/rocm/fake_rocm_smi.c`, with the `cc` that links Rust here) and named by
//! `GPUSPAN_ROCM_SMI_LIBRARY`: discovery (names, PCI addresses, VRAM), samples with ROCm SMI's
//! units converted (millidegrees, microwatts, Hz), what a GPU lacks left absent, the summary's
//! rows, both layouts of `rsmi_frequencies_t`, and a failing `rsmi_init` said once. NVML is made
//! missing on purpose (`GPUSPAN_NVML_LIBRARY` pointing nowhere), so the GPUs are the fake's
//! everywhere. The libraries are loaded once per process: each case runs in a child process.
#![cfg(feature = "nvml")]

use gpuspan::gpu_kernel;
use gpuspan::monitor::{self, MonitorError, Sample};
use gpuspan_testing::Capture;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const CHILD: &str = "GPUSPAN_ROCM_TEST_CHILD";
const NO_NVML: &str = "/nonexistent/gpuspan-test/libnvidia-ml.so.1";
const GIB: u64 = 1 << 30;

/// The fake library, built into a fresh directory of its own (tests run side by side).
fn build_fake(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuspan-fake-rocm-{}-{case}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/rocm/fake_rocm_smi.c");
    let library = dir.join("librocm_smi64.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc failed on {}: {status}", source.display());
    library
}

/// Runs the child test `name` with the fake library and `env`; returns its output once it passed.
fn run_child(case: &str, name: &str, env: &[(&str, &str)]) -> Output {
    let library = build_fake(case);
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args(["--exact", &gpuspan_tests::test_path(module_path!(), name), "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("GPUSPAN_NVML_LIBRARY", NO_NVML)
        .env("GPUSPAN_ROCM_SMI_LIBRARY", &library)
        .env("GPUSPAN_MONITOR_INTERVAL_MS", "10")
        .env("GPUSPAN_MONITOR_CPU_PERCENT", "100")
        .env_remove("GPUSPAN_MONITOR")
        .env_remove("FAKE_RSMI_MAJOR")
        .env_remove("FAKE_RSMI_INIT_FAIL");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("runs");
    let _ = std::fs::remove_dir_all(library.parent().expect("dir"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the child test did not run:\n{stdout}");
    assert!(!stderr.contains("panicked") && !stdout.contains("panicked"), "{stdout}\n{stderr}");
    out
}

#[gpu_kernel(track_memory, trace_all)]
fn step(x: u64) -> u64 {
    x + 1
}

/// Waits (at most 20 s, for a loaded machine) until the sampler has read each GPU `n` times.
fn samples_of(index: u32, n: usize) -> Vec<Sample> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let history = monitor::history(index);
        if history.len() >= n || Instant::now() > deadline {
            return history;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn child_with_fake_rocm_smi() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let guard = gpuspan::Config::from_env().no_trace_file().init();
    let gpus = monitor::ready(Duration::from_secs(20)).expect("the fake's GPUs");
    assert_eq!(gpus.len(), 2, "{gpus:#?}");
    let (mi300, navi) = (&gpus[0], &gpus[1]);
    assert_eq!((mi300.index, mi300.name.as_str(), mi300.vendor), (0, "AMD Instinct MI300X", "AMD"));
    assert_eq!(mi300.pci_bus_id, "00000000:C1:00.0");
    assert_eq!(mi300.uuid, "0x18f68e602b8a790f");
    assert_eq!(mi300.pci_device_id, 0x74a1 << 16 | 0x1002);
    assert_eq!(mi300.memory_total_bytes, 192 * GIB);
    assert_eq!(mi300.driver_version, "6.8.5");
    assert_eq!((mi300.compute_capability, mi300.cuda_driver_version), (None, None), "CUDA's, not AMD's");
    assert_eq!((navi.index, navi.name.as_str()), (1, "AMD Radeon RX 7900 XTX"));
    assert_eq!(navi.pci_bus_id, "00000000:03:00.0", "the partition bits are not part of the address");
    assert_eq!(navi.uuid, navi.pci_bus_id, "no unique id: the PCI address stands in");
    assert_eq!(navi.memory_total_bytes, 24 * GIB);
    assert_eq!(gpuspan_testing::monitor::discover().expect("again"), gpus, "discovery says the same each time");

    let s = samples_of(0, 3).pop().expect("sampled");
    assert_eq!(s.gpu_utilization_pct, Some(37));
    assert_eq!(s.memory_utilization_pct, Some(12));
    assert_eq!((s.memory_used_bytes, s.memory_free_bytes), (Some(4 * GIB), Some(188 * GIB)));
    assert_eq!(s.temperature_c, Some(52), "52 345 m°C from the junction sensor (no edge sensor)");
    assert_eq!(s.power_w, Some(301.25), "socket power, µW to W");
    assert_eq!(s.power_limit_w, Some(750.0));
    assert_eq!((s.sm_clock_mhz, s.memory_clock_mhz), (Some(2100), Some(1300)), "the current levels, Hz to MHz");
    assert_eq!((s.pcie_tx_bytes_per_s, s.pcie_rx_bytes_per_s, s.throttle_reasons), (None, None, None));
    let s = samples_of(1, 3).pop().expect("sampled");
    assert_eq!(s.gpu_utilization_pct, None, "a reading the GPU lacks is absent, never 0");
    assert_eq!(s.memory_utilization_pct, Some(5));
    assert_eq!(s.temperature_c, Some(46), "45 500 m°C rounds to 46");
    assert_eq!(s.power_w, Some(95.0), "average power where socket power is not supported");
    assert_eq!(s.power_limit_w, None);
    assert_eq!(s.sm_clock_mhz, None, "no current level (-1): no clock");
    assert_eq!(s.memory_clock_mhz, Some(456));

    let summaries = gpuspan_testing::monitor::device_summaries();
    assert_eq!(summaries.len(), 2);
    let busy = summaries[0].gpu_utilization_pct.expect("reported");
    assert_eq!((busy.peak, busy.mean), (37.0, 37.0));
    assert_eq!(summaries[1].gpu_utilization_pct, None);
    let stats = gpuspan_testing::monitor::sampler_stats().expect("started");
    assert_eq!((stats.devices, stats.pcie_source), (2, "none"));
    let names: Vec<&str> = stats.queries.iter().map(|q| q.name).collect();
    assert!(names.contains(&"utilization") && names.contains(&"sm_clock"), "{names:?}");

    let summary = gpuspan::summary().to_string();
    assert!(summary.contains("devices (ROCm SMI: "), "{summary}");
    let at = |text: &str| summary.find(text).unwrap_or_else(|| panic!("no {text:?} in\n{summary}"));
    let (first, second) = (at("GPU 0 AMD Instinct MI300X"), at("GPU 1 AMD Radeon RX 7900 XTX"));
    let (gpu0, gpu1) = (&summary[first..second], &summary[second..]);
    for row in [
        "00000000:C1:00.0",
        "utilization 37 % / 37 %",
        "memory busy 12 % / 12 %",
        "temperature 52 / 52 °C",
        "power 301 / 301 W (limit 750 W)",
        "SM clock 2100 / 2100 MHz",
        "memory clock 1300 / 1300 MHz",
    ] {
        assert!(gpu0.contains(row), "{row:?} not in\n{gpu0}");
    }
    assert!(!gpu1.contains("utilization") && !gpu1.contains("SM clock"), "absent rows stay out:\n{gpu1}");
    assert!(gpu1.contains("memory clock 456 / 456 MHz") && gpu1.contains("power 95 / 95 W"), "{gpu1}");

    // `track_memory` reads VRAM in use through ROCm SMI: 4 GiB + 1 GiB on the fake's GPUs.
    let capture = Capture::start();
    assert_eq!(step(1), 2);
    gpuspan::flush();
    let record = capture.of("step").pop().expect("recorded");
    let (before, after) = record.memory.expect("track_memory marks");
    assert_eq!((before.device_used_bytes, after.device_used_bytes), (Some(5 * GIB), Some(5 * GIB)));
    assert!(monitor::stop());
    drop(guard);
}

#[test]
fn a_fake_rocm_smi_is_read_as_two_amd_gpus() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let out = run_child("v7", "child_with_fake_rocm_smi", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("could not be loaded"), "NVML's absence is not news where ROCm SMI has GPUs:\n{stderr}");
}

#[test]
fn rocm_5s_frequency_layout_gives_the_same_clocks() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    run_child("v5", "child_with_fake_rocm_smi", &[("FAKE_RSMI_MAJOR", "5")]);
}

#[test]
fn child_with_failing_rocm_init() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let guard = gpuspan::Config::from_env().no_trace_file().init();
    let e = monitor::ready(Duration::from_secs(20)).expect_err("rsmi_init fails");
    match &e {
        MonitorError::RocmCall { call, message } => {
            assert_eq!(*call, "rsmi_init");
            assert!(message.contains("RSMI_STATUS_INIT_ERROR") && message.contains("status 8"), "{message}");
        }
        other => panic!("expected RocmCall, got {other:?}"),
    }
    assert!(monitor::latest(0).is_none());
    drop(guard);
}

#[test]
fn a_failing_rocm_init_is_one_message_and_the_program_goes_on() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let out = run_child("init", "child_with_failing_rocm_init", &[("FAKE_RSMI_INIT_FAIL", "1")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr.lines().filter(|l| l.starts_with("gpuspan: ROCm SMI rsmi_init failed")).count();
    assert_eq!(said, 1, "said once:\n{stderr}");
    assert!(stderr.contains("rocm-smi"), "the message says what to check:\n{stderr}");
}
