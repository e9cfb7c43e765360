//! Faults and hostile environments (issue 17): each case runs `fault_child` (tests/src/bin) in a
//! child process, in the setting an adversarial user or a broken machine gives it, with a time
//! limit (a hang is a failure: the child is killed and the test fails), and checks the exit
//! status, the messages, the files and, where cheap, the memory figures.
//!
//! Written for a busy 2-core CI box: time limits are generous and nothing asserts on wall time.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longer than any case needs on a loaded machine; reaching it means the child hung.
const LIMIT: Duration = Duration::from_secs(120);

/// A private scratch directory for one test.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("gpuspan-faults-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `fault_child <case> <n>` with a clean gpuspan environment: no `GPUSPAN_*` or `OTEL_*` from
/// the test's own environment, the runtime directory inside `scratch`.
fn child(case: &str, n: u64, scratch: &Scratch) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fault_child"));
    cmd.arg(case).arg(n.to_string());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("GPUSPAN") || k.starts_with("OTEL_") || k == "TRACEPARENT" {
            cmd.env_remove(&*k);
        }
    }
    let runtime = scratch.path("runtime");
    let _ = std::fs::create_dir(&runtime);
    let _ = std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700));
    cmd.env("XDG_RUNTIME_DIR", runtime).env("TMPDIR", scratch.path("")).env("RUST_BACKTRACE", "0");
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn read_all(r: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let mut bytes = Vec::new();
            let _ = r.read_to_end(&mut bytes);
            s = String::from_utf8_lossy(&bytes).into_owned();
        }
        let _ = tx.send(s);
    });
    rx
}

/// Waits for `child` within [`LIMIT`]; a child still running then is killed and the test fails.
fn wait(mut child: Child, stdout: mpsc::Receiver<String>, stderr: mpsc::Receiver<String>) -> Run {
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < LIMIT => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let err = stderr.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
                panic!("the child hung (killed after {LIMIT:?}); its stderr:\n{err}");
            }
            Err(e) => panic!("waiting for the child: {e}"),
        }
    };
    let stdout = stdout.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    let stderr = stderr.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    Run { status, stdout, stderr }
}

fn run(mut cmd: Command) -> Run {
    let mut child = cmd.spawn().expect("start fault_child");
    let (out, err) = (read_all(child.stdout.take()), read_all(child.stderr.take()));
    wait(child, out, err)
}

/// Lines of `text` containing `needle`, outside the summary's recap of notes.
fn said(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle) && !l.starts_with("note: ")).count()
}

/// The timeline at `path`, parsed; the names of its host events.
fn timeline(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("timeline {}: {e}", path.display()));
    let json: serde_json::Value = serde_json::from_slice(&bytes).expect("the timeline is valid JSON");
    json["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == 1)
        .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_closed_stderr_does_not_kill_the_program() {
    let s = Scratch::new("closed-stderr");
    let trace = s.path("t.json");
    let mut cmd = child("calls", 10, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_THRESHOLD_US", "nonsense").stderr(Stdio::null());
    // SAFETY: only close(2), which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(2);
            Ok(())
        });
    }
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stdout);
    assert!(r.stdout.contains("after the guard"), "{}", r.stdout);
    assert_eq!(timeline(&trace).len(), 10);
}

#[test]
fn a_full_stderr_does_not_kill_the_program() {
    let s = Scratch::new("full-stderr");
    let trace = s.path("t.json");
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let mut cmd = child("calls", 10, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_TRACE_ALL", "nonsense").stderr(full);
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stdout);
    assert!(r.stdout.contains("after the guard"), "{}", r.stdout);
    assert_eq!(timeline(&trace).len(), 10);
}

#[test]
fn a_fifo_at_the_trace_path_is_refused_without_hanging() {
    let s = Scratch::new("fifo");
    let fifo = s.path("t.json");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &fifo);
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "is a FIFO; gpuspan writes only regular files"), 1, "{}", r.stderr);
    assert!(r.stdout.contains("after the guard"));
    let still = std::fs::symlink_metadata(&fifo).expect("the FIFO is still there");
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&still.file_type()));
}

#[test]
fn a_device_at_the_trace_path_is_refused() {
    let s = Scratch::new("device");
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", "/dev/null");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "/dev/null is a device"), 1, "{}", r.stderr);
}

