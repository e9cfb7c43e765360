//! Link efficiency in `gpuspan report`: copies between host and device against the PCIe peak a
//! capture of format 3 holds per device, on a synthetic capture whose answers are exact and on
//! the committed fixtures (formats 1 and 2, which hold no peak).

use gpuspan_capture::*;
use gpuspan_cli::report;
use std::path::PathBuf;
use std::process::Command;

/// 50 GB/s: percentages of it come out exact.
const PEAK: f64 = 50e9;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuspan-link-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn gpuspan(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuspan")).args(args).output().expect("the binary runs");
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(!e.contains("panicked"), "{e}");
    (out.status.code().unwrap_or(-1), o, e)
}

fn gen5(bytes_per_s: f64) -> LinkPeak {
    LinkPeak {
        pcie_generation: Some(5),
        pcie_width: Some(16),
        pcie_bytes_per_s: Some(bytes_per_s),
        nvlink_bytes_per_s: None,
    }
}

fn copy(name: &str, bytes: u64, ns: u64, direction: Direction, src: MemoryKind, dst: MemoryKind) -> (Activity, u64) {
    let a = Activity {
        name: name.into(),
        interval: Interval::new(0, ns),
        kind: ActivityKind::Copy { bytes, direction: Some(direction), src, dst },
        stream: Some(7),
        device: None,
    };
    (a, ns)
}

/// One call per copy, each on its device, one after another; `gpu-a` (key 0) has a 50 GB/s
/// link, `gpu-b` (key 1) none.
fn synthetic() -> Capture {
    use Direction::*;
    use MemoryKind::*;
    let mut c = Capture::new(Header::new("links", 1));
    let mut site = Site::new(0, "copies", SiteKind::Transfer);
    site.backend = Backend::Cuda;
    c.sites = vec![site];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    let gpu = |key, name: &str| gpuspan_capture::Device { key, id: key, name: name.into() };
    c.devices = vec![gpu(0, "gpu-a"), gpu(1, "gpu-b")];
    c.links = vec![DeviceLink { device: 0, peak: gen5(PEAK) }];
    let copies = [
        // 40 GB/s: 80 % of the peak.
        (copy("memcpy HtoD", 40_000_000, 1_000_000, CpuToGpu, Pinned, Device), 0),
        // 8 GB/s: 16 %, large and pageable: a finding.
        (copy("memcpy HtoD", 8_000_000, 1_000_000, CpuToGpu, Pageable, Device), 0),
        // 1 GB/s, but under 1 MiB: in its row's efficiency, not judged alone.
        (copy("memcpy HtoD", 1_000_000, 1_000_000, CpuToGpu, Pageable, Device), 0),
        // 5 GB/s: 10 %, large and pinned: a finding.
        (copy("memcpy DtoH", 2_000_000, 400_000, GpuToCpu, Device, Pinned), 0),
        // 12.5 GB/s: exactly 25 %, not below it.
        (copy("memcpy DtoH", 5_000_000, 400_000, GpuToCpu, Device, Pageable), 0),
        // Between two GPUs: not over the host link.
        (copy("memcpy DtoD", 64_000_000, 100_000, GpuToGpu, Device, Device), 0),
        // On a device whose peak the capture lacks.
        (copy("memcpy HtoD", 4_000_000, 1_000_000, CpuToGpu, Managed, Device), 1),
    ];
    let mut t = 1_000_000u64;
    for (scope, ((mut a, ns), device)) in copies.into_iter().enumerate() {
        let mut r = Record::new(0, scope as u64 + 1, 1, Interval::new(t, t + ns + 2_000));
        a.interval = Interval::new(t + 1_000, t + 1_000 + ns);
        a.device = Some(device);
        let mut g = Gpu::new(a.interval, TimingSource::Cupti);
        g.device = Some(device);
        r.gpu = Some(g);
        r.bytes = match a.kind {
            ActivityKind::Copy { bytes, .. } => Some(bytes),
            _ => None,
        };
        r.activities.push(a);
        c.records.push(r);
        t += 10_000_000;
    }
    c.end = Some(End { end_ns: t, records: c.records.len() as u64, ..End::default() });
    c
}

