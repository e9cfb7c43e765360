//! The multi-GPU example and its launcher, run as the programs they are.
//!
//! Without a GPU (CI): the example says so in one line and exits 0; the launcher starts two ranks
//! with `WORLD_SIZE=2`, both exit 0, and `gpuspan merge` makes one timeline with both processes.
//! On a GPU machine (`#[ignore = "needs a GPU"]`, run by `scripts/gpu run`): the launcher runs one
//! rank per GPU and every check of the example holds (calls on their devices, NCCL kernels in
//! their call, copies between GPUs with their link where there are two).
//!
//! The programs are looked for in `MULTI_GPU_BINS`, else next to this test's `deps/` folder:
//! `cargo build -p gpuspan-examples --no-default-features --features cuda,nccl,otlp --bin multi_gpu
//! --bin multi_gpu_launch && cargo build -p gpuspan-cli` first (`otlp`: the launcher's and the ranks'
//! spans, sent to the collector `scripts/collector` runs; scripts/test installs it).
#![cfg(feature = "cuda")]

use crate::otlp_common;

use otlp_common::{all_named, assert_no_orphans, by_name, test_id, Collector};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

fn bin(name: &str) -> PathBuf {
    let dir = match std::env::var_os("MULTI_GPU_BINS") {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe().expect("test binary path");
            exe.parent().and_then(|deps| deps.parent()).expect("test binary in target/<profile>/deps").to_owned()
        }
    };
    let p = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.is_file(),
        "{} is missing: build it first with `cargo build -p gpuspan-examples --no-default-features --features \
         cuda,nccl,otlp --bin multi_gpu --bin multi_gpu_launch && cargo build -p gpuspan-cli`",
        p.display()
    );
    p
}