#[test]
fn a_link_at_the_trace_path_leaves_its_target_alone() {
    let s = Scratch::new("link");
    let target = s.path("precious");
    std::fs::write(&target, "keep me").expect("target");
    let link = s.path("t.json");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &link);
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "is a symbolic link; gpuspan does not write through links"), 1, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&target).expect("target"), "keep me");
    assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
}

#[test]
fn the_default_timeline_goes_to_a_private_directory() {
    let s = Scratch::new("default-dir");
    let r = run(child("calls", 5, &s));
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let dir = s.path("runtime").join("gpuspan");
    let mode = std::fs::metadata(&dir).expect("runtime dir").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).expect("list").map(|e| e.expect("entry").path()).collect();
    assert_eq!(files.len(), 1, "the timeline and no temporary file: {files:?}");
    assert!(r.stderr.contains(&format!("written to {}", files[0].display())), "{}", r.stderr);
    assert_eq!(timeline(&files[0]).len(), 5);

    // Without a runtime directory: a private `gpuspan-<uid>` in TMPDIR; one planted there by
    // someone else (here: a link to a directory of theirs) is refused, and nothing is written.
    let victim = s.path("victim");
    std::fs::create_dir(&victim).expect("victim");
    // SAFETY: geteuid cannot fail.
    let planted = s.path(&format!("gpuspan-{}", unsafe { libc::geteuid() }));
    std::os::unix::fs::symlink(&victim, &planted).expect("plant");
    let mut cmd = child("calls", 5, &s);
    cmd.env_remove("XDG_RUNTIME_DIR");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "no timeline: there is no private directory"), 1, "{}", r.stderr);
    assert_eq!(std::fs::read_dir(&victim).expect("victim").count(), 0, "nothing written through the link");
    std::fs::remove_file(&planted).expect("unplant");
    let mut cmd = child("calls", 5, &s);
    cmd.env_remove("XDG_RUNTIME_DIR");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let mode = std::fs::metadata(&planted).expect("made").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "created private");
    assert_eq!(std::fs::read_dir(&planted).expect("list").count(), 1);
}

/// Starts `case`, waits for its "ready", sends `signal`, and waits for the end.
fn signalled(mut cmd: Command, signal: libc::c_int) -> Run {
    let mut child = cmd.spawn().expect("start fault_child");
    let err = read_all(child.stderr.take());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in lines.by_ref().map_while(Result::ok) {
            if line == "ready" {
                let _ = tx.send(None);
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        let _ = tx.send(Some(seen));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(None) => {}
        other => {
            let _ = child.kill();
            panic!("the child did not get ready: {other:?}");
        }
    }
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: signals our own child, which has not been waited for yet.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let out = {
        let (tx2, rx2) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx2.send(rx.recv().ok().flatten().unwrap_or_default());
        });
        rx2
    };
    wait(child, out, err)
}

/// The capture at `path`: finished (its end record written) and its records of `site`.
fn capture_records(path: &Path, site: &str) -> usize {
    let c = gpuspan_capture::Capture::open(path).unwrap_or_else(|e| panic!("capture {}: {e}", path.display()));
    assert!(c.end.is_some(), "the capture is finished (its end record written)");
    c.records.iter().filter(|r| c.site(r.site).is_some_and(|s| s.name == site)).count()
}