fn row<'a>(r: &'a report::Report, name: &str, src: &str) -> &'a report::TransferRow {
    r.transfers
        .iter()
        .find(|t| t.transfer == name && t.src_kind.as_deref() == Some(src))
        .unwrap_or_else(|| panic!("no row {name} from {src}: {:?}", r.transfers))
}

#[test]
fn transfer_rows_carry_bandwidth_over_the_link_peak_and_slow_large_copies_are_findings() {
    let r = report::build(&synthetic());
    let eff = |name, src| (row(&r, name, src).link_efficiency, row(&r, name, src).link_peak_bytes_per_s);
    assert_eq!(eff("memcpy HtoD", "pinned"), (Some(0.8), Some(PEAK)));
    // The row's two copies together: 9 MB in 2 ms, 4.5 GB/s.
    assert_eq!(eff("memcpy HtoD", "pageable"), (Some(0.09), Some(PEAK)));
    let dtoh: Vec<_> = r.transfers.iter().filter(|t| t.transfer == "memcpy DtoH").collect();
    let by_dst = |k: &str| dtoh.iter().find(|t| t.dst_kind.as_deref() == Some(k)).unwrap().link_efficiency;
    assert_eq!((by_dst("pinned"), by_dst("pageable")), (Some(0.1), Some(0.25)));
    assert_eq!(eff("memcpy DtoD", "device"), (None, None), "a copy between GPUs is not over the host link");
    assert_eq!(eff("memcpy HtoD", "managed"), (None, None), "gpu-b's peak is unknown");

    let low: Vec<&report::Finding> = r.findings.iter().filter(|f| f.kind == "low_link_efficiency").collect();
    assert_eq!(low.len(), 2, "{:#?}", r.findings);
    assert_eq!(
        low[0].message,
        "1 of 2 cpu_to_gpu copies of 1.0 MiB or more on GPU 0: gpu-a ran below 25 % of the link's peak (PCIe gen 5 x16, 50.00 GB/s): they moved 7.6 MiB at 8.00 GB/s, 16.0 % of the peak; 1 of them from or to pageable host memory, which the driver stages through a pinned buffer: pin it"
    );
    assert!(
        low[1].message.starts_with(
            "1 of 2 gpu_to_cpu copies of 1.0 MiB or more on GPU 0: gpu-a ran below 25 % of the link's peak (PCIe gen 5 x16, 50.00 GB/s): they moved 1.9 MiB at 5.00 GB/s, 10.0 % of the peak; with pinned memory"
        ),
        "{}",
        low[1].message
    );
    assert_eq!(
        r.limits.iter().filter(|l| l.starts_with("link efficiency")).collect::<Vec<_>>(),
        ["link efficiency: the link's peak is unknown for GPU 1: gpu-b"]
    );
    let text = r.to_text();
    assert!(text.contains("80.0 %") && text.contains("9.0 %") && text.contains("link efficiency"), "{text}");
}

#[test]
fn json_and_csv_carry_the_efficiency_and_a_streamed_report_equals_the_loaded_one() {
    let c = synthetic();
    let path = scratch("links.gpuspan");
    let mut bytes = Vec::new();
    c.write_to(&mut bytes).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let p = path.to_str().unwrap();
    let (code, json, err) = gpuspan(&["report", p, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = v["transfers"].as_array().unwrap();
    let pinned = rows.iter().find(|t| t["transfer"] == "memcpy HtoD" && t["src_kind"] == "pinned").unwrap();
    assert_eq!((pinned["link_efficiency"].as_f64(), pinned["link_peak_bytes_per_s"].as_f64()), (Some(0.8), Some(PEAK)));
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["kind"] == "low_link_efficiency"));
    let (code, csv, err) = gpuspan(&["report", p, "--format", "csv", "--table", "transfers"]);
    assert_eq!(code, 0, "{err}");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "link efficiency (fraction of peak)").expect("the column");
    let cells: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let mut got: Vec<&str> = cells.iter().map(|c| c[col]).collect();
    got.sort_unstable();
    assert_eq!(got, ["-", "-", "0.090000", "0.100000", "0.250000", "0.800000"]);

    let (streamed, _) = report::stream(&path, false).unwrap();
    assert_eq!(streamed, report::build(&c));
}

