//! The `gpuspan` command on hostile input (issue 32): captures nested deeper than any program
//! nests, counts that claim more than the file holds, names with terminal escapes, live feeds
//! that stream without end, trickle or never answer; and several captures of one path.
//!
//! Resource bounds are asserted as limits the command runs under (`ulimit -v` for memory,
//! `ulimit -t` for CPU seconds, both far above what a linear command needs) and as output sizes,
//! never as wall-clock times.

mod common;

use common::{save, scratch};
use gpuspan_capture::live;
use gpuspan_capture::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs the binary under a memory limit (`ulimit -v`, KiB) and a CPU-time limit (`ulimit -t`,
/// seconds): (status code, stdout bytes, stderr). A command that goes past either is killed.
fn bounded(args: &[&str], mem_kib: u64, cpu_s: u64) -> (i32, Vec<u8>, String) {
    bounded_in(args, mem_kib, cpu_s, &[])
}

/// [`bounded`] with these environment variables set.
fn bounded_in(args: &[&str], mem_kib: u64, cpu_s: u64, env: &[(&str, &Path)]) -> (i32, Vec<u8>, String) {
    let script = format!("ulimit -v {mem_kib}; ulimit -t {cpu_s}; exec \"$0\" \"$@\"");
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_gpuspan"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("sh runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code().unwrap_or(-1), out.stdout, err)
}

/// One recursion `depth` calls deep on one thread, as the runtime writes it (innermost call
/// first: records are written as calls end), each call's GPU work inside its caller's; then, in
/// the GPU's idle time that follows, a host recursion half as deep; then one more GPU call.
fn deep(depth: u64) -> Capture {
    let mut c = Capture::new(Header::new("recursive", 7));
    c.sites = vec![
        Site::new(0, "recurse", SiteKind::Kernel),
        Site::new(1, "after", SiteKind::Kernel),
        Site::new(2, "host_recurse", SiteKind::Kernel),
    ];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    c.devices = vec![Device { key: 0, id: 0, name: "gpu".into() }];
    let d = depth;
    let mut outer = Vec::new();
    for i in (0..d).rev() {
        let mut r = Record::new(0, i + 1, 1, Interval::new(i, 5 * d - i));
        let mut g = Gpu::new(Interval::new(d + i, 3 * d - i), TimingSource::GpuTimestamp);
        g.device = Some(0);
        r.gpu = Some(g);
        outer.push(r);
    }
    // While the GPU is idle, a host recursion half as deep, inside the first one's calls.
    for j in (0..d / 2).rev() {
        c.records.push(Record::new(2, d + 2 + j, 1, Interval::new(3 * d + j, 4 * d - j)));
    }
    let mut r = Record::new(1, d + 1, 1, Interval::new(4 * d, 4 * d + 10));
    let mut g = Gpu::new(Interval::new(4 * d + 1, 4 * d + 9), TimingSource::GpuTimestamp);
    g.device = Some(0);
    r.gpu = Some(g);
    c.records.push(r);
    // Written as they end: the first recursion's calls last.
    c.records.extend(outer);
    c.end = Some(End { end_ns: 5 * d, records: c.records.len() as u64, ..End::default() });
    c
}