/// SIGINT or SIGTERM under load, by default: summary, timeline and capture complete, then the
/// process ends by the signal (its status is the signal's, as without gpuspan).
fn a_signal_by_default_keeps_the_run(signal: libc::c_int, name: &str) {
    let s = Scratch::new(name);
    let (trace, capture) = (s.path("t.json"), s.path("c.gpuspan"));
    let mut cmd = child("busy", 50, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_CAPTURE", &capture);
    let r = signalled(cmd, signal);
    assert_eq!(r.status.signal(), Some(signal), "{:?}\n{}", r.status, r.stderr);
    assert!(!r.stdout.contains("not killed"));
    assert_eq!(said(&r.stderr, "gpuspan summary"), 1, "{}", r.stderr);
    assert_eq!(said(&r.stderr, "timeline with 50 calls written"), 1, "{}", r.stderr);
    assert_eq!(timeline(&trace).len(), 50);
    assert_eq!(capture_records(&capture, "step"), 50);
}

#[test]
fn sigint_under_load_keeps_summary_timeline_and_capture_and_ends_by_sigint() {
    a_signal_by_default_keeps_the_run(libc::SIGINT, "sigint");
}

#[test]
fn sigterm_under_load_keeps_summary_timeline_and_capture_and_ends_by_sigterm() {
    a_signal_by_default_keeps_the_run(libc::SIGTERM, "sigterm");
}

#[test]
fn sigterm_with_the_flush_off_is_left_alone() {
    let s = Scratch::new("sigterm-off");
    let trace = s.path("t.json");
    let mut cmd = child("wait", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_ON_SIGNAL", "off");
    let r = signalled(cmd, libc::SIGTERM);
    assert_eq!(r.status.signal(), Some(libc::SIGTERM), "{:?}", r.status);
    assert!(!trace.exists(), "no handler, no flush: the signal ends the program as before");
}

/// A program that handles the signal itself (installed before or after `init`, through
/// signal-hook's registry as `tokio::signal` does) ends when it decides, and its own end writes
/// everything, the calls made after the signal included.
fn the_programs_own_handler_decides(case: &str) {
    let s = Scratch::new(case);
    let trace = s.path("t.json");
    let mut cmd = child(case, 10, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace);
    let r = signalled(cmd, libc::SIGINT);
    assert!(r.status.success(), "the program's handler, not gpuspan, decided: {:?}\n{}", r.status, r.stderr);
    assert!(r.stdout.contains("ended by the program"), "{}", r.stdout);
    assert_eq!(said(&r.stderr, "gpuspan summary"), 1, "{}", r.stderr);
    assert_eq!(timeline(&trace).len(), 20, "the calls after the signal are written too");
}

#[test]
fn a_handler_installed_before_init_is_left_to_decide() {
    the_programs_own_handler_decides("own-handler-before");
}

#[test]
fn a_handler_installed_after_init_is_left_to_decide() {
    the_programs_own_handler_decides("own-handler-after");
}

#[test]
fn process_exit_with_a_live_guard_writes_the_run_through_the_exit_hook() {
    let s = Scratch::new("exit-live");
    let (trace, capture) = (s.path("t.json"), s.path("c.gpuspan"));
    let mut cmd = child("exit-live", 20, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_CAPTURE", &capture);
    let r = run(cmd);
    assert_eq!(r.status.code(), Some(3), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "gpuspan summary"), 1, "{}", r.stderr);
    assert_eq!(timeline(&trace).len(), 20);
    assert_eq!(capture_records(&capture, "step"), 20);
}

#[test]
fn process_exit_after_shutdown_keeps_the_summary_the_timeline_and_the_status() {
    let s = Scratch::new("exit");
    let trace = s.path("t.json");
    let mut cmd = child("exit", 20, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace);
    let r = run(cmd);
    assert_eq!(r.status.code(), Some(3), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(timeline(&trace).len(), 20);
    assert_eq!(said(&r.stderr, "gpuspan summary"), 1, "called twice, ended once:\n{}", r.stderr);
}

#[test]
fn the_guard_does_nothing_after_an_explicit_shutdown() {
    let s = Scratch::new("shutdown-drop");
    let trace = s.path("t.json");
    let mut cmd = child("shutdown-then-drop", 7, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace);
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "gpuspan summary"), 1, "{}", r.stderr);
    assert_eq!(said(&r.stderr, "timeline with 7 calls written"), 1, "{}", r.stderr);
    assert_eq!(timeline(&trace).len(), 7, "the call after shutdown is not written");
}

#[test]
fn invalid_environment_values_are_said_once_each_and_the_program_runs() {
    let s = Scratch::new("env");
    let trace = s.path("t.json");
    let bad = [
        ("GPUSPAN", "maybe"),
        ("GPUSPAN_SUMMARY", "perhaps"),
        ("GPUSPAN_TRACE_ALL", "2"),
        ("GPUSPAN_THRESHOLD_US", "soon"),
        ("GPUSPAN_ON_SIGNAL", "sometimes"),
        ("GPUSPAN_TRACE_FORMAT", "xml"),
    ];
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).envs(bad);
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    for (k, v) in bad {
        let shown = format!("{k}=\"{v}\"");
        assert_eq!(said(&r.stderr, &shown), 1, "{shown} said once:\n{}", r.stderr);
        let line = r.stderr.lines().find(|l| l.contains(&shown)).unwrap_or_default();
        assert!(line.contains("using"), "names the default used: {line}");
    }
    // The defaults applied: on, with a summary, the sites' own sampling.
    assert_eq!(timeline(&trace).len(), 5);
    assert_eq!(said(&r.stderr, "gpuspan summary"), 1);
}

