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
    // (Other tests in this process may have added calls of their own sites meanwhile.)
    assert_eq!(c.end.as_ref().unwrap().records, c.records.len() as u64);

    let out = Command::new(env!("CARGO_BIN_EXE_gpuspan")).arg("report").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("checksum") && text.contains("stage"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Called only by the tests other than the first, so that its counts stay its own (tests of
/// one binary share gpuspan's process-wide sites).
#[gpuspan::gpu_kernel(trace_all)]
fn other(data: &[u64]) -> u64 {
    data.iter().sum()
}

/// The child half of the test below: records three calls, waits for the periodic flush, then
/// is killed (SIGKILL, which nothing can catch: `process::exit` and SIGTERM now finish the
/// capture, docs/decisions.md 58), so the guard never finishes it, and no core file is left
/// behind, as `abort` might.
fn killed_child(path: &str) -> ! {
    let _guard = gpuspan::Config::default().summary(false).no_trace_file().capture(path).init();
    let data: Vec<u64> = (0..1_000).collect();
    for _ in 0..3 {
        std::hint::black_box(other(&data));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) on this process; nothing is shared.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    unreachable!("SIGKILL ends the process");
}

#[test]
fn a_killed_program_leaves_a_capture_readable_up_to_its_last_flush() {
    if let Ok(path) = std::env::var("GPUSPAN_CLI_TEST_CHILD") {
        killed_child(&path);
    }
    let dir = std::env::temp_dir().join(format!("gpuspan-cli-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("killed.gpuspan");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_killed_program_leaves_a_capture_readable_up_to_its_last_flush", "--nocapture"])
        .env("GPUSPAN_CLI_TEST_CHILD", &path)
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "the child was killed: {status:?}");
    let c = Capture::open(&path).expect("a killed program's capture reads");
    assert!(c.end.is_none() && c.truncation.is_some(), "no end marker: the program never finished");
    assert_eq!(c.records.len(), 3, "every call made before the last flush is there");
    let out = Command::new(env!("CARGO_BIN_EXE_gpuspan")).arg("report").arg(&path).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("the capture is incomplete (it has no end marker"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_capture_path_that_is_not_a_regular_file_is_refused_and_the_program_runs_on() {
    let guard = gpuspan::Config::default().summary(false).no_trace_file().capture("/dev/null").init();
    assert_eq!(guard.capture_file(), None, "a device is never written to");
    std::hint::black_box(other(&[1, 2, 3]));
    drop(guard);
}

/// An annotated function that runs the whole program, `init()` inside it, as an annotated `main`
/// does: its one call is still open when the capture ends.
#[gpuspan::gpu_kernel]
fn whole_program(path: &str) {
    let guard = gpuspan::Config::default().summary(false).no_trace_file().capture(path).init();
    std::hint::black_box(other(&[4, 5, 6]));
    drop(guard);
}

/// The capture says which sites were still running at shutdown, and `report` lists them as
/// such, not as "Never reached" (which the summary and the docs say is wrong for an annotated
/// `main`).
#[test]
fn a_site_running_at_shutdown_is_not_never_reached() {
    if let Ok(path) = std::env::var("GPUSPAN_CLI_RUNNING_CHILD") {
        whole_program(&path);
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpuspan-cli-running-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("running.gpuspan");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_site_running_at_shutdown_is_not_never_reached", "--nocapture"])
        .env("GPUSPAN_CLI_RUNNING_CHILD", &path)
        .status()
        .unwrap();
    assert!(status.success());
    let c = Capture::open(&path).expect("the capture reads");
    let id = c.sites.iter().find(|s| s.name == "whole_program").expect("site").id;
    assert_eq!(c.running, vec![id], "the one call of whole_program was open at the end");
    let out = Command::new(env!("CARGO_BIN_EXE_gpuspan")).arg("report").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let running = text.lines().find(|l| l.starts_with("Still running at shutdown")).unwrap_or_else(|| panic!("{text}"));
    assert!(running.ends_with(": whole_program"), "{running}");
    let never = text.lines().find(|l| l.starts_with("Never reached")).unwrap_or_default();
    assert!(!never.contains("whole_program"), "{never}");
    let _ = std::fs::remove_dir_all(&dir);
}
