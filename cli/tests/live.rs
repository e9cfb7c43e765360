//! The live feed end to end: the `live_demo` example on a real (software) GPU with
//! `GPUSPAN_LIVE=1`, and the `gpuspan top` command attached to it, inside tmux for the dashboard.
//!
//! Needs the example built first (scripts/test does it):
//! `cargo build -p gpuspan-examples --bin live_demo`; and tmux (scripts/test installs it).
//! Outside CI a machine without tmux or a GPU adapter skips, saying so; in CI (`CI=true`) that
//! is a failure.
#![cfg(unix)]

use gpuspan_capture::live::Snapshot;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GPUSPAN: &str = env!("CARGO_BIN_EXE_gpuspan");

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Skips (outside CI) or fails (in CI) with `why`.
fn skip(why: &str) -> bool {
    assert!(!in_ci(), "{why}");
    println!("skipped: {why}");
    true
}

/// target/<profile>/live_demo, next to this test's own deps/ directory.
fn demo_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("test binary in target/<profile>/deps");
    let bin = profile_dir.join("live_demo");
    assert!(
        bin.exists(),
        "{} is missing: build it first with `cargo build -p gpuspan-examples --bin live_demo`",
        bin.display()
    );
    bin
}

/// A directory of this test's, mode 0700, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("gpuspan-live-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One run of live_demo with the live feed on; killed if still running when dropped.
struct Demo {
    child: Child,
    stderr: PathBuf,
    socket: PathBuf,
}