/// `GPUSPAN_TRACE_FORMAT=perfetto` (in any case) without a path: the default path takes
/// Perfetto's extension and holds a native trace (a `Trace.packet` field first), not JSON.
#[test]
fn the_perfetto_format_asked_by_the_environment_names_the_default_file_after_it() {
    let s = Scratch::new("format");
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FORMAT", "Perfetto");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let line = r.stderr.lines().find(|l| l.contains("timeline with 5 calls written to")).unwrap_or_default();
    let path = line.split(" written to ").nth(1).and_then(|p| p.split(" (").next()).unwrap_or_default();
    assert!(path.ends_with(".pftrace"), "{}", r.stderr);
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.first(), Some(&0x0a), "a native trace starts with a packet: {:?}", &bytes[..bytes.len().min(16)]);
}

#[test]
fn switches_take_one_vocabulary_in_any_case() {
    let s = Scratch::new("vocabulary");
    let trace = s.path("t.json");
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_SUMMARY", "No").env("GPUSPAN_TRACE_ALL", "YES");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "gpuspan summary"), 0, "{}", r.stderr);
    assert!(!r.stderr.contains("is not on/off"), "{}", r.stderr);
    assert_eq!(timeline(&trace).len(), 5);
}

#[test]
fn gpuspan_off_writes_no_timeline_and_says_it_was_off() {
    let s = Scratch::new("off");
    let trace = s.path("t.json");
    let mut cmd = child("calls", 5, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN", "Off");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(!trace.exists(), "no empty timeline");
    assert!(r.stdout.contains("trace file: None"), "{}", r.stdout);
    assert!(!r.stderr.contains("timeline"), "{}", r.stderr);
    assert_eq!(said(&r.stderr, "gpuspan was off"), 1, "{}", r.stderr);
}

#[test]
fn annotated_calls_in_thread_local_destructors_do_not_abort() {
    let s = Scratch::new("tls");
    let r = run(child("tls", 0, &s));
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(r.stdout.contains("destructor call done"), "{}", r.stdout);
    assert!(r.stdout.contains("main ends"), "{}", r.stdout);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn long_and_control_character_names_are_escaped_and_cut_in_the_table_and_whole_in_the_file() {
    let s = Scratch::new("names");
    let trace = s.path("t.json");
    let mut cmd = child("names", 3, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace);
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(!r.stderr.contains(['\u{1b}', '\u{7}', '\t']), "raw control characters reached stderr:\n{}", r.stderr);
    let row = r.stderr.lines().find(|l| l.starts_with("a\\u{1b}[31mred")).expect("the site's row");
    assert!(row.contains("\\n") && row.contains('…'), "{row}");
    assert!(row.chars().count() < 200, "the name is cut to its column: {row}");
    let names = timeline(&trace);
    assert_eq!(names.len(), 3);
    assert!(names[0].starts_with("a\u{1b}[31mred\u{1b}[0m name\nwith") && names[0].ends_with(" END"), "{:?}", names[0]);
}

/// `n: <value> KiB` after `label` in `text`.
fn kib(text: &str, label: &str) -> u64 {
    let rest = &text[text.find(label).unwrap_or_else(|| panic!("{label:?} in {text}")) + label.len()..];
    rest.split_whitespace().next().and_then(|v| v.parse().ok()).expect("a number of KiB")
}

#[test]
fn memory_stays_flat_under_thread_churn() {
    let s = Scratch::new("threads");
    let threads = 20_000;
    let r = run(child("threads", threads, &s));
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let (before, after) = (kib(&r.stdout, "rss before:"), kib(&r.stdout, "threads:"));
    assert!(r.stdout.contains(&format!("calls counted: {}", threads + 1_000)), "{}", r.stdout);
    // Before per-thread shards were freed: +4 KiB per thread, 78 MiB here.
    assert!(after < before + 16 * 1024, "RSS grew from {before} to {after} KiB over {threads} threads");
}

#[test]
fn a_large_timeline_is_written_in_bounded_memory() {
    let s = Scratch::new("large");
    let trace = s.path("t.json");
    let mut cmd = child("timeline", 200_000, &s);
    cmd.env("GPUSPAN_TRACE_FILE", &trace).env("GPUSPAN_SUMMARY", "off");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let (before, peak) = (kib(&r.stdout, "rss before writing:"), kib(&r.stdout, "peak:"));
    // Before streaming: the document was built in memory first, ~860 MiB over the records.
    assert!(peak < before + 64 * 1024, "peak {peak} KiB while writing, {before} KiB before");
    assert_eq!(timeline(&trace).len(), 200_000);
}

/// OTLP to a port nobody listens on, stderr closed, no other output: the program runs to its end.
#[cfg(feature = "otlp")]
#[test]
fn otlp_to_a_closed_port_with_stderr_closed_ends_normally() {
    let s = Scratch::new("otlp-closed");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut cmd = child("calls", 20, &s);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env("OTEL_METRIC_EXPORT_INTERVAL", "0")
        .env("GPUSPAN_TRACE_FILE", "off")
        .env("GPUSPAN_SUMMARY", "off")
        .stderr(Stdio::null());
    // SAFETY: only close(2), which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(2);
            Ok(())
        });
    }
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stdout);
    assert!(r.stdout.contains("after the guard"), "{}", r.stdout);
}

