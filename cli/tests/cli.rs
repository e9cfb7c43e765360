//! The `gpuspan` command on captures recorded from real programs (the demo, wgpu on lavapipe,
//! `tests/fixtures/lavapipe_demo.gpuspan`; the CUDA example on an H100 under CUPTI,
//! `tests/fixtures/h100_cuda_saxpy.gpuspan`) and on synthetic captures whose answers are known.

mod common;

use common::{complete_events, gpuspan, kernel, save, scratch};
use gpuspan_capture::*;
use gpuspan_cli::{analysis, diff, flame, idle, report, stats};
use std::collections::BTreeMap;
use std::path::Path;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lavapipe_demo.gpuspan");

fn fixture() -> Capture {
    Capture::open(FIXTURE).expect("the fixture reads")
}

/// A synthetic capture: sites by name (ids in order), then records added by the test.
struct Builder {
    c: Capture,
    next_scope: u64,
}

impl Builder {
    fn new(program: &str, pid: u32, sites: &[(&str, SiteKind)]) -> Builder {
        let mut c = Capture::new(Header::new(program, pid));
        c.sites = sites.iter().enumerate().map(|(i, (n, k))| Site::new(i as u32, n, *k)).collect();
        c.threads = vec![Thread { index: 1, name: "main".into() }, Thread { index: 2, name: "worker".into() }];
        c.devices =
            vec![Device { key: 0, id: 0, name: "gpu-a".into() }, Device { key: 1, id: 1, name: "gpu-b".into() }];
        c.end = Some(End::default());
        Builder { c, next_scope: 1 }
    }

    /// A call of `site` on `thread`, host `[hs, he]`, with GPU work `[gs, ge]` on `device`.
    fn call(&mut self, site: u32, thread: u32, host: (u64, u64), gpu: Option<(u64, u64, u32)>) -> &mut Record {
        let mut r = Record::new(site, self.next_scope, thread, Interval::new(host.0, host.1));
        self.next_scope += 1;
        if let Some((s, e, d)) = gpu {
            let mut g = Gpu::new(Interval::new(s, e), TimingSource::GpuTimestamp);
            g.device = Some(d);
            r.gpu = Some(g);
        }
        self.c.records.push(r);
        self.c.records.last_mut().unwrap()
    }
}

