//! The command given a path that is not a regular file (issue 42): a named pipe with no writer
//! (whose open blocks until a writer comes), a character device, a directory. Each command that
//! reads a capture path ends with status 2 and one line on stderr saying what the path is,
//! instead of waiting forever.
#![cfg(unix)]

mod common;

use common::{save, scratch};
use gpuspan_capture::{Capture, End, Header};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far longer than any of these commands needs to fail; a command still running then is hung
/// (before the fix each waited forever on the FIFO's open).
const HUNG_AFTER: Duration = Duration::from_secs(60);

/// A named pipe in the scratch folder that nothing writes to.
fn fifo(name: &str) -> PathBuf {
    let path = scratch(name);
    let _ = std::fs::remove_file(&path);
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    path
}

/// Runs the binary with `args`, killing it if it is still running after [`HUNG_AFTER`]:
/// (status code, stderr), or `None` when it hung.
fn run_or_kill(args: &[&Path]) -> Option<(i32, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuspan"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > HUNG_AFTER {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Some((out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// Every command that reads capture paths, with `bad` in each capture position and a good
/// capture in the others.
fn commands(bad: &Path, good: &Path, out: &Path) -> Vec<Vec<PathBuf>> {
    let p = |s: &str| PathBuf::from(s);
    let (b, g, o) = (bad.to_owned(), good.to_owned(), out.to_owned());
    vec![
        vec![p("report"), b.clone()],
        vec![p("report"), g.clone(), b.clone()],
        vec![p("flamegraph"), b.clone()],
        vec![p("timeline"), b.clone(), p("-o"), o.clone()],
        vec![p("timeline"), b.clone(), p("--svg"), p("-o"), o.clone()],
        vec![p("diff"), b.clone(), g.clone()],
        vec![p("diff"), g.clone(), b.clone()],
        vec![p("merge"), g.clone(), b.clone(), p("-o"), o.clone()],
        vec![p("ranks"), g.clone(), b.clone()],
        vec![p("export"), b.clone(), p("-o"), o.with_extension("sqlite")],
        vec![p("export"), b, p("--to"), p("parquet"), p("-o"), o.with_extension("parquet")],
    ]
}

/// Runs every command on `bad` at once (each waits at most [`HUNG_AFTER`]) and checks that each
/// failed with one line naming `bad` and containing `says`.
fn each_command_refuses(bad: &Path, says: &str) {
    let mut c = Capture::new(Header::new("good", 1));
    c.end = Some(End::default());
    let good = save(&c, &format!("good-{}.gpuspan", bad.file_name().unwrap().to_string_lossy()));
    let out = scratch(&format!("out-{}", bad.file_name().unwrap().to_string_lossy()));
    let commands = commands(bad, &good, &out);
    let results: Vec<_> = std::thread::scope(|s| {
        let running: Vec<_> = commands
            .iter()
            .map(|args| s.spawn(move || run_or_kill(&args.iter().map(PathBuf::as_path).collect::<Vec<_>>())))
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (args, result) in commands.iter().zip(results) {
        let shown: Vec<_> = args.iter().map(|a| a.display().to_string()).collect();
        let Some((code, stderr)) = result else {
            panic!("`gpuspan {}` was still running after {HUNG_AFTER:?}", shown.join(" "));
        };
        assert_eq!(code, 2, "`gpuspan {}`: {stderr}", shown.join(" "));
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(&bad.display().to_string()), "names the path: {stderr}");
        assert!(stderr.contains(says), "`gpuspan {}` says {says:?}: {stderr}", shown.join(" "));
    }
}

#[test]
fn a_named_pipe_without_a_writer_is_refused_by_every_command_at_once() {
    each_command_refuses(&fifo("nobody-writes.gpuspan"), "it is a named pipe (FIFO), not a capture file");
}

#[test]
fn a_character_device_is_refused_without_reading_it() {
    // /dev/null would read as empty and /dev/zero as not a capture; a terminal would block.
    // Each is refused for what it is, before any read.
    for dev in ["/dev/null", "/dev/zero"] {
        each_command_refuses(Path::new(dev), "it is a character device, not a capture file");
    }
}

#[test]
fn a_directory_given_to_a_one_capture_command_says_so() {
    let dir = scratch("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let (code, stderr) = run_or_kill(&[Path::new("timeline"), &dir, Path::new("-o"), &scratch("dir.json")]).unwrap();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("it is a directory, not a capture file"), "{stderr}");
}