/// With an export running, scopes read OpenTelemetry's thread-local context: an annotated call
/// in a thread-local destructor must not touch it after its destruction.
#[cfg(feature = "otlp")]
#[test]
fn annotated_calls_in_thread_local_destructors_with_otlp_do_not_abort() {
    let s = Scratch::new("otlp-tls");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut cmd = child("tls", 0, &s);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{port}"));
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(r.stdout.contains("destructor call done"), "{}", r.stdout);
}

/// `OTEL_METRIC_EXPORT_INTERVAL=0` is raised to the minimum, with one message.
#[cfg(feature = "otlp")]
#[test]
fn a_zero_metric_interval_is_raised_with_a_message() {
    let s = Scratch::new("otlp-interval");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut cmd = child("calls", 5, &s);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env("OTEL_METRIC_EXPORT_INTERVAL", "0")
        .env("GPUSPAN_TRACE_FILE", "off");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(said(&r.stderr, "OTEL_METRIC_EXPORT_INTERVAL=0 is below the minimum of 100 ms"), 1, "{}", r.stderr);
}

/// A `hold` child started and ready: its calls made, its end waiting for its stdin to close.
struct Held {
    child: Child,
    /// Each line of its stdout as it comes.
    lines: mpsc::Receiver<String>,
    out: mpsc::Receiver<String>,
    err: mpsc::Receiver<String>,
}

impl Held {
    /// Waits for the line starting with `start`.
    fn wait_for(&mut self, start: &str) -> String {
        loop {
            match self.lines.recv_timeout(LIMIT) {
                Ok(line) if line.starts_with(start) => return line,
                Ok(_) => {}
                Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    let err = self.err.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
                    panic!("the child never said {start:?}: {err}");
                }
            }
        }
    }
}

/// Starts `cmd` (a `hold` case) and waits for its "ready".
fn hold(mut cmd: Command) -> Held {
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("start fault_child");
    let err = read_all(child.stderr.take());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (line_tx, each) = mpsc::channel();
    let (tx, out) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in lines.by_ref().map_while(Result::ok) {
            let _ = line_tx.send(line.clone());
            seen.push_str(&line);
            seen.push('\n');
        }
        let _ = tx.send(seen);
    });
    let mut held = Held { child, lines: each, out, err };
    held.wait_for("ready");
    held
}

/// Closes a held child's stdin, so that it ends, and waits for it.
fn release(mut held: Held) -> Run {
    drop(held.child.stdin.take());
    wait(held.child, held.out, held.err)
}

/// The path a run's end-of-run line says its capture was written to.
fn capture_written(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("gpuspan: capture with"))
        .unwrap_or_else(|| panic!("no capture line in:\n{stderr}"));
    let rest = &line[line.find(" written to ").expect("written to") + " written to ".len()..];
    PathBuf::from(rest.split(" (read it with").next().expect("path"))
}