#[test]
fn a_link_written_after_the_copies_is_still_judged_by_a_second_pass() {
    let c = synthetic();
    let path = scratch("late-link.gpuspan");
    let mut w = Writer::new(Vec::new(), &c.header).unwrap();
    let frames = c.sites.iter().cloned().map(Frame::Site).chain(c.threads.iter().cloned().map(Frame::Thread));
    for f in
        frames.chain(c.devices.iter().cloned().map(Frame::Device)).chain(c.records.iter().cloned().map(Frame::Record))
    {
        w.write(&f).unwrap();
    }
    w.write(&Frame::Link(c.links[0])).unwrap();
    w.write(&Frame::End(c.end.clone().unwrap())).unwrap();
    std::fs::write(&path, w.into_inner()).unwrap();
    let (streamed, _) = report::stream(&path, false).unwrap();
    let built = report::build(&Capture::open(&path).unwrap());
    assert_eq!(streamed, built);
    assert_eq!(built.findings.iter().filter(|f| f.kind == "low_link_efficiency").count(), 2);
}

#[test]
fn captures_of_formats_1_and_2_read_and_say_the_peak_is_unknown() {
    for name in ["h100_cuda_saxpy", "lavapipe_demo", "h100_multi_gpu_nvml"] {
        let path = format!("{}/tests/fixtures/{name}.gpuspan", env!("CARGO_MANIFEST_DIR"));
        let c = Capture::open(&path).unwrap();
        assert!(c.links.is_empty(), "{name}");
        let r = report::build(&c);
        assert!(!r.transfers.is_empty(), "{name}");
        assert!(r.transfers.iter().all(|t| t.link_efficiency.is_none()), "{name}");
        assert!(r.findings.iter().all(|f| f.kind != "low_link_efficiency"), "{name}");
        assert!(r.limits.iter().any(|l| l.starts_with("link efficiency: the link's peak is unknown")), "{name}");
        let (code, text, err) = gpuspan(&["report", &path]);
        assert_eq!(code, 0, "{err}");
        assert!(text.contains("link efficiency: the link's peak is unknown"), "{text}");
    }
}

#[test]
fn the_h100_capture_with_its_gen5_x16_peak_gets_efficiencies_equal_to_bandwidth_over_peak() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_multi_gpu_nvml.gpuspan");
    let mut c = Capture::open(path).unwrap();
    // What the monitor reports for this H100 (PCIe gen 5 x16), as a capture of format 3 holds it.
    let peak = 16.0 * 32e9 * (128.0 / 130.0) / 8.0;
    c.links.push(DeviceLink { device: 0, peak: gen5(peak) });
    let r = report::build(&c);
    let host_device: Vec<&report::TransferRow> =
        r.transfers.iter().filter(|t| t.direction.as_deref() != Some("gpu_to_gpu")).collect();
    assert_eq!(host_device.len(), 2);
    for t in &host_device {
        let e = t.link_efficiency.expect("a host↔device copy on a device with a peak");
        assert!((e - t.bandwidth_bytes_per_s.unwrap() / peak).abs() < 1e-12, "{t:?}");
    }
    // The pageable copies of this run: 7.59 GB/s up, 1.29 GB/s down, both far below 25 %.
    let low: Vec<&report::Finding> = r.findings.iter().filter(|f| f.kind == "low_link_efficiency").collect();
    assert_eq!(low.len(), 2, "{:#?}", r.findings);
    assert!(low.iter().all(|f| f.message.contains("pageable") && f.message.contains("GPU 0: NVIDIA H100 80GB HBM3")));
    assert!(r
        .transfers
        .iter()
        .find(|t| t.direction.as_deref() == Some("gpu_to_gpu"))
        .unwrap()
        .link_efficiency
        .is_none());
    assert!(r.limits.iter().all(|l| !l.starts_with("link efficiency")), "{:?}", r.limits);
}