/// A command with none of the variables a launcher or the developer's shell may have set.
fn clean(program: PathBuf) -> Command {
    let mut c = Command::new(program);
    for v in [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "CUDA_VISIBLE_DEVICES",
        "TRACEPARENT",
        "GPUSPAN_CAPTURE",
        "GPUSPAN_TRACE_FILE",
        "MULTI_GPU_NCCL_ID",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ] {
        c.env_remove(v);
    }
    c
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn no_gpu_here() {
    assert!(
        gpuspan::cuda::probe().is_err(),
        "this test checks the path without a GPU; on a GPU machine run the `--ignored` ones"
    );
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuspan-multi-gpu-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn without_a_gpu_the_example_says_so_in_one_line_and_exits_0() {
    no_gpu_here();
    let out = clean(bin("multi_gpu")).output().expect("run multi_gpu");
    let (stdout, stderr) = text(&out);
    println!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(out.status.success(), "{}", out.status);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(lines[0].starts_with("multi_gpu: no CUDA device found, nothing to run ("), "{}", lines[0]);
    assert_eq!(stderr, "", "nothing else: no summary, timeline or monitor message when nothing ran");
}

#[test]
fn without_a_gpu_the_launcher_runs_two_ranks_and_merges_their_captures() {
    no_gpu_here();
    let dir = temp_dir("launch");
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let out = clean(bin("multi_gpu_launch"))
        .args(["--out".as_ref(), dir.as_os_str(), "--program".as_ref(), bin("multi_gpu").as_os_str()])
        .env("WORLD_SIZE", "2")
        .env("TRACEPARENT", traceparent)
        .env("GPUSPAN_CLI", bin("gpuspan"))
        .output()
        .expect("run multi_gpu_launch");
    let (stdout, stderr) = text(&out);
    println!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(out.status.success(), "{}", out.status);
    assert!(stdout.contains(&format!("2 rank(s) of {}, TRACEPARENT={traceparent}", bin("multi_gpu").display())));

    // Each rank started with its own GPU first, said it has none, and exited 0.
    let mut pids = Vec::new();
    for (rank, visible) in [(0, "0,1"), (1, "1,0")] {
        let started = format!("multi_gpu_launch: rank {rank}: pid ");
        let line = stdout.lines().find(|l| l.starts_with(&started)).unwrap_or_else(|| panic!("rank {rank} started"));
        let (pid, rest) = line[started.len()..].split_once(", ").expect("pid, devices");
        assert_eq!(rest, format!("CUDA_VISIBLE_DEVICES={visible}"));
        pids.push(pid.parse::<u64>().expect("pid"));
        let said = format!("multi_gpu rank {rank}/2: no CUDA device found, nothing to run (");
        assert_eq!(stdout.lines().filter(|l| l.starts_with(&said)).count(), 1, "rank {rank} said it once");
        assert!(stdout.contains(&format!("--- rank {rank}: exit 0,")), "rank {rank} exit 0");
        assert!(dir.join(format!("rank{rank}.gpuspan")).is_file(), "rank {rank}'s capture");
    }

    // The ranks side by side: nothing ran on a GPU, so nothing to compare, said so.
    assert!(stdout.contains("- no GPU compute timed in any rank: nothing to compare"), "{stdout}");

    // One timeline, one process per rank, named after the program and labelled with its capture.
    let merged: Value = serde_json::from_slice(&std::fs::read(dir.join("merged.trace.json")).expect("merged timeline"))
        .expect("valid JSON");
    let names: Vec<(u64, String)> = merged["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names.iter().map(|(p, _)| *p).collect::<BTreeSet<_>>(), BTreeSet::from([1, 2]));
    for (i, (_, name)) in names.iter().enumerate() {
        assert!(name.starts_with(&format!("multi_gpu (pid {})", pids[i])), "{name}");
        assert!(name.ends_with(&format!("rank{i}.gpuspan]")), "{name}");
    }
    let captured: Vec<u64> = merged["otherData"]["captures"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|c| c["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(captured, pids, "the merge holds the processes the launcher started");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With an OTLP endpoint, one trace for the job: the launcher's own span, a child of the
/// `TRACEPARENT` it was given, and under it each rank's span with the rank on its resource. No
/// span's parent is missing from what the collector received but the given one.
#[test]
fn the_launcher_exports_the_job_span_every_rank_hangs_under() {
    no_gpu_here();
    let collector = Collector::shared_or_own();
    let id = test_id("launch-otlp");
    let (trace, given) = ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174");
    let dir = temp_dir("otlp");
    let out = clean(bin("multi_gpu_launch"))
        .args(["--out".as_ref(), dir.as_os_str(), "--program".as_ref(), bin("multi_gpu").as_os_str()])
        .env("WORLD_SIZE", "2")
        .env("TRACEPARENT", format!("00-{trace}-{given}-01"))
        .env("GPUSPAN_CLI", bin("gpuspan"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.grpc_url())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_RESOURCE_ATTRIBUTES", format!("test.id={id}"))
        .output()
        .expect("run multi_gpu_launch");
    let (stdout, stderr) = text(&out);
    println!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(out.status.success(), "{}", out.status);

    collector.wait_spans(&id, Duration::from_secs(20), |s| s.len() >= 3);
    std::thread::sleep(Duration::from_millis(300)); // nothing more should come
    let spans = collector.spans(&id);
    let names: Vec<&Value> = spans.iter().map(|s| &s["name"]).collect();
    assert_eq!(spans.len(), 3, "the job's span and one per rank: {names:?}");
    assert!(spans.iter().all(|s| s["trace_id"] == trace), "every span joins the given trace");
    assert_no_orphans(&spans, &[given]);
    let job = by_name(&spans, "multi_gpu_launch");
    assert_eq!(job["parent_span_id"], given, "the job's span is a child of the launcher's TRACEPARENT");
    assert_eq!(job["attributes"]["job.world_size"], 2);
    let job_id = job["span_id"].as_str().expect("span id");
    assert!(
        stdout.contains(&format!("TRACEPARENT=00-{trace}-{job_id}-01")),
        "the ranks were given the job's span as their parent: {stdout}"
    );
    let mut ranks: Vec<i64> = all_named(&spans, "multi_gpu")
        .into_iter()
        .map(|r| {
            assert_eq!(r["parent_span_id"], job_id, "a rank hangs under the job's span");
            assert_eq!(r["attributes"]["job.rank"], r["resource"]["job.rank"]);
            r["resource"]["job.rank"].as_i64().expect("the rank on the resource")
        })
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_launcher_refuses_more_ranks_than_gpus_it_was_given() {
    let out = clean(bin("multi_gpu_launch"))
        .args(["-n", "3", "--out"])
        .arg(temp_dir("refuse"))
        .env("CUDA_VISIBLE_DEVICES", "0,1")
        .output()
        .expect("run multi_gpu_launch");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("3 ranks but 2 GPU(s) (0,1): one rank per GPU"), "{stderr}");
    assert!(!stdout.contains("rank 0: pid"), "nothing started: {stdout}");
}

/// One rank per GPU of this machine, each checked by the example itself; the merged timeline
/// holds every rank's GPU work on its device's tracks.
#[test]
#[ignore = "needs a GPU"]
fn on_the_gpus_every_rank_times_its_calls_on_its_device() {
    let gpus = std::fs::read_dir("/proc/driver/nvidia/gpus").map_or(0, |d| d.count());
    assert!(gpus > 0 && gpuspan::cuda::probe().is_ok(), "this test needs a GPU (run it on a GPU machine: scripts/gpu)");
    let dir = temp_dir("gpu");
    let out = clean(bin("multi_gpu_launch"))
        .args(["--out".as_ref(), dir.as_os_str(), "--program".as_ref(), bin("multi_gpu").as_os_str()])
        .args(["--timeout", "300"])
        .env("GPUSPAN_CLI", bin("gpuspan"))
        .output()
        .expect("run multi_gpu_launch");
    let (stdout, stderr) = text(&out);
    println!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(out.status.success(), "{}", out.status);
    assert!(!stdout.contains("CHECK FAILED"), "the example's checks");
    for rank in 0..gpus {
        let who = if gpus > 1 { format!("multi_gpu rank {rank}/{gpus}") } else { "multi_gpu".to_owned() };
        assert!(stdout.contains(&format!("{who}: GPU 0: {} compute calls", 8)), "{who}: its calls on its GPU 0");
        let nccl = stdout.lines().find(|l| l.starts_with(&format!("{who}: NCCL "))).unwrap_or_default();
        assert!(nccl.contains("all-reduce") && nccl.contains("(Cupti); inside the call"), "{who}: NCCL ran: {nccl:?}");
        if gpus > 1 {
            // Both ways of copying (cuMemcpyPeerAsync, cuMemcpyAsync on unified addresses).
            for site in ["peer_copy", "peer_copy_uva"] {
                let copy =
                    stdout.lines().find(|l| l.starts_with(&format!("{who}: {site} GPU 0 → GPU 1"))).unwrap_or_default();
                assert!(copy.contains("Cupti timing; link "), "{who}: {site} timed: {copy:?}");
            }
        } else {
            assert!(stdout.contains("one GPU visible: no copy between GPUs (it needs two)"));
        }
    }
    // The device monitor's link peaks reach each rank's capture (format 3), and rank 0's copies
    // between host and device are measured against its GPU's PCIe peak. Only rank 0: captures
    // label the monitor's GPUs by NVML index, and a rank's records theirs by CUDA ordinal, which
    // CUDA_VISIBLE_DEVICES makes 0 on every rank (decision 29).
    for rank in 0..gpus {
        let path = dir.join(format!("rank{rank}.gpuspan"));
        let c = gpuspan_capture::Capture::open(&path).expect("the rank's capture");
        println!("rank {rank}: link peaks {:?}", c.links);
        assert!(
            !c.links.is_empty() && c.links.iter().all(|l| l.peak.pcie_bytes_per_s.is_some_and(|p| p > 1e9)),
            "rank {rank}: every GPU the monitor read has its PCIe peak: {:?}",
            c.links
        );
        if rank > 0 {
            continue;
        }
        let report = clean(bin("gpuspan"))
            .args(["report".as_ref(), path.as_os_str(), "--format".as_ref(), "json".as_ref()])
            .output()
            .expect("gpuspan report");
        assert!(report.status.success(), "{}", text(&report).1);
        let json: Value = serde_json::from_slice(&report.stdout).expect("the report's JSON");
        let rows = json["transfers"].as_array().expect("transfer rows");
        let up: Vec<f64> = rows
            .iter()
            .filter(|t| t["direction"] == "cpu_to_gpu")
            .filter_map(|t| t["link_efficiency"].as_f64())
            .collect();
        println!("rank 0: link efficiency of uploads {up:?}");
        assert!(
            !up.is_empty() && up.iter().all(|e| *e > 0.0 && *e <= 1.0),
            "rank 0's uploads against the link: {rows:?}"
        );
    }
    let merged: Value =
        serde_json::from_slice(&std::fs::read(dir.join("merged.trace.json")).expect("merged")).expect("valid JSON");
    let events = merged["traceEvents"].as_array().expect("events");
    for pid in 1..=gpus as u64 {
        let kernels = events.iter().filter(|e| e["pid"] == pid && e["cat"] == "gpu.activity" && e["ph"] == "X").count();
        let tracks: Vec<&str> = events
            .iter()
            .filter(|e| e["pid"] == pid && e["name"] == "thread_name" && e["tid"].as_u64() >= Some(1 << 32))
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        println!("process {pid}: {kernels} kernels and copies; GPU tracks {tracks:?}");
        assert!(kernels > 0, "process {pid} has GPU work");
        assert!(tracks.iter().any(|t| t.contains("calls")), "process {pid} has a device track: {tracks:?}");
    }
}
