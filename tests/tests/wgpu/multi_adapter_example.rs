//! The wgpu multi-device example (`multi_adapter`), run as the program it is: one device per
//! adapter in one process, every call on its own device, one timeline track per device.
//!
//! Two devices without a GPU: Mesa's lavapipe listed twice in `VK_DRIVER_FILES` (two copies of
//! its ICD file) gives the Vulkan loader two drivers, so wgpu lists two adapters, each with its
//! own `VkInstance` and device. On a GPU machine NVIDIA's driver and lavapipe do the same
//! (scripts/gpu).
//!
//! Needs the example built first (scripts/test does it):
//! `cargo build -p gpuspan-examples --bin multi_adapter`.
#![cfg(feature = "wgpu-suite")]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// target/<profile>/multi_adapter, next to this test's own deps/ directory.
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("test binary in target/<profile>/deps");
    let bin = dir.join(format!("multi_adapter{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "{} is missing: `cargo build -p gpuspan-examples --bin multi_adapter`", bin.display());
    bin
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuspan-multi-adapter-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Runs the example with a trace file in `dir` and `env`; `None` when it found no adapter
/// outside CI (skipped, as the wgpu tests are; scripts/test installs lavapipe).
fn run(dir: &Path, env: &[(&str, &std::ffi::OsStr)]) -> Option<(Output, Value)> {
    let trace = dir.join("trace.json");
    let out = Command::new(example())
        .env_remove("WGPU_BACKEND")
        .env("GPUSPAN_TRACE_FILE", &trace)
        .env("GPUSPAN_TRACE_ALL", "1")
        .env("XDG_RUNTIME_DIR", dir)
        .envs(env.iter().copied())
        .output()
        .expect("run multi_adapter");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("--- stdout\n{stdout}--- stderr\n{stderr}");
    if stdout.starts_with("multi_adapter: no GPU adapter found") {
        assert!(!gpuspan_tests::in_ci(), "CI installs lavapipe: an adapter must be found");
        return None;
    }
    assert!(out.status.success(), "{}", out.status);
    let timeline = serde_json::from_slice(&std::fs::read(&trace).expect("the timeline")).expect("valid JSON");
    Some((out, timeline))
}

/// Each GPU track's name and how many calls' GPU intervals it holds, with its lanes (calls that
/// overlap others on the track without nesting are drawn beside it).
fn gpu_tracks(timeline: &Value) -> Vec<(String, usize)> {
    let events = timeline["traceEvents"].as_array().expect("events");
    let mut tracks: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 2)
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_owned()))
        .collect();
    tracks.sort();
    let calls = |tid: u64| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == 2 && e["tid"] == tid && e["args"]["gpu.device.id"].is_i64())
            .count()
    };
    let mut by_name: Vec<(String, usize)> = Vec::new();
    for (tid, name) in tracks {
        let base = name.split(" (overlapping ").next().unwrap_or(&name).to_owned();
        match by_name.iter_mut().find(|(n, _)| *n == base) {
            Some((_, n)) => *n += calls(tid),
            None => by_name.push((base, calls(tid))),
        }
    }
    by_name
}

/// lavapipe's ICD file, where Mesa installs it.
fn lavapipe_icd() -> Option<PathBuf> {
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.filter_map(Result::ok).map(|e| e.path()))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("lvp_icd")))
}

#[test]
fn every_call_runs_on_its_adapters_device() {
    let dir = temp_dir("default");
    let Some((out, timeline)) = run(&dir, &[]) else { return };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let devices = stdout.lines().filter(|l| l.contains(", timestamp queries: ")).count();
    assert!(stdout.contains(&format!("every call on its device ({devices} device(s))")), "{stdout}");
    // 4 rounds of upload, kernel and read-back on each device.
    let tracks = gpu_tracks(&timeline);
    assert_eq!(tracks.len(), devices, "one track per device: {tracks:?}");
    assert!(tracks.iter().all(|(_, calls)| *calls == 12), "{tracks:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_lavapipe_drivers_are_two_devices_each_with_its_calls_and_track() {
    let Some(icd) = lavapipe_icd() else {
        assert!(!gpuspan_tests::in_ci(), "CI installs lavapipe (mesa-vulkan-drivers)");
        println!("skipped: no lavapipe ICD file");
        return;
    };
    let dir = temp_dir("two");
    let (first, second) = (dir.join("lvp-a.json"), dir.join("lvp-b.json"));
    for copy in [&first, &second] {
        std::fs::copy(&icd, copy).expect("copy the ICD file");
    }
    let drivers = std::env::join_paths([&first, &second]).expect("a path list");
    let Some((out, timeline)) = run(&dir, &[("VK_DRIVER_FILES", drivers.as_os_str())]) else { return };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("multi_adapter: GPU 1: llvmpipe"), "{stdout}");
    assert!(stdout.contains("every call on its device (2 device(s))"), "{stdout}");
    let tracks = gpu_tracks(&timeline);
    let names: Vec<&str> = tracks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 2, "{tracks:?}");
    assert!(names[0].starts_with("GPU 0: llvmpipe") && names[1].starts_with("GPU 1: llvmpipe"), "{names:?}");
    assert!(tracks.iter().all(|(_, calls)| *calls == 12), "each device's track holds its 12 calls: {tracks:?}");
    // The trust report tells the two devices' clocks apart, though their names are the same.
    let stderr = String::from_utf8_lossy(&out.stderr);
    for i in 0..2 {
        let line = format!("GPU clock of GPU {i}: llvmpipe");
        assert_eq!(stderr.lines().filter(|l| l.starts_with(&line)).count(), 1, "{line}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
