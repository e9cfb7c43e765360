//! The runtime's own timeline in Perfetto's native format (issue 42): a program on wgpu
//! (lavapipe in CI) with its timeline path ending in `.pftrace`, decoded with Perfetto's own
//! compiled schema (`perfetto_trace_pb2`, installed by scripts/sql-clients) as the CLI's tests
//! decode `gpuspan timeline --format perfetto`. It has a track per thread with the calls nested
//! as they ran, the GPU intervals on the device's track, a flow from each call to its GPU work,
//! counters, interned names; and it shows what the JSON timeline of the same run shows (the same
//! slices by name) and what the command draws from a capture of the same run (the same slices on
//! the same tracks, to the nanosecond).
#![cfg(feature = "wgpu-suite")]

#[path = "../../../cli/tests/common/perfetto.rs"]
mod perfetto;

use gpuspan::{gpu_kernel, gpu_transfer};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;
use perfetto::decode;
use rusty_fork::rusty_fork_test;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[gpu_kernel(name = "pf_outer", trace_all)]
fn outer(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    inner(gpu, &mut encoder);
    inner(gpu, &mut encoder);
    queue.submit([encoder.finish()]);
}

#[gpu_kernel(name = "pf_inner", trace_all)]
fn inner(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder) {
    gpu.record_pass(encoder, None);
}

/// A frame as a framework records it: the call names no encoder or queue, so the passes an
/// instrumented device sees on its thread are its activities.
#[gpu_kernel(name = "pf_frame", trace_all)]
fn frame(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    gpu.record_pass(&mut encoder, None);
    gpu.queue.submit([encoder.finish()]);
}

#[gpu_transfer(direction = cpu_to_gpu, trace_all)]
fn pf_upload(queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[f32]) {
    queue.write_buffer(buffer, 0, bytemuck::cast_slice(data));
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("gpuspan-pftrace-{}-{name}", std::process::id()))
}

/// A decoded slice: (track, name, category, start, end).
type Slice = (String, String, String, u64, u64);

fn slices(decoded: &Value) -> Vec<Slice> {
    decoded["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s[1].as_str().unwrap_or_default().to_owned(),
                s[2].as_str().unwrap().to_owned(),
                s[3][0].as_str().unwrap().to_owned(),
                s[4].as_u64().unwrap(),
                s[5].as_u64().unwrap(),
            )
        })
        .collect()
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

rusty_fork_test! {
    #[test]
    fn the_runtime_writes_a_native_perfetto_timeline_that_shows_what_the_json_one_does() {
        a_native_timeline_like_the_json_one();
    }

    #[test]
    fn an_instrumented_device_s_passes_and_memory_are_on_both_timelines_alike() {
        passes_and_memory_alike();
    }
}

