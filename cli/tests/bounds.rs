//! The `gpuspan` command on hostile input (issue 32): captures nested deeper than any program
//! nests, counts that claim more than the file holds, names with terminal escapes, live feeds
//! that stream without end, trickle or never answer; and several captures of one path.
//!
//! Resource bounds are asserted as limits the command runs under (`ulimit -v` for memory,
//! `ulimit -t` for CPU seconds, both far above what a linear command needs) and as output sizes,
//! never as wall-clock times.

mod common;

use common::{gpuspan, save, scratch};
use gpuspan_capture::*;
use std::process::Command;

/// Runs the binary under a memory limit (`ulimit -v`, KiB) and a CPU-time limit (`ulimit -t`,
/// seconds): (status code, stdout bytes, stderr). A command that goes past either is killed.
fn bounded(args: &[&str], mem_kib: u64, cpu_s: u64) -> (i32, Vec<u8>, String) {
    let script = format!("ulimit -v {mem_kib}; ulimit -t {cpu_s}; exec \"$0\" \"$@\"");
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_gpuspan"))
        .args(args)
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