impl Demo {
    /// Starts it in `runtime_dir` for `seconds` and waits for its socket; `None` when there is
    /// no GPU adapter (outside CI).
    fn start(runtime_dir: &Path, seconds: f64, tag: &str) -> Option<Demo> {
        let stderr = runtime_dir.join(format!("{tag}.stderr"));
        let mut cmd = Command::new(demo_binary());
        for (k, _) in std::env::vars() {
            if k.starts_with("GPUSPAN") || k.starts_with("OTEL_") {
                cmd.env_remove(k);
            }
        }
        let child = cmd
            .args(["--seconds", &seconds.to_string()])
            .env("XDG_RUNTIME_DIR", runtime_dir)
            .env("GPUSPAN_LIVE", "1")
            .env("GPUSPAN_TRACE_FILE", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("live_demo starts");
        let socket = runtime_dir.join("gpuspan").join(format!("live_demo-{}.live.sock", child.id()));
        let mut demo = Demo { child, stderr, socket };
        let deadline = Instant::now() + Duration::from_secs(90);
        while !demo.socket.exists() {
            if let Ok(Some(status)) = demo.child.try_wait() {
                let err = std::fs::read_to_string(&demo.stderr).unwrap_or_default();
                if err.contains("no GPU adapter") && skip("no GPU adapter (scripts/test installs lavapipe)") {
                    return None;
                }
                panic!("live_demo ended ({status}) before its socket appeared:\n{err}");
            }
            assert!(Instant::now() < deadline, "no socket at {} after 90 s", demo.socket.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        // The socket exists from `init`; the first frames come after the GPU is set up.
        let deadline = Instant::now() + Duration::from_secs(90);
        while snapshot(&demo.socket).sites.iter().all(|s| s.calls == 0) {
            assert!(Instant::now() < deadline, "no call finished within 90 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(demo)
    }

    /// Waits (90 s at most) until each of `sites` has finished a call: a host-timed site counts
    /// as soon as it returns, a GPU-timed one only once its timestamps are read back, which on a
    /// busy machine can come well after the first host-timed call.
    fn wait_for_calls(&self, sites: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let snap = snapshot(&self.socket);
            if sites.iter().all(|name| snap.sites.iter().any(|s| s.name == *name && s.calls > 0)) {
                return;
            }
            let seen: Vec<(&str, u64)> = snap.sites.iter().map(|s| (s.name.as_str(), s.calls)).collect();
            assert!(Instant::now() < deadline, "not all of {sites:?} finished a call within 90 s: {seen:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for it to end; its stderr.
    fn finish(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                assert!(status.success(), "live_demo failed ({status}):\n{err}");
                return err;
            }
            assert!(Instant::now() < deadline, "live_demo did not end");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn frames(stderr: &str) -> u64 {
        let line = stderr.lines().find(|l| l.contains(" frames in ")).unwrap_or_else(|| panic!("{stderr}"));
        line.trim_start_matches("live_demo: ").split(' ').next().unwrap().parse().unwrap()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn snapshot(socket: &Path) -> Snapshot {
    let s = UnixStream::connect(socket).unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (&s).write_all(b"snapshot\n").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// tmux on a server of this test's own, so that the user's sessions are never touched.
struct Tmux {
    server: String,
}

impl Tmux {
    fn available() -> bool {
        Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success())
    }

    fn start(command: &str) -> Tmux {
        // One server per test: tests of this file run at once where the machine has the cores,
        // and one's `kill-server` at its end must not end another's session.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = Tmux { server: format!("gpuspan-live-test-{}-{n}", std::process::id()) };
        let ok = t.cmd(&["new-session", "-d", "-s", "top", "-x", "160", "-y", "48", command]).status.success();
        assert!(ok, "tmux new-session failed");
        t
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").args(["-L", &self.server, "-f", "/dev/null"]).args(args).output().expect("tmux runs")
    }

    fn keys(&self, keys: &str) {
        assert!(self.cmd(&["send-keys", "-t", "top", keys]).status.success());
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// The screen once `ready` holds for it (at most 20 s).
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.screen();
            if ready(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "waited 60 s for {what}; the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The site table on a screen: per site, its cells by column title, cut at the header's column
/// starts (ratatui aligns cells under their header).
fn table(screen: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let Some(h) = lines.iter().position(|l| l.iter().collect::<String>().contains("CALLS/S")) else {
        return Vec::new();
    };
    let header = &lines[h];
    let mut starts = Vec::new();
    let mut i = 0;
    while i < header.len() {
        if !header[i].is_whitespace()
            && header[i] != '│'
            && (i == 0 || header[i - 1].is_whitespace() || header[i - 1] == '│')
        {
            let end =
                (i..header.len()).find(|&j| header[j].is_whitespace() || header[j] == '│').unwrap_or(header.len());
            starts.push((i, header[i..end].iter().collect::<String>().trim_end_matches(['▼', '▲']).to_owned()));
            i = end;
        } else {
            i += 1;
        }
    }
    let mut rows = Vec::new();
    for line in &lines[h + 1..] {
        let text: String = line.iter().collect();
        if text.contains('└') || text.trim_matches(['│', ' ']).is_empty() {
            break;
        }
        let mut row = std::collections::BTreeMap::new();
        for (k, (start, name)) in starts.iter().enumerate() {
            let end = starts.get(k + 1).map_or(line.len(), |s| s.0).min(line.len());
            let cell: String = line.get(*start..end).map(|c| c.iter().collect()).unwrap_or_default();
            row.insert(name.clone(), cell.trim_matches(['│', ' ']).to_owned());
        }
        rows.push(row);
    }
    rows
}

fn column(rows: &[std::collections::BTreeMap<String, String>], name: &str) -> Vec<String> {
    rows.iter().map(|r| r.get(name).cloned().unwrap_or_default()).collect()
}

fn calls_of(screen: &str, site: &str) -> u64 {
    let rows = table(screen);
    let row = rows.iter().find(|r| r["SITE"] == site).unwrap_or_else(|| panic!("no {site} row in\n{screen}"));
    row["CALLS"].parse().unwrap_or_else(|_| panic!("CALLS {:?} in\n{screen}", row["CALLS"]))
}

const SITES: [&str; 7] = ["check", "copy_to_staging", "map_and_copy_out", "relax", "saxpy", "square", "upload"];

#[test]
fn top_in_tmux_shows_the_sites_moving_sorts_pauses_and_leaves_a_clean_screen() {
    if !Tmux::available() && skip("no tmux (scripts/test installs it)") {
        return;
    }
    let dir = TempDir::new("tmux");
    let Some(demo) = Demo::start(&dir.0, 60.0, "tmux") else { return };
    let named = ["upload", "saxpy", "square", "copy_to_staging", "map_and_copy_out"];
    demo.wait_for_calls(&named);

    // For scripts: one snapshot as one JSON line, which parses and names every site.
    let out = Command::new(GPUSPAN)
        .args(["top", "--once", "--format", "json"])
        .env("XDG_RUNTIME_DIR", &dir.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["pid"], demo.child.id());
    assert_eq!(json["program"], "live_demo");
    let names: Vec<&str> = json["sites"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    for s in named {
        assert!(names.contains(&s), "{s} in {names:?}");
    }
    let saxpy = json["sites"].as_array().unwrap().iter().find(|s| s["name"] == "saxpy").unwrap();
    assert_eq!(saxpy["sources"][0], "gpu_timestamp");
    assert!(saxpy["window"]["calls_per_s"].as_f64().unwrap() > 0.0, "{saxpy}");
    assert!(json["window_s"].as_f64().unwrap() > 0.0);
    assert_eq!(json["devices"].as_array().unwrap().len(), 0, "no device monitor on lavapipe");

    // The dashboard, in a terminal of 160 × 48.
    let command = format!(
        "env XDG_RUNTIME_DIR={} {GPUSPAN} top {}; echo \"top exited: $?\"; sleep 600",
        dir.0.display(),
        demo.child.id()
    );
    let tmux = Tmux::start(&command);
    let first = tmux.wait_for("every site", |s| SITES.iter().all(|site| table(s).iter().any(|r| r["SITE"] == *site)));
    assert!(first.contains(&format!("[1] live_demo:{}", demo.child.id())), "{first}");
    assert!(first.contains("no device panels: "), "{first}");
    assert!(first.contains("q quit"), "the help line:\n{first}");
    let before = calls_of(&first, "saxpy");
    let second = tmux.wait_for("saxpy's count to move", |s| {
        table(s).iter().any(|r| r["SITE"] == "saxpy") && calls_of(s, "saxpy") > before
    });
    assert!(calls_of(&second, "upload") > calls_of(&first, "upload"), "{first}\n{second}");
    // The planted errors show in the error column of `check` within the window.
    let rows = table(&second);
    let check = rows.iter().find(|r| r["SITE"] == "check").unwrap();
    assert!(check["SOURCE"].starts_with("host"), "{check:?}");

    // Default order: calls/s, biggest first (uploads run twice a frame).
    assert!(second.contains("CALLS/S▼"), "{second}");
    assert_eq!(column(&table(&second), "SITE")[0], "upload", "{second}");
    // S: back one column, to the name, A to Z; r reverses it.
    tmux.keys("S");
    let by_name = tmux.wait_for("sorting by name", |s| s.contains("SITE▲"));
    assert_eq!(column(&table(&by_name), "SITE"), SITES, "{by_name}");
    tmux.keys("r");
    let reversed = tmux.wait_for("reversed", |s| s.contains("SITE▼"));
    let mut z_to_a = SITES.to_vec();
    z_to_a.reverse();
    assert_eq!(column(&table(&reversed), "SITE"), z_to_a, "{reversed}");
    tmux.keys("r");
    // s from the name: calls/s, GPU%, SHARE, P50, P99, BYTES/S, ERR, CALLS: eight steps on.
    for _ in 0..8 {
        tmux.keys("s");
    }
    let by_calls = tmux.wait_for("sorting by calls", |s| s.contains("CALLS▼"));
    let calls: Vec<u64> = column(&table(&by_calls), "CALLS").iter().map(|c| c.parse().unwrap()).collect();
    assert!(calls.windows(2).all(|w| w[0] >= w[1]), "descending: {calls:?}\n{by_calls}");
    assert_eq!(calls.len(), SITES.len());

    // Pause: the numbers stop, and go on after.
    tmux.keys("p");
    let paused = tmux.wait_for("PAUSED", |s| s.contains("PAUSED"));
    std::thread::sleep(Duration::from_millis(2500));
    let still = tmux.screen();
    assert_eq!(calls_of(&paused, "saxpy"), calls_of(&still, "saxpy"), "paused:\n{paused}\n{still}");
    tmux.keys("p");
    tmux.wait_for("resumed counts", |s| !s.contains("PAUSED") && calls_of(s, "saxpy") > calls_of(&still, "saxpy"));

    // Filter: only the sites whose name holds "sa".
    tmux.keys("/");
    tmux.keys("sa");
    tmux.keys("Enter");
    let filtered = tmux.wait_for("the filter", |s| s.contains("filter \"sa\""));
    assert_eq!(column(&table(&filtered), "SITE"), ["saxpy"], "{filtered}");

    // q: the dashboard leaves the alternate screen and exits 0; nothing of it stays behind.
    tmux.keys("q");
    let after = tmux.wait_for("top to exit", |s| s.contains("top exited:"));
    assert!(after.contains("top exited: 0"), "{after}");
    assert!(!after.contains("CALLS/S") && !after.contains("q quit"), "the dashboard left no trace:\n{after}");
    drop(tmux);
    drop(demo);
}

#[test]
fn ctrl_c_leaves_a_clean_screen_too() {
    if !Tmux::available() && skip("no tmux (scripts/test installs it)") {
        return;
    }
    // No program needed: the dashboard waits for one, and Ctrl-C ends it.
    let dir = TempDir::new("ctrlc");
    let command = format!("env XDG_RUNTIME_DIR={} {GPUSPAN} top; echo \"top exited: $?\"; sleep 600", dir.0.display());
    let tmux = Tmux::start(&command);
    tmux.wait_for("the empty dashboard", |s| s.contains("no live gpuspan process"));
    tmux.keys("C-c");
    let after = tmux.wait_for("top to exit", |s| s.contains("top exited:"));
    assert!(after.contains("top exited: 0") && !after.contains("q quit"), "{after}");
}

/// Runs `gpuspan top --once <socket>` as user `nobody`; its exit status and stderr.
fn connect_as_nobody(bin_dir: &Path, socket: &Path) -> (bool, String) {
    // The copy was just written: a child forked meanwhile by a test running in parallel holds it
    // open for writing until its exec, and exec says "text file busy" until then.
    for _ in 0..100 {
        let out = Command::new(bin_dir.join("gpuspan"))
            .args(["top", "--once"])
            .arg(socket)
            .uid(65534)
            .gid(65534)
            .env_remove("XDG_RUNTIME_DIR")
            .output();
        match out {
            Ok(out) => return (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned()),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("gpuspan as nobody: {e}"),
        }
    }
    panic!("gpuspan as nobody: text file busy for 2 s");
}

#[test]
fn the_socket_is_private_and_a_stalled_client_does_not_slow_the_program() {
    let dir = TempDir::new("stall");
    let Some(demo) = Demo::start(&dir.0, 4.0, "baseline-perms") else { return };

    // Permissions: a directory only this user can enter, a socket only this user can open.
    let gdir = dir.0.join("gpuspan");
    let dmeta = std::fs::metadata(&gdir).unwrap();
    let smeta = std::fs::symlink_metadata(&demo.socket).unwrap();
    assert_eq!(dmeta.mode() & 0o777, 0o700, "{}", gdir.display());
    assert_eq!(smeta.mode() & 0o777, 0o600, "{}", demo.socket.display());
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    assert_eq!((dmeta.uid(), smeta.uid()), (me, me));

    // Another user: as root this test can be one. Refused by the directory's mode; and with the
    // modes opened by mistake, refused by the feed itself (SO_PEERCRED), unread.
    if me == 0 {
        let bins = std::env::temp_dir().join(format!("gpuspan-live-bin-{}", std::process::id()));
        std::fs::create_dir_all(&bins).unwrap();
        std::fs::set_permissions(&bins, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(GPUSPAN, bins.join("gpuspan")).unwrap();
        let (ok, err) = connect_as_nobody(&bins, &demo.socket);
        assert!(!ok && err.contains("Permission denied"), "{err}");
        let open = |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        open(&dir.0, 0o755);
        open(&gdir, 0o755);
        open(&demo.socket, 0o666);
        let (ok, err) = connect_as_nobody(&bins, &demo.socket);
        open(&demo.socket, 0o600);
        open(&gdir, 0o700);
        open(&dir.0, 0o700);
        let _ = std::fs::remove_dir_all(&bins);
        assert!(!ok && err.contains("closed the connection"), "{err}");
        assert!(snapshot(&demo.socket).feed.refused_other_user >= 1);
    } else {
        println!("not root: another user's connection is not tried (the modes above refuse it)");
    }
    let baseline_1 = Demo::frames(&demo.finish());

    // A client that asks and never reads, for the whole run; a second one watches the feed.
    let stalled_run = |tag: &str| -> (u64, u64) {
        let demo = Demo::start(&dir.0, 4.0, tag).expect("the GPU was there a moment ago");
        let stalled = UnixStream::connect(&demo.socket).unwrap();
        stalled.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut asked = 0;
        while asked < 100_000 && (&stalled).write_all(b"snapshot\n").is_ok() {
            asked += 1;
        }
        let mut dropped = 0;
        let deadline = Instant::now() + Duration::from_secs(3);
        while dropped == 0 && Instant::now() < deadline {
            dropped = snapshot(&demo.socket).feed.dropped_stalled;
            std::thread::sleep(Duration::from_millis(100));
        }
        let frames = Demo::frames(&demo.finish());
        drop(stalled);
        (frames, dropped)
    };
    let (stalled_1, dropped_1) = stalled_run("stalled-1");
    let baseline_2 = Demo::frames(&Demo::start(&dir.0, 4.0, "baseline-2").unwrap().finish());
    let (stalled_2, dropped_2) = stalled_run("stalled-2");
    println!("frames in 4 s: without a stalled client {baseline_1}, {baseline_2}; with one {stalled_1}, {stalled_2}");
    assert!(dropped_1 >= 1 && dropped_2 >= 1, "the feed closed the stalled client ({dropped_1}, {dropped_2})");
    // A blocked program would complete (almost) nothing; a shared machine makes runs differ.
    let (with, without) = (stalled_1 + stalled_2, baseline_1 + baseline_2);
    assert!(with * 2 >= without, "with a stalled client {with} frames, without {without}");
}

/// `gpuspan` with this test's runtime directory (and temporary directory, the other place it
/// looks), so that it finds this test's programs only.
fn gpuspan_in(runtime_dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(GPUSPAN).args(args).env("XDG_RUNTIME_DIR", runtime_dir).env("TMPDIR", runtime_dir).output();
    out.expect("gpuspan runs")
}

#[test]
fn capture_records_every_call_of_a_running_program_for_its_window_only() {
    let dir = TempDir::new("capture");
    let Some(demo) = Demo::start(&dir.0, 40.0, "capture") else { return };
    demo.wait_for_calls(&["saxpy", "upload", "relax"]);
    let pid = demo.child.id().to_string();
    let file = dir.0.join("window.gpuspan");
    let out = gpuspan_in(&dir.0, &["capture", &pid, "--for", "3s", "-o", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gpuspan capture failed: {err}");
    assert!(err.contains("calls of live_demo"), "{err}");

    // A normal capture: `gpuspan report` reads it and shows the demo's sites called.
    let report = gpuspan_in(&dir.0, &["report", file.to_str().unwrap(), "--format", "json"]);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let calls = |name: &str| {
        json["sites"].as_array().unwrap().iter().find(|s| s["site"] == name).and_then(|s| s["calls"].as_u64())
    };
    for site in ["saxpy", "square", "upload", "copy_to_staging", "map_and_copy_out"] {
        assert!(calls(site).is_some_and(|n| n > 0), "{site} has no calls in the window: {json}");
    }

    // Every record lies in the window, every call of the window is recorded (trace-all), and
    // the window's aggregates count what the records hold.
    let c = gpuspan_capture::Capture::open(&file).unwrap();
    let end = c.end.as_ref().expect("the capture ends");
    assert!(c.header.trace_all && c.header.threshold_us == 0);
    assert_eq!(end.records, c.records.len() as u64);
    let window_ns = end.end_ns - c.header.start_ns;
    assert!((2_900_000_000..60_000_000_000).contains(&window_ns), "window {window_ns} ns");
    for r in &c.records {
        assert!(r.host.start_ns >= c.header.start_ns && r.host.end_ns <= end.end_ns, "{r:?} outside the window");
    }
    let dropped: u64 = end.losses.iter().filter(|l| l.what.contains("capture window")).map(|l| l.count).sum();
    for a in &c.aggregates {
        let recorded = c.records.iter().filter(|r| r.site == a.site).count() as u64;
        assert!(recorded <= a.calls && a.calls <= recorded + dropped, "site {}: {recorded} recorded, {a:?}", a.site);
    }

    // The window is closed: the program is back to what it was, and says it took one.
    let snap = snapshot(&demo.socket);
    assert_eq!((snap.capture, snap.capture_window, snap.feed.captures), (Some(1), None, 1));
}

#[test]
fn a_capture_s_client_that_leaves_ends_the_window_and_a_second_one_meanwhile_is_refused() {
    let dir = TempDir::new("capture-clients");
    let Some(demo) = Demo::start(&dir.0, 60.0, "capture-clients") else { return };
    let ask = |s: &UnixStream, request: &str| -> String {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        writeln!(&*s, "{request}").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line
    };
    let first = UnixStream::connect(&demo.socket).unwrap();
    let start: gpuspan_capture::live::CaptureStart = serde_json::from_str(&ask(&first, "capture 600")).unwrap();
    assert_eq!((start.capture, start.pid), (1, demo.child.id()));

    // A second client: refused, clearly, and its connection still answers snapshots.
    let second = UnixStream::connect(&demo.socket).unwrap();
    let refused: gpuspan_capture::live::ErrorReply = serde_json::from_str(&ask(&second, "capture 1")).unwrap();
    assert!(refused.error.contains("already open"), "{}", refused.error);
    let snap: Snapshot = serde_json::from_str(&ask(&second, "snapshot")).unwrap();
    assert!(snap.capture_window.is_some());
    assert_eq!((snap.feed.captures, snap.feed.captures_refused), (1, 1));
    let refused_file = dir.0.join("refused.gpuspan");
    let out = gpuspan_in(
        &dir.0,
        &["capture", &demo.child.id().to_string(), "--for", "1s", "-o", refused_file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!refused_file.exists(), "no window, no file");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already open"), "{}", String::from_utf8_lossy(&out.stderr));

    // The first client vanishes mid-window (600 s asked): the window ends with it.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(30);
    let snap = loop {
        let snap = snapshot(&demo.socket);
        if snap.capture_window.is_none() || Instant::now() > deadline {
            break snap;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!((snap.capture_window, snap.feed.captures_abandoned), (None, 1), "{:?}", snap.feed);
    assert_eq!(snap.feed.dropped_stalled, 0, "ended by the client leaving, not by stalling");

    // And the next one gets its window: `--all`, one file per live process (here the one).
    let all = dir.0.join("all");
    let out = gpuspan_in(&dir.0, &["capture", "--all", "--for", "1s", "-o", all.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = all.join(format!("live_demo-{}.gpuspan", demo.child.id()));
    assert!(gpuspan_capture::Capture::open(&file).unwrap().end.is_some(), "{}", file.display());
    assert_eq!(std::fs::read_dir(&all).unwrap().count(), 1);
}