/// One run, three outputs: the native timeline (its path's name asks for it), the JSON
/// timeline and a capture, all of the same records (two `init`s run side by side; the first
/// guard dropped ends both). Each test runs in a process of its own (rusty-fork): `init` is the
/// process's.
fn a_native_timeline_like_the_json_one() {
    let Some(gpu) = Gpu::for_test(1 << 12, 1) else { return };
    let (native, json, capture) = (scratch("run.pftrace"), scratch("run.trace.json"), scratch("run.gpuspan"));
    let guard = gpuspan::Config::default().summary(false).trace_file(&native).capture(&capture).init();
    let json_guard = gpuspan::Config::default().summary(false).trace_file(&json).init();
    let data = vec![1.0f32; 1 << 10];
    for _ in 0..3 {
        outer(&gpu, &gpu.queue);
    }
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("pf-worker".into())
            .spawn_scoped(s, || {
                pf_upload(&gpu.queue, &gpu.buffer, &data);
                outer(&gpu, &gpu.queue);
            })
            .unwrap();
    });
    gpu.wait();
    drop(guard);
    drop(json_guard);

    let bytes = std::fs::read(&native).unwrap();
    assert!(!bytes.starts_with(b"{"), "a native trace, not JSON");
    let decoded = decode(&native);
    let all = slices(&decoded);

    // Interned names on one sequence that starts by clearing its incremental state.
    let facts = &decoded["facts"];
    assert_eq!(facts["sequences"], serde_json::json!([1]), "{facts}");
    assert_eq!(facts["first_flags"], 1, "{facts}");
    let names: std::collections::BTreeSet<&str> = all.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(facts["interned_names"].as_u64().unwrap() as usize, names.len(), "each name interned once: {names:?}");

    // A track per thread: every host slice of the worker's calls on its thread's track, the
    // main thread's on another; the inner calls nested in their outer call on the same track.
    let host = |name: &str| -> Vec<&Slice> { all.iter().filter(|s| s.1 == name && !s.2.starts_with("gpu.")).collect() };
    let outers = host("pf_outer");
    let inners = host("pf_inner");
    assert_eq!((outers.len(), inners.len()), (4, 8), "{all:#?}");
    let uploads = host("pf_upload");
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].0, "pf-worker", "the worker's call on its thread's track");
    assert_eq!(outers.iter().filter(|s| s.0 == "pf-worker").count(), 1, "{outers:?}");
    for i in &inners {
        let parent = outers.iter().find(|o| o.0 == i.0 && o.3 <= i.3 && i.4 <= o.4);
        assert!(parent.is_some(), "{i:?} not nested in an outer call on its track: {outers:?}");
    }

    // GPU intervals on the device's track (not a thread's), one per GPU-timed call.
    let gpu_slices: Vec<&Slice> = all.iter().filter(|s| s.2.starts_with("gpu.") && s.2 != "gpu.activity").collect();
    assert_eq!(gpu_slices.len(), 4 + 8 + 1, "{gpu_slices:#?}");
    for g in &gpu_slices {
        assert!(g.0.starts_with("GPU") && g.0.contains("calls"), "{g:?} on a device's track");
    }

    // A flow from each call to its GPU work: host slice → GPU slice of the same name.
    let flows = decoded["flows"].as_array().unwrap();
    assert_eq!(decoded["unmatched_flows"], 0);
    assert_eq!(flows.len(), gpu_slices.len(), "one flow per GPU-timed call");
    for f in flows {
        let (from, to) = (&all[f[0].as_u64().unwrap() as usize], &all[f[1].as_u64().unwrap() as usize]);
        assert_eq!(from.1, to.1, "{from:?} → {to:?}");
        assert!(!from.2.starts_with("gpu.") && to.2.starts_with("gpu."), "{from:?} → {to:?}");
    }

    // Counters: calls and work in flight on the device, and the bytes the upload moved.
    let counters = decoded["counters"].as_array().unwrap();
    let track_names: std::collections::BTreeSet<&str> = counters.iter().map(|c| c[1].as_str().unwrap()).collect();
    assert!(track_names.iter().any(|n| n.ends_with("calls in flight")), "{track_names:?}");
    assert!(track_names.iter().any(|n| n.ends_with("work in flight")), "{track_names:?}");
    let moved: Vec<f64> = counters.iter().filter(|c| c[1] == "bytes moved").map(|c| c[4].as_f64().unwrap()).collect();
    assert_eq!(moved.last().copied(), Some((data.len() * 4) as f64), "{moved:?}");

    // The runtime's attributes are the slices' arguments, beside the model's own.
    let args = &decoded["slices"].as_array().unwrap().iter().find(|s| s[2] == "pf_upload").unwrap()[6];
    assert_eq!(args["gpu_transfer.bytes"], (data.len() * 4) as u64, "{args}");
    assert!(args["code.file.path"].as_str().is_some_and(|p| p.ends_with("timeline_perfetto.rs")), "{args}");
    assert!(args["scope_id"].is_u64(), "{args}");

    // The JSON timeline of the same run: the same slices by name.
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let json_names: Vec<String> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sorted(json_names), sorted(all.iter().map(|s| s.1.clone()).collect()));

    // The command's native timeline of the capture of the same run: the same slices on the same
    // tracks at the same nanoseconds (one writer for both).
    let c = gpuspan_capture::Capture::from_reader(std::fs::File::open(&capture).unwrap()).unwrap();
    let from_cli = scratch("cli.pftrace");
    let out = std::fs::File::create(&from_cli).unwrap();
    gpuspan_cli::perfetto::write_as(gpuspan_cli::perfetto::Format::Perfetto, &[("capture", &c)], out).unwrap();
    assert_eq!(sorted(slices(&decode(&from_cli))), sorted(all.clone()));

    let counts: BTreeMap<&str, usize> = all.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.1.as_str()).or_default() += 1;
        m
    });
    eprintln!("native timeline: {} bytes, slices by name {counts:?}", bytes.len());
    for p in [native, json, capture, from_cli] {
        let _ = std::fs::remove_file(p);
    }
}

/// The JSON timeline's events of phase `ph`.
fn json_events(path: &Path, ph: &str) -> Vec<Value> {
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).cloned().collect()
}

/// On an instrumented device (`gpuspan::wgpu::instrument`), the passes gpuspan times are the
/// calls' activities, and its buffers' live bytes a counter track: the native timeline has the
/// same activity slices as the JSON one and the same memory counter, value for value.
fn passes_and_memory_alike() {
    let Some(gpu) = Gpu::instrumented_for_test(1 << 12, 1) else { return };
    let (native, json) = (scratch("instrumented.pftrace"), scratch("instrumented.trace.json"));
    let guard = gpuspan::Config::default().summary(false).trace_file(&native).init();
    let json_guard = gpuspan::Config::default().summary(false).trace_file(&json).init();
    for _ in 0..2 {
        frame(&gpu);
    }
    let scratch_buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("pf scratch"),
        size: 1 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    drop(scratch_buffer);
    gpu.wait();
    drop(guard);
    drop(json_guard);

    let decoded = decode(&native);
    let all = slices(&decoded);
    let activities = |names: Vec<String>| sorted(names);
    let native_activities = activities(all.iter().filter(|s| s.2 == "gpu.activity").map(|s| s.1.clone()).collect());
    let json_activities = activities(
        json_events(&json, "X")
            .iter()
            .filter(|e| e["cat"] == "gpu.activity")
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect(),
    );
    assert!(!json_activities.is_empty(), "the instrumented device timed the passes");
    assert_eq!(native_activities, json_activities);
    for a in all.iter().filter(|s| s.2 == "gpu.activity") {
        assert!(a.0.starts_with("GPU"), "{a:?} on a device's track");
    }

    let memory = |name: &str| name.starts_with("GPU memory");
    let json_memory: Vec<(String, u64)> = json_events(&json, "C")
        .iter()
        .filter(|e| e["name"].as_str().is_some_and(memory))
        .map(|e| (e["name"].as_str().unwrap().to_owned(), e["args"]["bytes"].as_u64().unwrap()))
        .collect();
    let native_memory: Vec<(String, u64)> = decoded["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[1].as_str().is_some_and(memory))
        .map(|c| (c[1].as_str().unwrap().to_owned(), c[4].as_u64().unwrap()))
        .collect();
    assert!(json_memory.len() >= 2, "the scratch buffer's creation and drop: {json_memory:?}");
    assert_eq!(native_memory, json_memory);
    assert!(decoded["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[1].as_str().is_some_and(memory))
        .all(|c| c[2] == "bytes"));
    for p in [native, json] {
        let _ = std::fs::remove_file(p);
    }
}
