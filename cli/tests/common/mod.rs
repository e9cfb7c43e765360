//! What the command's test files share: scratch files, saved captures, running the binary.
#![allow(dead_code)] // each test file uses a different part

use gpuspan_capture::Capture;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

/// The prefix of a test process's scratch folder, followed by its process id.
const SCRATCH: &str = "gpuspan-cli-test-";

/// A path in this test process's scratch folder.
pub fn scratch(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(sweep_ended);
    let dir = std::env::temp_dir().join(format!("{SCRATCH}{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `c` written to the scratch file `name`.
pub fn save(c: &Capture, name: &str) -> PathBuf {
    let path = scratch(name);
    let mut bytes = Vec::new();
    c.write_to(&mut bytes).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs the binary: (status code, stdout, stderr). It never panics, whatever it is given.
pub fn gpuspan<S: AsRef<OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuspan")).args(args).output().expect("the binary runs");
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(!e.contains("panicked"), "{e}");
    (out.status.code().unwrap_or(-1), o, e)
}

/// A kernel named `name` over `interval` on stream 7 of `device` (its geometry does not matter
/// to the commands these tests run).
pub fn kernel(name: &str, interval: gpuspan_capture::Interval, device: u32) -> gpuspan_capture::Activity {
    gpuspan_capture::Activity {
        name: name.into(),
        interval,
        kind: gpuspan_capture::ActivityKind::Kernel(gpuspan_capture::KernelGeometry {
            grid: [1, 1, 1],
            block: [32, 1, 1],
            registers_per_thread: 8,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
        }),
        stream: Some(7),
        device: Some(device),
    }
}

/// A complete event of a Chrome Trace Event document: ((pid, tid), start, end), in ns.
pub type Slice = ((u64, u64), u64, u64);

/// The complete events of a Chrome Trace Event document, and the first two of them on one track
/// that overlap without nesting (which Perfetto would drop).
pub fn complete_events(json: &serde_json::Value) -> (Vec<Slice>, Option<(usize, usize)>) {
    let ns = |v: &serde_json::Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
    let events: Vec<Slice> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let start = ns(&e["ts"]);
            ((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()), start, start + ns(&e["dur"]))
        })
        .collect();
    let overlap = gpuspan_capture::lanes::overlapping(&events);
    (events, overlap)
}

/// A capture of an instrumented wgpu device (format 9): a kernel call, and the device's memory
/// account: a 1 MiB `weights` buffer made in `load`, a 4 MiB `kv cache` made and dropped in the
/// `decode` span (the peak), one texture that could not be sized, one change not drawn.
pub fn memory_capture() -> Capture {
    use gpuspan_capture::*;
    let mut c = Capture::new(Header::new("memory", 11));
    c.header.start_ns = 1_000_000;
    c.sites.push(Site { backend: Backend::Wgpu, ..Site::new(0, "load", SiteKind::Kernel) });
    c.threads.push(Thread { index: 1, name: "main".into() });
    c.devices.push(Device { key: 0, id: 2, name: "llvmpipe".into() });
    let mut r = Record::new(0, 1, 1, Interval::new(1_000_100, 1_000_900));
    r.gpu = Some(Gpu { device: Some(0), ..Gpu::new(Interval::new(1_000_200, 1_000_800), TimingSource::GpuTimestamp) });
    c.records.push(r);
    let held = |name: &str, bytes| Held { name: name.into(), bytes };
    let sample = |time_ns, bytes| MemorySample { time_ns, bytes };
    c.memory.push(MemoryAccount {
        device: 0,
        peak_bytes: 5 << 20,
        peak_ns: 1_000_500,
        peak_by_label: vec![held("kv cache", 4 << 20), held("weights", 1 << 20)],
        peak_by_owner: vec![held("decode", 4 << 20), held("load", 1 << 20)],
        live_bytes: 1 << 20,
        live_objects: 1,
        live_by_label: vec![held("weights", 1 << 20)],
        live_by_owner: vec![held("load", 1 << 20)],
        not_sized: 1,
        samples: vec![sample(1_000_300, 1 << 20), sample(1_000_500, 5 << 20), sample(1_000_700, 1 << 20)],
        samples_dropped: 1,
    });
    c.aggregates.push(Aggregate { site: 0, calls: 1, ..Default::default() });
    c.end = Some(End { end_ns: 1_001_000, records: 1, losses: vec![], notes: vec![] });
    c
}

/// Removes the scratch folders of test processes that have ended: a test binary has no teardown,
/// so each run leaves its folder (some hundred MB), and repeated runs filled the disk. Only where
/// `/proc` says which processes live.
fn sweep_ended() {
    if !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH)).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