/// 4a: every command that walks the nesting completes on a recursion 40 000 calls deep, in
/// bounded memory and CPU, with output that does not grow with the depth squared; the
/// flamegraph says where it cut the stacks.
#[test]
fn a_recursion_40_000_deep_goes_through_every_command_in_bounded_memory() {
    const DEPTH: u64 = 40_000;
    let path = save(&deep(DEPTH), "deep.gpuspan");
    let p = path.to_str().unwrap();
    // 1 GiB of address space and 60 CPU seconds: a linear command needs a small part of either.
    let (mem, cpu) = (1 << 20, 60);

    let (code, out, err) = bounded(&["flamegraph", p, "--folded"], mem, cpu);
    assert_eq!(code, 0, "{err}");
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let depth = lines.iter().map(|l| l.matches(';').count() + 1).max().unwrap();
    assert!(depth <= gpuspan_cli::flame::MAX_DEPTH + 2, "stacks are cut at the cap: {depth} frames");
    assert!(lines.iter().any(|l| l.contains(gpuspan_cli::flame::CUT_FRAME)), "the cut is a frame of its own");
    // The GPU recursion below the cap, and the host recursion made at its bottom.
    let cut = DEPTH as usize - gpuspan_cli::flame::MAX_DEPTH + DEPTH as usize / 2;
    assert!(err.contains(&format!("{cut} calls nested deeper than")), "{err}");
    // Every nanosecond of the outermost call and the one after, once, cut or not.
    let total: u64 = lines.iter().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(total, 2 * DEPTH + 8);
    assert!(text.len() < 4 << 20, "folded output grows with the cap, not the depth: {} bytes", text.len());

    let svg = scratch("deep.svg");
    let (code, _, err) = bounded(&["flamegraph", p, "-o", svg.to_str().unwrap()], mem, cpu);
    assert_eq!(code, 0, "{err}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.contains(gpuspan_cli::flame::CUT_FRAME), "the SVG shows the cut");

    let (code, out, err) = bounded(&["report", p], mem, cpu);
    assert_eq!(code, 0, "{err}");
    let report = String::from_utf8(out).unwrap();
    assert!(report.contains("recurse") && report.len() < 1 << 20, "{} bytes", report.len());

    for cmd in [&["timeline"][..], &["timeline", "--svg"], &["merge"], &["merge", "--svg"]] {
        let target = scratch(&format!("deep-{}.out", cmd.join("-")));
        let mut args = cmd.to_vec();
        args.extend([p, "-o", target.to_str().unwrap()]);
        let (code, _, err) = bounded(&args, mem, cpu);
        assert_eq!(code, 0, "{cmd:?}: {err}");
        let size = std::fs::metadata(&target).unwrap().len();
        assert!(size < 1000 * DEPTH, "{cmd:?}: {size} bytes, linear in the calls");
    }

    let (code, out, err) = bounded(&["diff", p, p], mem, cpu);
    assert_eq!(code, 0, "{err}");
    assert!(out.len() < 1 << 20);
}

/// A fake live feed: a socket in `dir` named as a program's, served by `serve` on a thread for
/// each connection (or never accepted, for `None`: a program stopped with Ctrl-Z, whose kernel
/// still completes connections). Every fake gives up after [`FAKE_LIFE`], so that a `gpuspan top`
/// that waits for them all still ends.
fn feed(dir: &Path, name: &str, serve: Option<fn(UnixStream)>) -> std::path::PathBuf {
    let path = dir.join(format!("{name}-{}.live.sock", std::process::id()));
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || match serve {
        Some(serve) => {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || serve(conn));
            }
        }
        None => {
            std::thread::sleep(FAKE_LIFE);
            drop(listener);
        }
    });
    path
}

const FAKE_LIFE: Duration = Duration::from_secs(30);

/// Answers each request with a snapshot of a program called `good-feed`.
fn good(conn: UnixStream) {
    let mut out = conn.try_clone().unwrap();
    let snapshot = live::Snapshot {
        protocol: live::PROTOCOL,
        program: "good-feed".into(),
        pid: 4242,
        sites: vec![live::Site { name: "saxpy".into(), calls: 7, ..live::Site::default() }],
        ..live::Snapshot::default()
    };
    let line = serde_json::to_string(&snapshot).unwrap();
    for _ in BufReader::new(conn).lines().map_while(Result::ok) {
        if writeln!(out, "{line}").is_err() {
            return;
        }
    }
}

/// One line without end: megabytes of a JSON string, as fast as the client reads.
fn endless(mut conn: UnixStream) {
    let chunk = vec![b'a'; 1 << 16];
    let start = Instant::now();
    let _ = conn.write_all(b"{\"program\":\"");
    while start.elapsed() < FAKE_LIFE && conn.write_all(&chunk).is_ok() {}
}

