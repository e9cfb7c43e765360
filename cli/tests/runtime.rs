//! End to end: a program instrumented with gpuspan writes a capture (`Config::capture`), and
//! the command reads it.

use gpuspan_capture::Capture;
use std::process::Command;

#[gpuspan::gpu_kernel(trace_all)]
fn checksum(data: &[u64]) -> u64 {
    data.iter().fold(0u64, |h, x| h.rotate_left(5) ^ x)
}

#[gpuspan::gpu_transfer(direction = cpu_to_gpu, trace_all)]
fn stage(data: &[u64]) -> Vec<u64> {
    data.to_vec()
}

#[test]
fn a_program_writes_a_capture_that_the_command_reads() {
    let dir = std::env::temp_dir().join(format!("gpuspan-cli-runtime-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.gpuspan");
    let guard = gpuspan::Config::default().summary(false).no_trace_file().capture(&path).init();
    assert_eq!(guard.capture_file(), Some(path.as_path()));
    let data: Vec<u64> = (0..10_000).collect();
    for _ in 0..5 {
        let staged = stage(&data);
        std::hint::black_box(checksum(&staged));
    }
    drop(guard);

    let c = Capture::open(&path).expect("the capture reads");
    assert!(c.truncation.is_none() && c.end.is_some(), "the guard's drop finished the file");
    assert_eq!(c.header.pid, std::process::id());
    let id = |name: &str| c.sites.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("site {name}")).id;
    let (k, t) = (id("checksum"), id("stage"));
    assert_eq!(c.records.iter().filter(|r| r.site == k).count(), 5);
    let staged: Vec<_> = c.records.iter().filter(|r| r.site == t).collect();
    assert_eq!(staged.len(), 5);
    assert!(staged.iter().all(|r| r.bytes == Some(80_000)), "bytes inferred from the slice");
    let agg = c.aggregates.iter().find(|a| a.site == k).expect("aggregates at the end");
    assert_eq!(agg.calls, 5);
    assert_eq!(c.end.as_ref().unwrap().records, 10);

    let out = Command::new(env!("CARGO_BIN_EXE_gpuspan")).arg("report").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("checksum") && text.contains("stage"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