#[test]
fn report_numbers_equal_the_records_sums_on_the_demo_capture() {
    let c = fixture();
    assert!(c.truncation.is_none() && c.end.is_some(), "the demo finished its capture");
    assert!(c.records.len() >= 40, "the demo records every frame's calls");
    let r = report::build(&c);
    let index = analysis::Index::new(&c);
    assert_eq!(r.capture.records, c.records.len());
    let mut recorded = 0;
    for row in &r.sites {
        let mine: Vec<&Record> = c.records.iter().filter(|x| index.site_name(x.site) == row.site).collect();
        recorded += mine.len() as u64;
        assert_eq!(row.recorded, mine.len() as u64, "{}", row.site);
        assert_eq!(row.total_ns, mine.iter().map(|x| x.duration_ns()).sum::<u64>(), "{}", row.site);
        assert_eq!(row.host_total_ns, mine.iter().map(|x| x.host.duration_ns()).sum::<u64>(), "{}", row.site);
        assert_eq!(row.bytes, mine.iter().filter_map(|x| x.bytes).sum::<u64>(), "{}", row.site);
        let mut d: Vec<u64> = mine.iter().map(|x| x.duration_ns()).collect();
        d.sort_unstable();
        assert_eq!(row.p50_ns, stats::quantile(&d, 0.5));
        assert_eq!(row.p99_ns, d.last().copied(), "fewer than 100 calls: p99 is the largest");
        // The aggregates counted every call; with the demo's threshold all of them were recorded.
        assert_eq!(row.calls, Some(row.recorded), "{}", row.site);
    }
    assert_eq!(recorded, c.records.len() as u64);
    let names: Vec<&str> = r.sites.iter().map(|s| s.site.as_str()).collect();
    for expected in ["saxpy", "square", "relax", "upload", "copy_to_staging", "map_and_copy_out"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    // Kernels: the wgpu kernel sites' GPU busy time; transfers: the transfer sites' bytes.
    let kernel_total: u64 = r.kernels.iter().map(|k| k.total_ns).sum();
    let kernel_records: u64 = c
        .records
        .iter()
        .filter(|x| index.site(x.site).unwrap().kind == SiteKind::Kernel)
        .filter_map(|x| x.gpu.as_ref().map(|g| g.busy_ns))
        .sum();
    assert_eq!(kernel_total, kernel_records);
    let transfer_bytes: u64 = r.transfers.iter().map(|t| t.bytes).sum();
    let site_bytes: u64 = r.sites.iter().filter(|s| s.kind == "transfer").map(|s| s.bytes).sum();
    assert_eq!(transfer_bytes, site_bytes);
    // One device; busy + idle = window, and the idle shares add up to the idle time.
    assert_eq!(r.devices.len(), 1);
    let d = &r.devices[0];
    assert!(d.device.contains("llvmpipe"), "{}", d.device);
    assert_eq!(d.busy_ns + d.idle_ns, d.window_ns);
    assert_eq!(d.shares.iter().map(|s| s.idle_ns).sum::<u64>(), d.idle_ns);
    assert!(r.findings.iter().any(|f| f.kind == "upper_bound" && f.message.starts_with("upload")));
}

/// The CUDA example (`cuda_saxpy`) recorded on the lent H100 (2026-11-23 18:19 UTC, CUPTI).
#[test]
fn report_numbers_equal_the_records_sums_on_a_cuda_capture_from_an_h100() {
    let c = Capture::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_cuda_saxpy.gpuspan"))
        .expect("the H100 fixture reads");
    assert!(c.truncation.is_none() && c.end.is_some());
    let r = report::build(&c);
    let index = analysis::Index::new(&c);
    for row in &r.sites {
        let mine: Vec<&Record> = c.records.iter().filter(|x| index.site_name(x.site) == row.site).collect();
        assert_eq!(row.recorded, mine.len() as u64, "{}", row.site);
        assert_eq!(row.total_ns, mine.iter().map(|x| x.duration_ns()).sum::<u64>(), "{}", row.site);
        assert_eq!(row.bytes, mine.iter().filter_map(|x| x.bytes).sum::<u64>(), "{}", row.site);
    }
    // Every recorded call is CUPTI-timed, and its kernels and copies are activities.
    assert!(c.records.iter().all(|x| x.gpu.is_some()), "every recorded call has GPU timing");
    assert_eq!(r.devices.len(), 1);
    let d = &r.devices[0];
    assert!(d.device.contains("H100"), "{}", d.device);
    assert_eq!(d.busy_ns + d.idle_ns, d.window_ns);
    assert_eq!(d.shares.iter().map(|s| s.idle_ns).sum::<u64>(), d.idle_ns);
    // cuBLAS's kernel under `sgemm`, and the copies by memory kind: pinned beats pageable.
    assert!(r.kernels.iter().any(|k| k.kernel.contains("sgemm") && k.count == 5), "{:?}", r.kernels);
    let bandwidth = |kind: &str| {
        r.transfers
            .iter()
            .find(|t| t.src_kind.as_deref() == Some(kind) && t.direction.as_deref() == Some("cpu_to_gpu"))
            .and_then(|t| t.bandwidth_bytes_per_s)
    };
    let (pinned, pageable) = (bandwidth("pinned").expect("pinned"), bandwidth("pageable").expect("pageable"));
    assert!(pinned > 2.0 * pageable, "pinned {pinned} vs pageable {pageable}");
    assert!(r.findings.iter().any(|f| f.message.contains("pageable")), "{:?}", r.findings);
}

#[test]
fn idle_time_is_attributed_exactly_on_a_synthetic_capture() {
    use SiteKind::*;
    let mut b =
        Builder::new("synthetic", 7, &[("kernel", Kernel), ("prepare", Kernel), ("frame", Kernel), ("encode", Kernel)]);
    // Device 0, launched from thread 1 (main).
    b.call(0, 1, (0, 10), Some((10, 30, 0))); // busy 10..30
    b.call(1, 1, (25, 45), None); // host-only: preparing the next launch
    b.call(0, 1, (47, 49), Some((50, 60, 0))); // gap 30..50: prepare 15, kernel 2, nothing 3
    b.call(2, 1, (55, 120), None); // an outer call...
    b.call(3, 1, (70, 80), None); // ...with an inner one
    b.call(0, 1, (85, 90), Some((100, 110, 0))); // gap 60..100: frame 25, encode 10, kernel 5
                                                 // Device 1, launched from thread 2 (worker).
    b.call(0, 2, (0, 5), Some((5, 15, 1)));
    b.call(0, 2, (100, 105), Some((200, 210, 1))); // gap 15..200: kernel 5, nothing 180
    let devices = idle::analyse(&b.c);
    let shares = |d: &idle::DeviceIdle| -> BTreeMap<String, (String, u64)> {
        d.shares.iter().map(|s| (s.holder().to_owned(), (s.thread.clone(), s.idle_ns))).collect()
    };
    let d0 = devices.iter().find(|d| d.device == "GPU 0: gpu-a").unwrap();
    assert_eq!((d0.window_ns, d0.busy_ns, d0.idle_ns), (100, 40, 60));
    assert_eq!(d0.busy_percent, 40.0);
    let expected: BTreeMap<String, (String, u64)> =
        [("prepare", 15), ("kernel", 7), ("(no annotated call)", 3), ("frame", 25), ("encode", 10)]
            .into_iter()
            .map(|(h, ns)| (h.to_owned(), ("main".to_owned(), ns)))
            .collect();
    assert_eq!(shares(d0), expected);
    let d1 = devices.iter().find(|d| d.device == "GPU 1: gpu-b").unwrap();
    assert_eq!((d1.window_ns, d1.busy_ns, d1.idle_ns), (205, 20, 185));
    let expected: BTreeMap<String, (String, u64)> = [("kernel", 5), ("(no annotated call)", 180)]
        .into_iter()
        .map(|(h, ns)| (h.to_owned(), ("worker".to_owned(), ns)))
        .collect();
    assert_eq!(shares(d1), expected);
    // The largest share first.
    assert_eq!(d1.shares[0].idle_ns, 180);

    // The same numbers through the binary, as CSV.
    let path = save(&b.c, "idle.gpuspan");
    let (code, out, err) = gpuspan(&["report", path.to_str().unwrap(), "--format", "csv", "--table", "idle"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().next(), Some("device,launching thread,host was in,idle (ns),% of idle,gaps"));
    assert!(out.contains("GPU 1: gpu-b,worker,(no annotated call),180,97.3,1"), "{out}");
    assert!(out.contains("GPU 0: gpu-a,main,frame,25,41.7,1"), "{out}");
}

#[test]
fn report_json_is_the_report_and_text_names_every_section() {
    let (code, out, err) = gpuspan(&["report", FIXTURE, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let r = report::build(&fixture());
    assert_eq!(json["sites"].as_array().unwrap().len(), r.sites.len());
    assert_eq!(json["sites"][0]["total_ns"].as_u64(), Some(r.sites[0].total_ns));
    assert_eq!(json["devices"][0]["idle_ns"].as_u64(), Some(r.devices[0].idle_ns));
    let (code, text, _) = gpuspan(&["report", FIXTURE]);
    assert_eq!(code, 0);
    for section in ["Sites", "Kernels", "Transfers", "Devices", "GPU idle time", "Launch-bound", "Findings"] {
        assert!(text.contains(section), "{section} missing:\n{text}");
    }
    let (code, csv, _) = gpuspan(&["report", FIXTURE, "--format", "csv"]);
    assert_eq!(code, 0);
    assert_eq!(csv.lines().count(), r.sites.len() + 1, "a header and one line per site:\n{csv}");
}

#[test]
fn launch_bound_sites_and_pageable_copies_are_found() {
    let mut b = Builder::new("findings", 1, &[("tiny", SiteKind::Kernel), ("copy", SiteKind::Transfer)]);
    for i in 0..10 {
        let t = i * 1_000;
        // 2 µs of host launch for 0.5 µs of GPU work.
        b.call(0, 1, (t, t + 2_000), Some((t + 100, t + 600, 0)));
    }
    for (i, src) in [MemoryKind::Pageable, MemoryKind::Pinned].into_iter().enumerate() {
        let t = 100_000 + i as u64 * 10_000;
        let r = b.call(1, 1, (t, t + 5_000), Some((t + 1_000, t + 3_000, 0)));
        r.activities.push(Activity {
            name: "memcpy HtoD".into(),
            interval: Interval::new(t + 1_000, t + 1_000 + 1_000 * (2 - i as u64)),
            kind: ActivityKind::Copy {
                bytes: 8_000,
                direction: Some(Direction::CpuToGpu),
                src,
                dst: MemoryKind::Device,
            },
            stream: Some(1),
            device: Some(0),
        });
    }
    let r = report::build(&b.c);
    assert_eq!(r.launch_bound.len(), 1);
    assert_eq!(
        (r.launch_bound[0].site.as_str(), r.launch_bound[0].gpu_p50_ns, r.launch_bound[0].host_p50_ns),
        ("tiny", 500, 2_000)
    );
    let pageable: Vec<&report::Finding> = r.findings.iter().filter(|f| f.kind == "pageable_copy").collect();
    assert_eq!(pageable.len(), 1, "{:?}", r.findings);
    // 8000 B in 2 µs = 4 GB/s pageable; 8000 B in 1 µs = 8 GB/s pinned.
    assert!(
        pageable[0].message.contains("at 4.00 GB/s; pinned copies in this capture ran at 8.00 GB/s"),
        "{}",
        pageable[0].message
    );
    let copy =
        r.transfers.iter().find(|t| t.transfer == "memcpy HtoD" && t.src_kind.as_deref() == Some("pageable")).unwrap();
    assert_eq!((copy.count, copy.bytes, copy.total_ns), (1, 8_000, 2_000));
}

#[test]
fn flamegraph_folds_gpu_time_once_and_the_svg_is_xml_with_the_frames() {
    // Nesting: an outer wgpu scope's timestamps enclose its inner scopes'; a CUDA call's own
    // time is its kernels.
    let mut b = Builder::new(
        "flame",
        1,
        &[("frame", SiteKind::Kernel), ("blur", SiteKind::Kernel), ("gemm", SiteKind::Kernel)],
    );
    b.call(0, 1, (0, 1_000), Some((100, 900, 0))).gpu.as_mut().unwrap().busy_ns = 800;
    b.call(1, 1, (100, 200), Some((150, 450, 0)));
    let g = b.call(2, 1, (300, 400), Some((500, 800, 0)));
    for (name, s, e) in [("sgemm_128;x", 500, 600), ("relu", 650, 800)] {
        g.activities.push(kernel(name, Interval::new(s, e), 0));
    }
    let folded = flame::folded(&b.c);
    let expected: BTreeMap<String, u64> = [
        ("main;frame", 800 - 300 - 250),
        ("main;frame;blur", 300),
        ("main;frame;gemm;sgemm_128:x", 100),
        ("main;frame;gemm;relu", 150),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(folded, expected);
    assert_eq!(folded.values().sum::<u64>(), 800, "the outermost call's GPU time, counted once");

    // On the demo capture: no nesting, so the folded total is every GPU call's busy time.
    let c = fixture();
    let total: u64 = c.records.iter().filter_map(|r| r.gpu.as_ref().map(|g| g.busy_ns)).sum();
    let (code, out, err) = gpuspan(&["flamegraph", FIXTURE, "--folded"]);
    assert_eq!(code, 0, "{err}");
    let sum: u64 = out.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(sum, total);

    let svg = scratch("flame.svg");
    let (code, _, err) = gpuspan(&["flamegraph", FIXTURE, "-o", svg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut titles = Vec::new();
    let mut in_title = false;
    let mut root = None;
    loop {
        match reader.read_event().expect("well-formed XML") {
            quick_xml::events::Event::Start(e) => {
                root.get_or_insert_with(|| String::from_utf8_lossy(e.name().as_ref()).into_owned());
                in_title = e.name().as_ref() == b"title";
            }
            quick_xml::events::Event::Text(t) if in_title => titles.push(String::from_utf8_lossy(&t).into_owned()),
            quick_xml::events::Event::End(_) => in_title = false,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(root.as_deref(), Some("svg"));
    for frame in ["saxpy", "square", "relax", "upload", "copy_to_staging"] {
        assert!(titles.iter().any(|t| t.starts_with(&format!("{frame} ("))), "{frame} not among {titles:?}");
    }
    let all = titles.iter().find(|t| t.starts_with("all (")).expect("the root frame");
    let expected = format!("all ({} ns of GPU time", fmt_thousands(total));
    assert!(all.starts_with(&expected), "{all} vs {expected}");
}

/// inferno writes counts with thousands separators.
fn fmt_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A capture of `n` calls of `kernel` whose durations are `scale` × a log-normal sample.
fn timings(seed: u64, n: usize, scale: f64) -> Capture {
    let mut rng = stats::Rng::new(seed);
    let mut b = Builder::new("bench", seed as u32, &[("kernel", SiteKind::Kernel)]);
    let mut t = 0;
    for _ in 0..n {
        // Box–Muller: a normal deviate, then exp for a right-skewed duration around 100 µs.
        let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let d = (100_000.0 * (0.2 * z).exp() * scale) as u64;
        b.call(0, 1, (t, t + 1_000), Some((t + 1_000, t + 1_000 + d, 0)));
        t += 1_000_000;
    }
    b.c
}

#[test]
fn diff_flags_a_planted_slowdown_and_passes_the_same_distribution() {
    let base = timings(1, 200, 1.0);
    let same = timings(2, 200, 1.0);
    let slower = timings(3, 200, 1.2);
    let d = diff::compare(&base, &slower, &diff::Settings::default());
    let k = &d.changes[0];
    assert_eq!(k.verdict, diff::Verdict::Slower, "{}", d.to_text());
    assert!(k.change_percent.unwrap() > 10.0 && k.ci_low_percent.unwrap() > 5.0, "{}", d.to_text());
    assert_eq!(d.slower_than(5.0).len(), 1);
    let d = diff::compare(&base, &same, &diff::Settings::default());
    assert_eq!(d.changes[0].verdict, diff::Verdict::Same, "{}", d.to_text());
    assert!(d.slower_than(5.0).is_empty());

    // Through the binary: status 1 only for the slowdown.
    let (b, s, n) = (save(&base, "base.gpuspan"), save(&same, "same.gpuspan"), save(&slower, "slower.gpuspan"));
    let (code, out, err) = gpuspan(&["diff", b.to_str().unwrap(), n.to_str().unwrap(), "--fail-if-slower", "5%"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("slower by 5% or more with 95% confidence: site kernel"), "{err}");
    let (code, out, err) = gpuspan(&["diff", b.to_str().unwrap(), s.to_str().unwrap(), "--fail-if-slower", "5%"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no significant change"), "{out}");
    // A slowdown below the limit does not fail the gate.
    let (code, _, _) = gpuspan(&["diff", b.to_str().unwrap(), n.to_str().unwrap(), "--fail-if-slower", "60%"]);
    assert_eq!(code, 0);
    let (code, _, err) = gpuspan(&["diff", b.to_str().unwrap(), n.to_str().unwrap(), "--fail-if-slower", "five"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn diff_streams_each_file_keeping_a_bounded_sample_per_row_and_still_finds_a_slowdown() {
    // Streamed from files, the answer is the in-memory one.
    let (base, slower) = (timings(1, 200, 1.0), timings(3, 200, 1.2));
    let (b, n) = (save(&base, "stream-base.gpuspan"), save(&slower, "stream-slower.gpuspan"));
    let settings = diff::Settings::default();
    let (streamed, meta, _) = diff::compare_files(&b, &n, false, &settings).unwrap();
    assert!(meta.records.is_empty(), "no record is kept");
    assert_eq!(streamed, diff::compare(&base, &slower, &settings));

    // Rows longer than the sample: counts are every call, verdicts hold.
    let many = diff::KEEP * 3;
    let (base, same, slower) = (timings(4, many, 1.0), timings(5, many, 1.0), timings(6, many, 1.2));
    let (b, s, n) =
        (save(&base, "big-base.gpuspan"), save(&same, "big-same.gpuspan"), save(&slower, "big-slower.gpuspan"));
    let (d, _, _) = diff::compare_files(&b, &n, false, &settings).unwrap();
    let k = &d.changes[0];
    assert_eq!((k.base_count, k.new_count), (many, many));
    assert_eq!(k.verdict, diff::Verdict::Slower, "{}", d.to_text());
    let change = k.change_percent.unwrap();
    assert!((15.0..25.0).contains(&change) && k.ci_low_percent.unwrap() > 10.0, "{}", d.to_text());
    let (d, _, _) = diff::compare_files(&b, &s, false, &settings).unwrap();
    assert_eq!(d.changes[0].verdict, diff::Verdict::Same, "{}", d.to_text());
    let mut r = diff::Reservoir::new("kernel");
    (0..many).for_each(|i| r.push(i as f64));
    assert_eq!((r.values().len(), r.seen()), (diff::KEEP, many as u64));
    let mean = r.values().iter().sum::<f64>() / r.values().len() as f64;
    assert!((mean / (many as f64 / 2.0) - 1.0).abs() < 0.05, "a uniform sample of the row: mean {mean}");
}

#[test]
fn merge_puts_each_capture_in_its_own_process_on_one_time_axis() {
    let mut rank1 = fixture();
    rank1.header.pid = 4242;
    rank1.header.program = "rank1".into();
    // A second rank that started 1 ms after the first.
    for r in &mut rank1.records {
        r.host.start_ns += 1_000_000;
        r.host.end_ns += 1_000_000;
        if let Some(g) = &mut r.gpu {
            g.interval.start_ns += 1_000_000;
            g.interval.end_ns += 1_000_000;
        }
    }
    let second = save(&rank1, "rank1.gpuspan");
    let out = scratch("merged.json");
    let (code, _, err) = gpuspan(&["merge", FIXTURE, second.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 captures merged"), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let names: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].1.starts_with("wgpu_pipeline (pid ") && names[1].1.starts_with("rank1 (pid 4242)"), "{names:?}");
    let first = |pid: u64| {
        events
            .iter()
            .filter(|e| e["pid"] == pid && e["ph"] == "X")
            .map(|e| e["ts"].as_f64().unwrap())
            .fold(f64::MAX, f64::min)
    };
    assert_eq!(first(1), 0.0);
    assert!((first(2) - 1000.0).abs() < 1e-6, "the second rank starts 1000 µs later: {}", first(2));
    let calls =
        |pid: u64| events.iter().filter(|e| e["pid"] == pid && e["ph"] == "X" && e["cat"] != "gpu.activity").count();
    assert_eq!(calls(1), calls(2));
}

/// Two ranks of one job: each process has a track per device it used; a call whose kernels ran
/// on two devices (a collective) is on a track of its own, not on an unnamed one, and its kernels
/// on each device's stream.
#[test]
fn merged_ranks_keep_a_track_per_device_and_one_for_calls_on_several() {
    let nccl = |device: u32, start: u64| kernel("ncclDevKernel", Interval::new(start, start + 500), device);
    let mut paths = Vec::new();
    for rank in 0..2u32 {
        let mut b =
            Builder::new("multi_gpu", 100 + rank, &[("scale", SiteKind::Kernel), ("all_reduce", SiteKind::Kernel)]);
        b.call(0, 1, (0, 1_000), Some((100, 600, rank)));
        let r = b.call(1, 1, (2_000, 3_000), Some((2_100, 2_900, 0)));
        r.gpu.as_mut().unwrap().device = None;
        r.activities = vec![nccl(0, 2_100), nccl(1, 2_200)];
        paths.push(save(&b.c, &format!("rank{rank}-several.gpuspan")));
    }
    let out = scratch("merged-several.json");
    let (code, _, err) =
        gpuspan(&["merge", paths[0].to_str().unwrap(), paths[1].to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("JSON");
    let events = json["traceEvents"].as_array().unwrap();
    for pid in [1u64, 2] {
        let track = |tid: &serde_json::Value| {
            events
                .iter()
                .find(|e| e["pid"] == pid && e["name"] == "thread_name" && e["tid"] == *tid)
                .and_then(|e| e["args"]["name"].as_str())
                .unwrap_or("?")
                .to_owned()
        };
        let on = |name: &str, cat: &str| -> Vec<String> {
            events
                .iter()
                .filter(|e| e["pid"] == pid && e["ph"] == "X" && e["name"] == name && e["cat"] == cat)
                .map(|e| track(&e["tid"]))
                .collect()
        };
        let rank = pid - 1;
        let own = if rank == 0 { "GPU 0: gpu-a" } else { "GPU 1: gpu-b" };
        assert_eq!(on("scale", "gpu.kernel"), [format!("{own} calls")], "rank {rank}");
        assert_eq!(on("all_reduce", "gpu.kernel"), ["GPUs: several devices calls"], "rank {rank}");
        assert_eq!(
            on("ncclDevKernel", "gpu.activity"),
            ["GPU 0: gpu-a stream 7", "GPU 1: gpu-b stream 7"],
            "rank {rank}"
        );
    }
}

#[test]
fn timeline_has_host_gpu_and_counter_tracks() {
    let out = scratch("timeline.json");
    let (code, _, err) = gpuspan(&["timeline", FIXTURE, "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let c = fixture();
    let gpu_calls = c.records.iter().filter(|r| r.gpu.is_some()).count();
    assert_eq!(
        events.iter().filter(|e| e["ph"] == "X" && e["cat"].as_str().unwrap().starts_with("gpu.")).count(),
        gpu_calls
    );
    let counters: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    let moved = counters.iter().rfind(|e| e["name"] == "bytes moved").expect("a bytes counter");
    let bytes: u64 = c.records.iter().filter_map(|r| r.bytes).sum();
    assert_eq!(moved["args"]["bytes"].as_u64(), Some(bytes), "the counter ends at every byte moved");
    let mut in_flight = counters.iter().filter(|e| e["name"].as_str().unwrap().ends_with("work in flight"));
    assert_eq!(in_flight.next_back().unwrap()["args"]["work"].as_i64(), Some(0), "all work ended");
}

#[test]
fn gpu_cost_per_request_sums_each_span_instance_and_the_flamegraph_folds_over_spans() {
    let mut b = Builder::new("server", 8, &[("step", SiteKind::Kernel)]);
    let span = |id, parent, name: &str| Span { id, parent, name: name.into() };
    b.c.spans = vec![span(1, None, "handle_request"), span(2, None, "handle_request"), span(3, Some(1), "forward")];
    b.call(0, 1, (0, 10), Some((10, 110, 0))).span = Some(3);
    b.call(0, 2, (20, 30), Some((200, 250, 0))).span = Some(1);
    b.call(0, 1, (40, 50), Some((300, 600, 0))).span = Some(2);
    b.call(0, 1, (60, 70), Some((700, 707, 0)));
    b.call(0, 1, (80, 90), None).span = Some(2); // host-timed: no GPU time, still a call of the request
    let r = report::build(&b.c);
    let rows: Vec<String> = r
        .requests
        .iter()
        .map(|x| format!("{} {} {} {} {:?} {:?}", x.span, x.requests, x.records, x.total_ns, x.p50_ns, x.p99_ns))
        .collect();
    assert_eq!(rows, ["handle_request 2 4 450 Some(150) Some(300)", "forward 1 1 100 Some(100) Some(100)"]);
    assert!(!r.to_text().contains("GPU cost per request: no"), "{}", r.to_text());
    let folded = flame::folded(&b.c);
    let expect: BTreeMap<String, u64> = [
        ("main;handle_request;forward;step", 100),
        ("main;handle_request;step", 300),
        ("worker;handle_request;step", 50),
        ("main;step", 7),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(folded, expect);
    // The streaming passes see the spans as they are read.
    let path = save(&b.c, "requests.gpuspan");
    let (streamed, _) = report::stream(&path, false).unwrap();
    assert_eq!(streamed.requests, r.requests);
    assert_eq!(flame::stream(&path, false).unwrap().0.stacks, expect);
    let (code, out, _) = gpuspan(&["report", path.to_str().unwrap(), "--format", "csv", "--table", "requests"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("span,requests,calls,GPU total (ns)") && out.contains("handle_request,2,4,450,225,150,300,300"),
        "{out}"
    );
    // The timeline names each call's spans.
    let json_path = scratch("requests.json");
    let (code, _, err) = gpuspan(&["timeline", path.to_str().unwrap(), "-o", json_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let chains: Vec<&str> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "kernel")
        .filter_map(|e| e["args"]["spans"].as_str())
        .collect();
    assert_eq!(
        chains,
        ["handle_request #1 > forward #3", "handle_request #1", "handle_request #2", "handle_request #2"]
    );
}

#[test]
fn interleaved_async_calls_of_two_requests_fold_under_their_own_requests() {
    // One worker thread polls two requests' async `forward` calls in turn: by host interval the
    // second request's call lies inside the first's, and had a larger GPU time (the failure CI
    // saw: the first lost its time to the second). A call really made inside `forward`, in the
    // same request, still nests; so does one in a span opened inside the request.
    let mut b = Builder::new("server", 9, &[("forward", SiteKind::Kernel), ("inner", SiteKind::Kernel)]);
    let span = |id, parent, name: &str| Span { id, parent, name: name.into() };
    b.c.spans = vec![span(1, None, "handle_request"), span(2, None, "handle_request"), span(3, Some(1), "stage")];
    b.call(0, 1, (0, 1_000), Some((100, 300, 0))).span = Some(1);
    b.call(0, 1, (200, 600), Some((300, 800, 0))).span = Some(2);
    b.call(1, 1, (250, 280), Some((120, 170, 0))).span = Some(1);
    b.call(1, 1, (700, 720), Some((180, 200, 0))).span = Some(3);
    // A later call of request 1 that the second request's call, still open, must not take.
    b.call(1, 1, (400, 450), Some((205, 215, 0))).span = Some(1);
    let folded = flame::folded(&b.c);
    let expect: BTreeMap<String, u64> = [
        ("main;handle_request;forward", 200 - 50 - 20 - 10),
        ("main;handle_request;forward;inner", 50 + 20 + 10),
        ("main;handle_request;forward", 500),
    ]
    .into_iter()
    .fold(BTreeMap::new(), |mut m, (k, v)| {
        *m.entry(k.to_owned()).or_insert(0) += v;
        m
    });
    assert_eq!(folded, expect);
    let busy: u64 = [200, 500].iter().sum();
    assert_eq!(folded.values().sum::<u64>(), busy, "each request's outermost call, counted once");
    for window in [1, 2, 64] {
        let mut f = flame::Folder::with_window(window);
        f.spans(&b.c.spans);
        let mut sorted: Vec<&Record> = b.c.records.iter().collect();
        sorted.sort_by_key(|r| r.host.end_ns);
        sorted.iter().for_each(|r| f.record(r));
        match f.finish(&analysis::Index::new(&b.c)) {
            Some(streamed) => assert_eq!(streamed, expect, "window {window}"),
            None => assert!(window < sorted.len(), "a window holding every call always folds"),
        }
    }

    // Two tasks under no application span: the GPU intervals tell them apart (a wgpu scope's
    // timestamps enclose those of the calls made inside it), and a call inside the first task's
    // still nests in it though the second's host interval holds it too.
    let mut b = Builder::new("tasks", 11, &[("forward", SiteKind::Kernel), ("inner", SiteKind::Kernel)]);
    b.call(0, 1, (0, 1_000), Some((100, 300, 0)));
    b.call(0, 1, (200, 600), Some((280, 780, 0)));
    b.call(1, 1, (250, 280), Some((120, 170, 0)));
    let folded = flame::folded(&b.c);
    let expect: BTreeMap<String, u64> =
        [("main;forward", 150 + 500), ("main;forward;inner", 50)].into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    assert_eq!(folded, expect, "nothing lost to a wrong nesting");
}

#[test]
fn the_timeline_puts_calls_that_overlap_without_nesting_on_lanes_and_drops_none() {
    // Two async calls taking turns on one thread, the GPU intervals of two threads' calls on one
    // device, and two kernels of one stream overlapping (a dependent launch): Perfetto drops a
    // complete event that overlaps another on its track without nesting.
    let mut b = Builder::new("overlap", 10, &[("forward", SiteKind::Kernel)]);
    b.call(0, 1, (0, 100), Some((10, 90, 0))).activities.push(kernel("a", Interval::new(20, 60), 0));
    b.call(0, 1, (50, 150), None);
    b.call(0, 1, (60, 70), None);
    b.call(0, 2, (55, 65), Some((40, 140, 0))).activities.push(kernel("b", Interval::new(50, 80), 0));
    b.call(0, 1, (120, 130), Some((141, 150, 0)));
    let path = save(&b.c, "overlap.gpuspan");
    let json_path = scratch("overlap.json");
    let (code, _, err) = gpuspan(&["timeline", path.to_str().unwrap(), "-o", json_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let (events, overlap) = complete_events(&json);
    assert_eq!(overlap, None, "every track's events nest");
    assert_eq!(events.len(), 5 + 3 + 2, "every call, GPU interval and kernel");
    let mut names: Vec<&str> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .filter(|n| n.contains("overlapping"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["GPU 0: gpu-a calls (overlapping 1)", "GPU 0: gpu-a stream 7 (overlapping 1)", "main (overlapping 1)"]
    );
}

#[test]
fn gpu_cost_per_request_on_a_capture_of_two_concurrent_tokio_requests() {
    // Written by tests/tests/requests/requests.rs (wgpu on lavapipe): two `handle_request` spans served at
    // once, each awaiting forward passes on tokio workers and hopping to a blocking thread.
    let c = Capture::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lavapipe_requests.gpuspan")).unwrap();
    let spans = analysis::Spans::new(&c.spans);
    let mut per_request: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for r in &c.records {
        let root = spans.chain(r.span).first().copied().expect("every call is in a request");
        assert_eq!(spans.name(root.1), "handle_request");
        let e = per_request.entry(root.0).or_default();
        e.0 += r.gpu.as_ref().map_or(0, |g| g.busy_ns);
        e.1 += 1;
    }
    assert_eq!(per_request.len(), 2);
    let row = &report::build(&c).requests[0];
    let mut totals: Vec<u64> = per_request.values().map(|v| v.0).collect();
    totals.sort();
    assert_eq!((row.span.as_str(), row.requests, row.records), ("handle_request", 2, c.records.len() as u64));
    assert_eq!((row.p50_ns, row.p99_ns, row.total_ns), (Some(totals[0]), Some(totals[1]), totals.iter().sum()));
    let folded: u64 = flame::folded(&c).values().sum();
    assert_eq!(folded, row.total_ns, "the flamegraph counts each request's GPU time once");
    let json_path = scratch("lavapipe_requests.json");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lavapipe_requests.gpuspan");
    let (code, _, err) = gpuspan(&["timeline", fixture, "-o", json_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(complete_events(&json).1, None, "every track's events nest");
}

#[test]
fn device_readings_become_counter_tracks_and_a_report_section() {
    let mut b = Builder::new("nvml", 7, &[("step", SiteKind::Kernel)]);
    // Two calls queued at once on gpu-a: launched at 0 and 10, run 100..200 and 200..300.
    b.call(0, 1, (0, 20), Some((100, 200, 0)));
    b.call(0, 1, (10, 30), Some((200, 300, 0)));
    let reading = |t: u64, util: u32, watts: f64| DeviceSample {
        time_ns: t,
        gpu_utilization_pct: Some(util),
        memory_used_bytes: Some(1 << 30),
        power_w: Some(watts),
        sm_clock_mhz: Some(1980),
        pcie_rx_bytes_per_s: Some(2e9),
        ..Default::default()
    };
    b.c.samples = vec![DeviceSamples {
        device: 0,
        samples: vec![reading(50, 0, 70.0), reading(150, 100, 300.0), reading(250, 50, 200.0)],
    }];
    let path = save(&b.c, "nvml.gpuspan");
    let out = scratch("nvml.json");
    let (code, _, err) = gpuspan(&["timeline", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let track = |name: &str, arg: &str| -> Vec<(f64, f64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .map(|e| (e["ts"].as_f64().unwrap(), e["args"][arg].as_f64().unwrap()))
            .collect()
    };
    // Times are µs from the earliest event (the first call, at 0 ns).
    assert_eq!(track("GPU 0: gpu-a utilization (%)", "%"), [(0.05, 0.0), (0.15, 100.0), (0.25, 50.0)]);
    assert_eq!(track("GPU 0: gpu-a power (W)", "W"), [(0.05, 70.0), (0.15, 300.0), (0.25, 200.0)]);
    assert_eq!(track("GPU 0: gpu-a SM clock (MHz)", "MHz").len(), 3);
    assert_eq!(track("GPU 0: gpu-a PCIe rx (B/s)", "B/s")[0].1, 2e9);
    assert!(track("GPU 0: gpu-a temperature (°C)", "°C").is_empty(), "no track for what was not read");
    let queued = track("GPU 0: gpu-a calls in flight", "calls");
    assert_eq!(queued, [(0.0, 1.0), (0.01, 2.0), (0.2, 1.0), (0.3, 0.0)], "launched, then done on the GPU");

    let r = report::build(&b.c);
    assert_eq!(r.readings.len(), 1);
    let d = &r.readings[0];
    assert_eq!(d.samples, 3);
    assert_eq!(d.gpu_utilization_pct, Some((50.0, 100.0)));
    assert_eq!(d.power_w, Some((190.0, 300.0)));
    let text = r.to_text();
    assert!(text.contains("Device readings") && !text.contains("device counters: no"), "{text}");

    // The static picture: well-formed SVG, a box per call on its thread and per GPU interval on
    // its device, a step plot per counter track.
    let svg = scratch("nvml.svg");
    let (code, _, err) = gpuspan(&["timeline", path.to_str().unwrap(), "-o", svg.to_str().unwrap(), "--svg"]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let (mut rects, mut paths, mut labels) = (0, 0, Vec::new());
    let mut in_text = false;
    loop {
        match reader.read_event().expect("well-formed XML") {
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                match e.name().as_ref() {
                    b"rect" => rects += 1,
                    b"path" => paths += 1,
                    _ => {}
                }
                in_text = e.name().as_ref() == b"text";
            }
            quick_xml::events::Event::Text(t) if in_text => labels.push(String::from_utf8_lossy(&t).into_owned()),
            quick_xml::events::Event::End(_) => in_text = false,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(rects, 1 + 2 + 2, "the background, two calls on the thread, two GPU intervals");
    for track in [
        "GPU 0: gpu-a work in flight",
        "GPU 0: gpu-a calls in flight",
        "GPU 0: gpu-a utilization",
        "GPU 0: gpu-a power",
    ] {
        assert!(labels.iter().any(|l| l == track), "{track} not among {labels:?}");
    }
    assert!(labels.iter().any(|l| l == "peak 300 W"), "{labels:?}");
    assert_eq!(paths, 7, "work and calls in flight, utilization, memory used, power, SM clock, PCIe rx");
}

#[test]
fn a_truncated_capture_reads_with_one_warning_and_bad_files_get_one_error() {
    let full = std::fs::read(FIXTURE).unwrap();
    let cut = scratch("cut.gpuspan");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let (code, out, err) = gpuspan(&["report", cut.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("warning") && err.contains("the capture is incomplete"), "{err}");
    assert!(out.contains("(incomplete capture)"), "{out}");

    let check = |name: &str, bytes: &[u8], says: &str| {
        let path = scratch(name);
        std::fs::write(&path, bytes).unwrap();
        for cmd in [&["report"][..], &["flamegraph", "--folded"], &["timeline", "-o", "/dev/null"]] {
            let mut args = cmd.to_vec();
            args.insert(1, path.to_str().unwrap());
            let (code, out, err) = gpuspan(&args);
            assert_eq!(code, 2, "{name}: {out}{err}");
            assert_eq!(err.lines().count(), 1, "{name}: {err}");
            assert!(err.starts_with("gpuspan: error: ") && err.contains(says), "{name}: {err}");
            assert!(out.is_empty(), "{name}: {out}");
        }
    };
    let mut corrupt = full.clone();
    let last = corrupt.len() - 3;
    corrupt[last] ^= 0xff;
    check("corrupt.gpuspan", &corrupt, "it is damaged at byte");
    check("foreign.json", br#"{"traceEvents": []}"#, "it is not a gpuspan capture");
    let mut future = full.clone();
    future[8] = 10;
    check("future.gpuspan", &future, "format version 10");
    check("empty.gpuspan", b"", "it is empty");
    let (code, _, err) = gpuspan(&["report", "/nonexistent/capture.gpuspan"]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(Path::new(FIXTURE).exists());
}

#[test]
fn the_streaming_report_and_flamegraph_equal_the_loaded_ones() {
    let cuda = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_cuda_saxpy.gpuspan");
    // A wide capture: the demo's nested calls repeated until a row holds more than the exact cap.
    let mut wide = fixture();
    let base = wide.records.clone();
    let mut per_site: BTreeMap<u32, usize> = BTreeMap::new();
    base.iter().for_each(|r| *per_site.entry(r.site).or_default() += 1);
    let busiest = per_site.values().copied().max().unwrap();
    for k in 1..=(stats::EXACT_CAP / busiest + 1) as u64 {
        let shift = k * 10_000_000_000;
        wide.records.extend(base.iter().cloned().map(|mut r| {
            r.host = Interval::new(r.host.start_ns + shift, r.host.end_ns + shift);
            if let Some(g) = &mut r.gpu {
                g.interval = Interval::new(g.interval.start_ns + shift, g.interval.end_ns + shift);
            }
            r
        }));
    }
    let wide_path = save(&wide, "wide.gpuspan");
    for path in [Path::new(FIXTURE), Path::new(cuda), &wide_path] {
        let loaded = Capture::open(path).unwrap();
        let (streamed, meta) = report::stream(path, false).unwrap();
        assert!(meta.records.is_empty(), "the streaming pass keeps no record");
        assert_eq!(streamed, report::build(&loaded), "{}", path.display());
        let (folded, _) = flame::stream(path, false).unwrap();
        assert_eq!(folded.stacks, flame::folded(&loaded), "{}", path.display());
    }
    // Above the cap the quantiles are the histogram's, within its stated error of the exact ones.
    let r = report::build(&wide);
    assert!(r.limits.iter().any(|l| l.contains("log-linear histogram")), "{:?}", r.limits);
    let index = analysis::Index::new(&wide);
    for s in &r.sites {
        let mut d: Vec<u64> =
            wide.records.iter().filter(|x| index.site_name(x.site) == s.site).map(|x| x.duration_ns()).collect();
        d.sort_unstable();
        for (got, q) in [(s.p50_ns, 0.5), (s.p99_ns, 0.99)] {
            let exact = stats::quantile(&d, q).unwrap() as f64;
            let got = got.unwrap() as f64;
            assert!((got - exact).abs() <= exact * stats::HISTOGRAM_ERROR + 0.5, "{}: {got} vs {exact}", s.site);
        }
    }
}

#[test]
fn a_bounded_folder_equals_the_exact_one_or_says_the_records_were_too_far_out_of_order() {
    for path in [FIXTURE, concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_cuda_saxpy.gpuspan")] {
        let c = Capture::open(path).unwrap();
        let index = analysis::Index::new(&c);
        let exact = flame::folded(&c);
        let mut by_start = c.records.clone();
        by_start.sort_by_key(|r| (r.host.start_ns, std::cmp::Reverse(r.host.end_ns)));
        for window in [1, 2, 5, 1000] {
            let mut f = flame::Folder::with_window(window);
            c.records.iter().for_each(|r| f.record(r));
            if let Some(folded) = f.finish(&index) {
                assert_eq!(folded, exact, "window {window}");
            }
            // In start order every window nests exactly.
            let mut f = flame::Folder::with_window(window);
            by_start.iter().for_each(|r| f.record(r));
            let folded = f.finish(&index).expect("records in start order are never out of order");
            let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
            assert_eq!(total(&folded), total(&exact), "window {window}");
        }
        // Newest first: a window of one nests a call, then gets an earlier one.
        let mut f = flame::Folder::with_window(1);
        c.records.iter().rev().for_each(|r| f.record(r));
        assert!(f.finish(&index).is_none(), "reversed records are out of order for a window of one");
    }
}

#[test]
fn a_bounded_idle_analysis_equals_the_exact_one_or_says_the_records_were_too_far_out_of_order() {
    for path in [FIXTURE, concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_cuda_saxpy.gpuspan")] {
        let c = Capture::open(path).unwrap();
        let index = analysis::Index::new(&c);
        let exact = idle::analyse(&c);
        let mut by_start = c.records.clone();
        by_start.sort_by_key(|r| r.host.start_ns);
        let mut some = 0;
        for window in [1, 2, 5, 1000] {
            for records in [&c.records, &by_start] {
                let mut b = idle::Builder::with_window(window);
                records.iter().for_each(|r| b.record(r));
                if let Some(devices) = b.finish(&index) {
                    some += 1;
                    assert_eq!(devices, exact, "window {window}");
                }
            }
        }
        assert!(some >= 2, "a window larger than the capture always answers");
        let mut b = idle::Builder::with_window(1);
        c.records.iter().rev().for_each(|r| b.record(r));
        assert!(b.finish(&index).is_none(), "reversed records are out of order for a window of one");
    }
}

#[test]
fn an_h100_capture_carries_nvml_readings_that_become_counter_tracks() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_multi_gpu_nvml.gpuspan");
    let c = Capture::open(path).expect("the H100 fixture reads");
    assert!(c.truncation.is_none() && c.end.is_some());
    // NVML's own readings of the H100, taken by the device monitor while the example ran.
    let samples: Vec<&DeviceSample> = c.samples.iter().flat_map(|d| &d.samples).collect();
    assert!(!samples.is_empty(), "the monitor's readings are in the capture");
    assert!(samples.iter().all(|s| s.power_w.is_some_and(|w| w > 0.0) && s.sm_clock_mhz.is_some()));
    let out = scratch("h100-nvml.json");
    let (code, _, err) = gpuspan(&["timeline", path, "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("JSON");
    let counters: std::collections::BTreeSet<String> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect();
    assert!(counters.iter().any(|n| n.contains("power")), "{counters:?}");
    assert!(counters.iter().any(|n| n.contains("utilization")), "{counters:?}");
    let (code, text, err) = gpuspan(&["report", path]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("Device readings") && text.contains("H100"), "{text}");
}

/// A capture of format 4 written on lavapipe (`tests/bracket_capture.rs` in gpuspan-tests, with
/// GPUSPAN_TEST_KEEP): one site whose brackets ended with their last submission, one whose ended
/// at exit. The command says which, both as upper bounds without a bandwidth, in text and CSV.
#[test]
fn the_report_says_where_each_bracket_ended() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lavapipe_brackets.gpuspan");
    let (code, text, err) = gpuspan(&["report", path]);
    assert_eq!(code, 0, "{err}");
    for (site, label) in [("upload_seen ", "bracket to last submit"), ("upload_in_callee ", "bracket to exit")] {
        let line = text.lines().find(|l| l.starts_with(site)).unwrap_or_else(|| panic!("{site}in {text}"));
        assert!(line.contains(label) && line.contains("≤ ") && !line.contains("/s"), "{line}");
    }
    let (code, csv, err) = gpuspan(&["report", path, "--format", "csv", "--table", "sites"]);
    assert_eq!(code, 0, "{err}");
    assert!(csv.lines().any(|l| l.starts_with("upload_seen,") && l.contains("(bracket to last submit)")), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("upload_in_callee,") && l.contains("(bracket to exit)")), "{csv}");
    let (code, json, err) = gpuspan(&["report", path, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let ends: BTreeMap<String, serde_json::Value> = v["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| (s["site"].as_str().unwrap_or_default().to_owned(), s["bracket_ends"].clone()))
        .collect();
    assert_eq!(ends["upload_seen"], serde_json::json!(["last_submit"]));
    assert_eq!(ends["upload_in_callee"], serde_json::json!(["exit"]));
    // Brackets are bounds, not work: a capture of brackets only shows no busy device (it read
    // 83.8 % busy when they were counted).
    assert_eq!(v["devices"], serde_json::json!([]), "{}", v["devices"]);
}

/// Selected spans (sites of kind `span`, capture format 6): nested spans under CUPTI, where the
/// innermost selected span owns its launches (a record's busy time is its self time), and
/// nested wgpu brackets, where the outer bracket holds the inner one. `gpuspan report` gives
/// each span name's GPU self and inclusive time, in its JSON, CSV and text.
#[test]
fn the_report_gives_selected_spans_self_and_inclusive_gpu_time() {
    use SiteKind::*;
    let mut b = Builder::new(
        "spans",
        12,
        &[("step", Span), ("forward", Span), ("gemm", Kernel), ("frame", Span), ("pass", Span)],
    );
    let span = |id, parent, name: &str| gpuspan_capture::Span { id, parent, name: name.into() };
    // Two `step` instances (nodes 1, 4), each with a `forward` inside (nodes 2, 5), one through
    // an unselected span (node 3, `layer`); an annotated `gemm` inside the second `forward`.
    b.c.spans = vec![
        span(1, None, "step"),
        span(2, Some(1), "forward"),
        span(4, None, "step"),
        span(3, Some(4), "layer"),
        span(5, Some(3), "forward"),
        span(10, None, "frame"),
        span(11, Some(10), "pass"),
        span(12, None, "frame"),
    ];
    let cupti = |r: &mut Record, busy: u64| {
        let g = r.gpu.as_mut().unwrap();
        g.source = TimingSource::Cupti;
        g.busy_ns = busy;
    };
    // Children are recorded before their parents (they close first), in any order.
    cupti(b.call(1, 1, (10, 90), Some((20, 80, 0))).tap_span(2), 30);
    cupti(b.call(0, 1, (0, 100), Some((5, 95, 0))).tap_span(1), 50);
    cupti(b.call(2, 2, (120, 130), Some((121, 129, 0))).tap_span(5), 8);
    cupti(b.call(1, 2, (110, 190), Some((115, 185, 0))).tap_span(5), 20);
    cupti(b.call(0, 1, (100, 200), Some((101, 199, 0))).tap_span(4), 10);
    // wgpu brackets: `frame` (node 10) holds `pass` (node 11); a second `frame` alone.
    let bracket = |r: &mut Record| r.gpu.as_mut().unwrap().bracket = Bracket::Exit;
    bracket(b.call(4, 1, (300, 350), Some((320, 360, 0))).tap_span(11));
    bracket(b.call(3, 1, (250, 500), Some((260, 460, 0))).tap_span(10));
    bracket(b.call(3, 1, (600, 700), Some((610, 650, 0))).tap_span(12));
    b.c.aggregates = vec![Aggregate { site: 0, calls: 2, ..Aggregate::default() }];
    let r = report::build(&b.c);
    let row = |n: &str| r.spans.iter().find(|s| s.span == n).unwrap_or_else(|| panic!("{n}: {:?}", r.spans)).clone();
    let (step, forward, frame, pass) = (row("step"), row("forward"), row("frame"), row("pass"));
    // step: self 50 + 10; inclusive adds forward's 30 and (through `layer`) forward's 20 and gemm's 8.
    assert_eq!((step.recorded, step.calls, step.self_ns, step.inclusive_ns), (2, Some(2), 60, 60 + 30 + 20 + 8));
    assert_eq!((step.self_p50_ns, step.inclusive_p50_ns), (Some(10), Some(38)), "{step:?}");
    assert_eq!((step.self_p99_ns, step.inclusive_p99_ns), (Some(50), Some(80)), "{step:?}");
    assert_eq!((forward.self_ns, forward.inclusive_ns), (50, 58), "gemm inside the second forward");
    assert!(!step.bracketed);
    // frame: brackets of 200 and 40, the first holding pass's 40: self 160 + 40.
    assert_eq!((frame.recorded, frame.self_ns, frame.inclusive_ns), (2, 160 + 40, 200 + 40));
    assert_eq!((pass.self_ns, pass.inclusive_ns), (40, 40));
    assert!(frame.bracketed && pass.bracketed);
    assert_eq!(r.sites.iter().find(|s| s.site == "step").map(|s| s.kind.as_str()), Some("span"));
    assert_eq!(r.spans.len(), 4, "only span sites: {:?}", r.spans);
    let json = serde_json::to_value(&r).unwrap();
    let step_json = json["spans"].as_array().unwrap().iter().find(|s| s["span"] == "step").unwrap().clone();
    assert_eq!((step_json["self_ns"].as_u64(), step_json["inclusive_ns"].as_u64()), (Some(60), Some(118)));
    let path = save(&b.c, "spans_self_inclusive.gpuspan");
    let (code, csv, err) = gpuspan(&[
        "report".as_ref(),
        path.as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
        "--table".as_ref(),
        "spans".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("span,recorded,all calls,GPU self (ns),GPU inclusive (ns)"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("step,2,2,60,118,")), "{csv}");
    let (code, text, _) = gpuspan(&["report".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0);
    assert!(text.contains("Selected spans") && text.contains("≤ 200"), "{text}");
    // `gpuspan timeline`: a span on tracks of its own, host and GPU; an annotated call on its
    // thread's and its device's.
    let out = scratch("spans_timeline.json");
    let (code, _, err) = gpuspan(&["timeline".as_ref(), path.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let track = |e: &serde_json::Value| {
        events
            .iter()
            .find(|m| m["ph"] == "M" && m["name"] == "thread_name" && m["pid"] == e["pid"] && m["tid"] == e["tid"])
            .and_then(|m| m["args"]["name"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let tracks = |name: &str| -> Vec<String> {
        let mut t: Vec<String> = events.iter().filter(|e| e["ph"] == "X" && e["name"] == name).map(track).collect();
        t.sort();
        t.dedup();
        t
    };
    assert_eq!(tracks("step"), ["GPU 0: gpu-a span: step", "span: step"]);
    assert_eq!(tracks("gemm"), ["GPU 0: gpu-a calls", "worker"]);
    // The flamegraph: a span's frame once (its record names its own instance), its children
    // under it, the inner bracket's time taken out of the outer one's.
    let folded = flame::folded(&b.c);
    assert_eq!(folded.get("main;frame"), Some(&200), "{folded:?}");
    assert_eq!(folded.get("main;frame;pass"), Some(&40), "{folded:?}");
    assert!(folded.keys().all(|k| !k.contains("frame;frame") && !k.contains("step;step")), "{folded:?}");
}

/// Sets a record's span chain, for the builder's chained calls.
trait TapSpan {
    fn tap_span(&mut self, span: u64) -> &mut Self;
}

impl TapSpan for Record {
    fn tap_span(&mut self, span: u64) -> &mut Self {
        self.span = Some(span);
        self
    }
}