/// Every rank of a job launched with one environment shares `GPUSPAN_CAPTURE`: each process
/// must leave a whole run, in a file its end-of-run line names, whichever ends first.
#[test]
fn processes_sharing_one_capture_path_each_leave_a_whole_readable_run() {
    for first_ends_last in [true, false] {
        let s = Scratch::new(if first_ends_last { "shared-capture-a" } else { "shared-capture-b" });
        let path = s.path("run.gpuspan");
        let cmd = |n| {
            let mut cmd = child("hold", n, &s);
            cmd.env("GPUSPAN_CAPTURE", &path).env("GPUSPAN_TRACE_FILE", "off");
            cmd
        };
        let first = hold(cmd(3_000));
        let first_pid = first.child.id();
        let second = hold(cmd(1_000));
        let second_pid = second.child.id();
        let (first, second) = if first_ends_last {
            let second = release(second);
            (release(first), second)
        } else {
            let first = release(first);
            (first, release(second))
        };
        let mut paths = Vec::new();
        for (r, n, pid) in [(&first, 3_000, first_pid), (&second, 1_000, second_pid)] {
            assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
            assert!(r.stdout.contains("after the guard"), "{}", r.stdout);
            let written = capture_written(&r.stderr);
            assert!(r.stderr.contains(&format!("capture with {n} calls written to")), "{}", r.stderr);
            let c = gpuspan_capture::Capture::open(&written)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", written.display(), r.stderr));
            assert_eq!(c.header.pid, pid, "{} is the run of the process that named it", written.display());
            assert_eq!(c.records.len(), n, "{}", written.display());
            assert!(c.truncation.is_none() && c.end.is_some(), "{} is whole", written.display());
            paths.push(written);
        }
        assert_eq!(paths[0], path, "the first process keeps the path it was given");
        assert_ne!(paths[0], paths[1], "two processes, two files");
        assert_eq!(paths[1], s.path(&format!("run.{second_pid}.gpuspan")), "the second is named by its pid");
    }
}

/// Under `ulimit -f`, a write past the limit raises SIGXFSZ, whose default action kills the
/// process: gpuspan's files stop at the limit with one message, and the count they state is
/// exactly what can be read back.
#[test]
fn a_file_size_limit_cuts_the_capture_with_one_message_and_an_exact_count() {
    const LIMIT_BYTES: u64 = 200 * 1024;
    let s = Scratch::new("fsize");
    let path = s.path("run.gpuspan");
    let trace = s.path("t.json");
    let calls = 50_000;
    let mut cmd = child("calls", calls, &s);
    cmd.env("GPUSPAN_CAPTURE", &path).env("GPUSPAN_TRACE_FILE", &trace);
    // SAFETY: only setrlimit(2), a plain system call, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: LIMIT_BYTES as libc::rlim_t, rlim_max: LIMIT_BYTES as libc::rlim_t };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(r.stdout.contains("after the guard"), "{}", r.stdout);
    assert_eq!(said(&r.stderr, "file-size limit"), 2, "one line for the capture, one for the timeline:\n{}", r.stderr);
    let line = r.stderr.lines().find(|l| l.contains("the capture at")).expect("the capture's line");
    let number = |after: &str| -> u64 {
        let rest = &line[line.find(after).unwrap_or_else(|| panic!("{after:?} in {line}")) + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|v| v.parse().ok()).expect("a count")
    };
    let (written, dropped) = (number("stopped after "), number("calls ("));
    assert!(line.contains("not written"), "{line}");
    assert_eq!(written + dropped, calls, "every call written or counted as dropped: {line}");
    assert!(written > 0 && dropped > 0, "{line}");
    assert!(std::fs::metadata(&path).expect("the capture").len() <= LIMIT_BYTES);
    let c = gpuspan_capture::Capture::open(&path).expect("the cut capture reads");
    assert_eq!(c.records.len() as u64, written, "the stated count is the readable count");
    assert!(!trace.exists(), "no half timeline");
}

/// The live feed's socket of the child whose runtime directory is in `s`.
fn live_socket(s: &Scratch) -> PathBuf {
    let dir = s.path("runtime").join("gpuspan");
    std::fs::read_dir(&dir)
        .expect("the private directory")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().ends_with(".live.sock"))
        .expect("the live socket")
}