/// A byte every 100 ms.
fn trickle(mut conn: UnixStream) {
    let start = Instant::now();
    while start.elapsed() < FAKE_LIFE && conn.write_all(b" ").is_ok() {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Accepts and never answers.
fn silent(conn: UnixStream) {
    std::thread::sleep(FAKE_LIFE);
    drop(conn);
}

/// 5: `gpuspan top --once` beside feeds that stream an endless line, trickle, never answer, are
/// stopped (never accept) or are gone (nothing listens): the good program is shown, each other
/// is skipped with a note, and memory stays bounded.
#[test]
fn top_once_shows_the_good_feed_and_skips_the_hostile_ones_with_a_note() {
    let dir = scratch("top-feeds");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    feed(&dir, "good", Some(good));
    let bad = [
        feed(&dir, "endless", Some(endless)),
        feed(&dir, "trickle", Some(trickle)),
        feed(&dir, "silent", Some(silent)),
        feed(&dir, "stopped", None),
    ];
    // Gone: the socket file stays, nothing listens on it.
    let gone = dir.join(format!("gone-{}.live.sock", std::process::id()));
    drop(UnixListener::bind(&gone).unwrap());
    let d = dir.to_str().unwrap();
    // Only this directory is looked in.
    let env = [("XDG_RUNTIME_DIR", dir.as_path()), ("TMPDIR", dir.as_path())];
    for format in ["text", "json"] {
        let (code, out, err) = bounded_in(&["top", "--once", "--dir", d, "--format", format], 1 << 20, 60, &env);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(code, 0, "{format}: {out}{err}");
        match format {
            "json" => {
                assert_eq!(out.lines().count(), 1, "{out}");
                let s: live::Snapshot = serde_json::from_str(out.trim()).unwrap();
                assert_eq!(s.program, "good-feed");
            }
            _ => assert!(out.contains("good-feed") && out.contains("saxpy"), "{out}"),
        }
        for path in bad.iter().chain([&gone]) {
            let name = path.file_name().unwrap().to_str().unwrap();
            let notes = err.lines().filter(|l| l.starts_with("gpuspan: note: skipped") && l.contains(name)).count();
            assert_eq!(notes, 1, "{format}: one note for {name}: {err}");
        }
    }
}

/// A name made to move the cursor, clear the screen, ring the bell and overwrite a line: C0
/// controls, DEL, a C1 control (the one-character CSI) and a right-to-left override.
const EVIL: &str = "evil\x1b[2J\x1b]0;owned\x07\r\n\t\x7f\u{9b}31m\u{202e}name";

/// The bytes of `text` a terminal would act on: every control character but the line feed,
/// and the bidirectional overrides.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
        .collect()
}

/// A capture whose every name is [`EVIL`]: site, kernel, thread, device, span, loss, note.
fn evil() -> Capture {
    let mut c = Capture::new(Header::new(EVIL, 9));
    c.header.hostname = Some(EVIL.into());
    let mut site = Site::new(0, EVIL, SiteKind::Kernel);
    site.function = EVIL.into();
    site.file = EVIL.into();
    c.sites = vec![site, Site::new(1, &format!("{EVIL}copy"), SiteKind::Transfer)];
    c.threads = vec![Thread { index: 1, name: EVIL.into() }];
    c.devices = vec![Device { key: 0, id: 0, name: EVIL.into() }];
    c.spans = vec![Span { id: 1, parent: None, name: EVIL.into() }];
    for i in 0..20u64 {
        let mut r = Record::new(i as u32 % 2, i + 1, 1, Interval::new(i * 100, i * 100 + 90));
        let mut g = Gpu::new(Interval::new(i * 100 + 10, i * 100 + 80), TimingSource::Cupti);
        g.device = Some(0);
        r.gpu = Some(g);
        r.span = Some(1);
        r.activities.push(common::kernel(EVIL, Interval::new(i * 100 + 10, i * 100 + 40), 0));
        r.activities.push(Activity {
            name: EVIL.into(),
            interval: Interval::new(i * 100 + 40, i * 100 + 80),
            kind: ActivityKind::Copy {
                bytes: 1 << 20,
                direction: Some(Direction::CpuToGpu),
                src: MemoryKind::Pageable,
                dst: MemoryKind::Device,
            },
            stream: Some(1),
            device: Some(0),
        });
        c.records.push(r);
    }
    c.end = Some(End {
        end_ns: 2_000,
        records: 20,
        losses: vec![Loss { what: EVIL.into(), count: 3 }],
        notes: vec![EVIL.into()],
    });
    c
}

/// 4c: names from a capture or a feed reach no terminal raw: every text a command prints (and
/// the SVGs, where XML forbids most control characters) shows them escaped.
#[test]
fn hostile_names_are_shown_escaped_in_every_output() {
    let base = save(&evil(), "evil-base.gpuspan");
    let mut slower = evil();
    slower.records.iter_mut().for_each(|r| r.gpu.as_mut().unwrap().busy_ns *= 3);
    let new = save(&slower, "evil-new.gpuspan");
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let svg = scratch("evil.svg");
    let picture = scratch("evil-timeline.svg");
    let runs: Vec<Vec<&str>> = vec![
        vec!["report", b],
        vec!["report", b, "--format", "csv"],
        vec!["report", b, "--format", "csv", "--table", "kernels"],
        vec!["flamegraph", b, "--folded"],
        vec!["flamegraph", b, "-o", svg.to_str().unwrap()],
        vec!["diff", b, n, "--fail-if-slower", "5%"],
        vec!["ranks", b, n],
        vec!["timeline", b, "--svg", "-o", picture.to_str().unwrap()],
    ];
    for args in &runs {
        let (code, out, err) = bounded(args, 1 << 20, 60);
        assert!(code == 0 || (code == 1 && args[0] == "diff"), "{args:?}: {err}");
        let out = String::from_utf8(out).unwrap();
        assert!(raw_controls(&out).is_empty(), "{args:?}: {:?} in {out:?}", raw_controls(&out));
        assert!(raw_controls(&err).is_empty(), "{args:?}: {:?} in {err:?}", raw_controls(&err));
        assert!(out.is_empty() || out.contains("\\x1b[2J"), "{args:?}: the name is shown, escaped: {out}");
    }
    for file in [&svg, &picture] {
        let text = std::fs::read_to_string(file).unwrap();
        let bad: Vec<char> = raw_controls(&text).into_iter().filter(|c| !matches!(c, '\t' | '\r')).collect();
        assert!(bad.is_empty(), "{}: {bad:?}", file.display());
        assert!(text.contains("\\x1b[2J"), "{}", file.display());
    }

    // A live feed's names too.
    let dir = scratch("evil-feed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    feed(&dir, EVIL.replace(|c: char| !c.is_ascii_alphanumeric(), "_").as_str(), Some(evil_feed));
    let env = [("XDG_RUNTIME_DIR", dir.as_path()), ("TMPDIR", dir.as_path())];
    let (code, out, err) = bounded_in(&["top", "--once", "--dir", dir.to_str().unwrap()], 1 << 20, 60, &env);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(raw_controls(&out).is_empty() && raw_controls(&err).is_empty(), "{out:?} {err:?}");
    assert!(out.contains("\\x1b[2J"), "{out}");
}

/// A feed whose program, sites, devices, losses and notes are all named [`EVIL`].
fn evil_feed(conn: UnixStream) {
    let mut out = conn.try_clone().unwrap();
    let snapshot = live::Snapshot {
        protocol: live::PROTOCOL,
        program: EVIL.into(),
        pid: 4242,
        writer: EVIL.into(),
        sites: vec![live::Site { name: EVIL.into(), function: EVIL.into(), calls: 7, ..live::Site::default() }],
        devices: vec![live::Device { name: EVIL.into(), ..live::Device::default() }],
        losses: vec![live::Loss { what: EVIL.into(), count: 1 }],
        notes: vec![EVIL.into()],
        ..live::Snapshot::default()
    };
    let line = serde_json::to_string(&snapshot).unwrap();
    for _ in BufReader::new(conn).lines().map_while(Result::ok) {
        if writeln!(out, "{line}").is_err() {
            return;
        }
    }
}

/// A crafted capture of 50 000 devices, each with one call, link peaks and a monitor reading.
fn many_devices(n: u32) -> Capture {
    let mut c = Capture::new(Header::new("devices", 11));
    c.sites = vec![Site::new(0, "k", SiteKind::Kernel), Site::new(1, "copy", SiteKind::Transfer)];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    for key in 0..n {
        c.devices.push(Device { key, id: key, name: format!("gpu{key}") });
        c.links
            .push(DeviceLink { device: key, peak: LinkPeak { pcie_bytes_per_s: Some(32e9), ..LinkPeak::default() } });
        c.samples.push(DeviceSamples {
            device: key,
            samples: vec![DeviceSample { time_ns: u64::from(key) * 10, power_w: Some(100.0), ..Default::default() }],
        });
        let t = u64::from(key) * 10;
        let mut r = Record::new(key % 2, u64::from(key) + 1, 1, Interval::new(t, t + 8));
        let mut g = Gpu::new(Interval::new(t + 1, t + 7), TimingSource::Cupti);
        g.device = Some(key);
        r.gpu = Some(g);
        if key % 2 == 1 {
            r.activities.push(Activity {
                name: "memcpy".into(),
                interval: Interval::new(t + 1, t + 7),
                kind: ActivityKind::Copy {
                    bytes: 64 << 20,
                    direction: Some(Direction::CpuToGpu),
                    src: MemoryKind::Pinned,
                    dst: MemoryKind::Device,
                },
                stream: Some(1),
                device: Some(key),
            });
        }
        c.records.push(r);
    }
    c.end = Some(End { end_ns: u64::from(n) * 10, records: u64::from(n), ..End::default() });
    c
}

/// 4b: a capture that claims 50 000 devices goes through every command in bounded CPU and
/// memory (lookups by key, not scans of every device per device).
#[test]
fn a_capture_of_50_000_devices_goes_through_every_command_in_bounded_cpu() {
    let path = save(&many_devices(50_000), "devices.gpuspan");
    let p = path.to_str().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 8 << 20);
    let (mem, cpu) = (1 << 20, 60);
    let (code, out, err) = bounded(&["report", p], mem, cpu);
    assert_eq!(code, 0, "{err}");
    assert!(String::from_utf8(out).unwrap().contains("gpu49999"));
    for args in [vec!["flamegraph", p, "--folded"], vec!["diff", p, p], vec!["ranks", p, p]] {
        let (code, _, err) = bounded(&args, mem, cpu);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    for cmd in [&["timeline"][..], &["timeline", "--svg"]] {
        let target = scratch(&format!("devices-{}.out", cmd.join("-")));
        let mut args = cmd.to_vec();
        args.extend([p, "-o", target.to_str().unwrap()]);
        let (code, _, err) = bounded(&args, mem, cpu);
        assert_eq!(code, 0, "{cmd:?}: {err}");
    }
}

/// 4b: a frame whose length field claims far more than the file holds is read as a cut, with no
/// allocation of what it claims: memory follows the bytes there are.
#[test]
fn a_frame_claiming_more_than_the_file_holds_allocates_nothing_for_it() {
    let mut bytes = Vec::new();
    many_devices(10).write_to(&mut bytes).unwrap();
    // A last frame claiming MAX_FRAME bytes, of which 16 follow.
    bytes.extend_from_slice(&MAX_FRAME.to_le_bytes());
    bytes.extend_from_slice(&[0; 4 + 16]);
    let end = bytes.len();
    let path = scratch("claims.gpuspan");
    std::fs::write(&path, &bytes[..end]).unwrap();
    // 40 MiB of address space beside the binary's own is too little for a 64 MiB frame buffer.
    let (code, out, err) = bounded(&["report", path.to_str().unwrap()], 48 << 10, 60);
    assert!(code == 0 || code == 2, "{err}");
    assert!(err.lines().count() == 1 && (err.contains("damaged") || err.contains("incomplete")), "{err}");
    assert!(code == 2 || !out.is_empty());
}

/// Issue 32, one capture path, many writers: the runtime writes `<stem>.<pid>.gpuspan` beside
/// `<stem>.gpuspan` when a second process shares the path. `report` and `merge` take the
/// directory (or several files) and show every run; `report` of one of them names the others.
#[test]
fn report_and_merge_read_every_capture_of_a_directory() {
    let dir = scratch("runs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut first = deep(3);
    first.header.program = "rank_a".into();
    let mut second = deep(3);
    second.header.program = "rank_b".into();
    second.header.pid = 8;
    let write = |c: &Capture, name: &str| {
        let mut bytes = Vec::new();
        c.write_to(&mut bytes).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    write(&first, "run.gpuspan");
    write(&second, "run.8.gpuspan");
    std::fs::write(dir.join("notes.txt"), "not a capture").unwrap();
    let d = dir.to_str().unwrap();

    let (code, out, err) = bounded(&["report", d], 1 << 20, 60);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("gpuspan report: rank_a (pid 7)") && out.contains("gpuspan report: rank_b (pid 8)"), "{out}");
    let (code, out, err) = bounded(&["report", d, "--format", "json"], 1 << 20, 60);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json.as_array().map(Vec::len), Some(2), "one report per capture");
    let (code, out, _) = bounded(&["report", d, "--format", "csv"], 1 << 20, 60);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, 0);
    assert!(
        out.starts_with("capture,site,") && out.lines().filter(|l| l.contains("run.8.gpuspan")).count() == 3,
        "{out}"
    );

    // Several files as arguments say the same as their directory.
    let files = [dir.join("run.gpuspan"), dir.join("run.8.gpuspan")];
    let (code, out, _) = bounded(&["report", files[0].to_str().unwrap(), files[1].to_str().unwrap()], 1 << 20, 60);
    assert_eq!(code, 0);
    assert!(String::from_utf8(out).unwrap().contains("rank_b (pid 8)"));
    // One of them alone: a note names the other run of its path.
    let (code, _, err) = bounded(&["report", files[0].to_str().unwrap()], 1 << 20, 60);
    assert_eq!(code, 0);
    assert!(err.contains("note") && err.contains("run.8.gpuspan"), "{err}");

    let merged = scratch("runs-merged.json");
    let (code, _, err) = bounded(&["merge", d, "-o", merged.to_str().unwrap()], 1 << 20, 60);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 captures merged"), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    let processes = json["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "process_name").count();
    assert_eq!(processes, 2);

    let empty = scratch("no-runs");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = bounded(&["report", empty.to_str().unwrap()], 1 << 20, 60);
    assert_eq!(code, 2);
    assert!(err.lines().count() == 1 && err.contains("no capture"), "{err}");
}

/// A recursion `depth` calls deep whose every call times its own GPU work, which ran before its
/// callee's and apart from it (so no call's GPU interval holds its callee's: none is taken for
/// its caller's, and each looks past every open call for one), with the GPU idle between each
/// call's work and the next's while every caller is still open.
fn deep_gaps(depth: u64) -> Capture {
    let mut c = Capture::new(Header::new("gaps", 12));
    c.sites = vec![Site::new(0, "level", SiteKind::Kernel)];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    let d = depth;
    for i in (0..d).rev() {
        let mut r = Record::new(0, i + 1, 1, Interval::new(i, 4 * d - i));
        let mut g = Gpu::new(Interval::new(d + 2 * i, d + 2 * i + 1), TimingSource::GpuTimestamp);
        g.device = Some(0);
        r.gpu = Some(g);
        c.records.push(r);
    }
    c.end = Some(End { end_ns: 4 * d, records: d, ..End::default() });
    c
}

/// 4a: the nesting search and the idle analysis stay linear where no call encloses the next
/// (each would otherwise look at every open call: depth squared), and the flamegraph says where
/// it stopped looking.
#[test]
fn calls_that_enclose_nothing_at_any_depth_cost_no_scan_of_every_open_call() {
    const DEPTH: u64 = 60_000;
    let path = save(&deep_gaps(DEPTH), "gaps.gpuspan");
    let p = path.to_str().unwrap();
    let (code, out, err) = bounded(&["report", p, "--format", "json"], 1 << 20, 60);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let device = &report["devices"][0];
    assert_eq!(device["idle_ns"], DEPTH - 1, "{device}");
    let shares = device["shares"].as_array().unwrap();
    assert_eq!(shares.len(), 1, "each gap is charged to the innermost call open across it: {shares:?}");
    assert_eq!(shares[0]["gaps"], DEPTH - 1);
    let (code, out, err) = bounded(&["flamegraph", p, "--folded"], 1 << 20, 60);
    assert_eq!(code, 0, "{err}");
    assert_eq!(String::from_utf8(out).unwrap(), format!("main;level {DEPTH}\n"));
    assert!(err.contains("found no enclosing call among the 4096 innermost open calls"), "{err}");
}

/// 4a: calls that each overlap the next without nesting (async calls interleaved without end)
/// need a timeline lane each; placing them looks at a bounded number of lanes per call, and
/// every call is still drawn where Perfetto keeps it.
#[test]
fn a_staircase_of_100_000_overlapping_calls_is_laid_out_in_bounded_cpu() {
    const N: u64 = 100_000;
    let mut c = Capture::new(Header::new("stairs", 13));
    c.sites = vec![Site::new(0, "step", SiteKind::Kernel)];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    c.records = (0..N).map(|i| Record::new(0, i + 1, 1, Interval::new(i * 10, i * 10 + N * 10))).collect();
    c.end = Some(End { end_ns: 20 * N, records: N, ..End::default() });
    let path = save(&c, "stairs.gpuspan");
    let out = scratch("stairs.json");
    let (code, _, err) = bounded(&["timeline", path.to_str().unwrap(), "-o", out.to_str().unwrap()], 2 << 20, 60);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (events, overlap) = common::complete_events(&json);
    assert_eq!(events.len() as u64, N, "every call drawn");
    assert_eq!(overlap, None, "none where Perfetto would drop it");
}