/// One snapshot asked on a new connection; `None` when refused or unanswered within a second.
fn snapshot(sock: &Path) -> Option<serde_json::Value> {
    use std::io::Write;
    let mut c = std::os::unix::net::UnixStream::connect(sock).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    c.write_all(b"snapshot\n").ok()?;
    let mut line = String::new();
    BufReader::new(c).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

/// Connections that never send must not lock others out: they are closed after a while, and
/// counted, and a client that asks is served.
#[test]
fn silent_connections_do_not_lock_the_live_feed() {
    let s = Scratch::new("live-silent");
    let mut cmd = child("hold", 5, &s);
    cmd.env("GPUSPAN_LIVE", "1").env("GPUSPAN_TRACE_FILE", "off");
    let held = hold(cmd);
    let sock = live_socket(&s);
    let silent: Vec<std::os::unix::net::UnixStream> =
        (0..20).map(|_| std::os::unix::net::UnixStream::connect(&sock).expect("connect")).collect();
    let deadline = Instant::now() + LIMIT / 4;
    let answer = loop {
        if let Some(answer) = snapshot(&sock) {
            break answer;
        }
        assert!(Instant::now() < deadline, "no answer while 20 silent connections are open");
        std::thread::sleep(Duration::from_millis(200));
    };
    let feed = &answer["feed"];
    assert!(feed["dropped_idle"].as_u64().unwrap_or(0) >= 1, "the silent ones that held places are counted: {feed}");
    let closed = silent
        .iter()
        .filter(|c| {
            c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
            matches!((&mut &**c).read(&mut [0u8; 1]), Ok(0))
        })
        .count();
    assert_eq!(closed, 20, "every silent connection is closed by the feed");
    let r = release(held);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
}

/// A connection waiting while the process has no descriptor left: the feed backs off instead
/// of retrying the failing accept in a loop, and serves the connection it has.
#[test]
fn the_live_feed_backs_off_at_the_descriptor_limit() {
    use std::io::Write;
    let s = Scratch::new("live-fds");
    let mut cmd = child("live-fds", 5, &s);
    cmd.env("GPUSPAN_LIVE", "1").env("GPUSPAN_TRACE_FILE", "off");
    // SAFETY: only setrlimit(2), a plain system call, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut held = hold(cmd);
    let sock = live_socket(&s);
    let mut kept = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
    kept.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut reader = BufReader::new(kept.try_clone().expect("clone"));
    let mut ask = || {
        kept.write_all(b"snapshot\n").expect("ask");
        let mut line = String::new();
        reader.read_line(&mut line).expect("answer");
        serde_json::from_str::<serde_json::Value>(&line).expect("a snapshot")
    };
    assert_eq!(ask()["feed"]["clients"], 1);
    held.child.stdin.as_mut().expect("stdin").write_all(b"fill\n").expect("fill");
    held.wait_for("full after");
    let _pending = std::os::unix::net::UnixStream::connect(&sock).expect("connect while full");
    let waited = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let feed = ask()["feed"].clone();
    let tries = feed["accept_failed"].as_u64().expect("the failed accepts are counted");
    let seconds = waited.elapsed().as_secs_f64();
    // Backing off 100 ms at least between tries: at most ten a second (spinning: millions).
    assert!(tries >= 1, "the failing accept was tried: {feed}");
    assert!((tries as f64) <= seconds * 10.0 + 2.0, "{tries} failed accepts in {seconds:.1} s: {feed}");
    let r = release(held);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
}

/// The sampling a capture's header states is the one in force, read from the environment in one
/// place (the sampling settings), not again for the header.
#[test]
fn a_captures_header_states_the_environments_sampling() {
    let s = Scratch::new("header-sampling");
    let path = s.path("run.gpuspan");
    let mut cmd = child("calls", 3, &s);
    cmd.env("GPUSPAN_CAPTURE", &path)
        .env("GPUSPAN_TRACE_FILE", "off")
        .env("GPUSPAN_THRESHOLD_US", "7")
        .env("GPUSPAN_TRACE_ALL", "on");
    let r = run(cmd);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let c = gpuspan_capture::Capture::open(&path).unwrap_or_else(|e| panic!("capture {}: {e}", path.display()));
    assert_eq!((c.header.threshold_us, c.header.trace_all), (7, true), "{:?}", c.header);
}
