//! The otlp_trace example, run as its own process configured only by the environment, sends a
//! trace to a real collector: one trace joined under TRACEPARENT, parents all the way from the
//! launcher's span to the GPU spans, the rank in the resource. Without a collector it still
//! finishes, within the shutdown bound, and its summary counts what was lost.
//!
//! Needs the example built first (scripts/test does it):
//! `cargo build -p gpuspan-examples --features otlp --bin otlp_trace`.
#![cfg(feature = "otlp")]

use crate::otlp_common;

use otlp_common::{all_named, assert_no_orphans, by_name, free_port, test_id, Collector, TempDir};
use serde_json::Value as Json;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const LAUNCHER_SPAN: &str = "b7ad6b7169203331";
const REQUESTS: usize = 4;

/// target/<profile>/otlp_trace, next to this test's own deps/ directory.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("test binary in target/<profile>/deps");
    let bin = profile_dir.join(format!("otlp_trace{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: build it first with `cargo build -p gpuspan-examples --features otlp --bin otlp_trace`",
        bin.display()
    );
    bin
}

/// Runs the example with a clean OTEL environment plus `env`; `None` when it found no GPU
/// adapter outside CI (the run is then skipped, as the wgpu tests do).
fn run(env: &[(&str, &str)]) -> Option<(Output, Duration)> {
    let runtime_dir = TempDir::new("gpuspan-xdg");
    let mut cmd = Command::new(example());
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") || k == "TRACEPARENT" || k.starts_with("GPUSPAN") {
            cmd.env_remove(k);
        }
    }
    cmd.env("XDG_RUNTIME_DIR", &runtime_dir.0).env("GPUSPAN_TRACE_ALL", "1").envs(env.iter().copied());
    let t = Instant::now();
    let out = cmd.output().expect("the example runs");
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("--- otlp_trace stderr ({took:?}) ---\n{stderr}");
    if stderr.contains("no GPU adapter") && !gpuspan_tests::in_ci() {
        println!("skipped: no GPU adapter (scripts/test installs Mesa's software Vulkan driver)");
        return None;
    }
    assert!(out.status.success(), "otlp_trace failed: {}", out.status);
    Some((out, took))
}

fn attr<'a>(span: &'a Json, key: &str) -> &'a Json {
    &span["attributes"][key]
}

#[test]
fn the_example_sends_one_trace_under_traceparent_with_gpu_spans_and_ranks() {
    let collector = Collector::shared_or_own();
    let id = test_id("example");
    let traceparent = format!("00-{TRACE_ID}-{LAUNCHER_SPAN}-01");
    let resource = format!("test.id={id},deployment.environment=test");
    let Some((out, _)) = run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.grpc_url()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_RESOURCE_ATTRIBUTES", &resource),
        ("OTEL_METRIC_EXPORT_INTERVAL", "500"),
        ("TRACEPARENT", &traceparent),
        ("RANK", "3"),
        ("LOCAL_RANK", "1"),
        ("WORLD_SIZE", "4"),
    ]) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("spans exported") && !stderr.contains("lost"), "{stderr}");

    // root + 4 requests + 4 × (upload, relax, download) × (host + GPU) = 29
    let expected = 1 + REQUESTS + REQUESTS * 6;
    let spans = collector.wait_spans(&id, Duration::from_secs(20), |s| s.len() >= expected);
    println!("the collector received {} spans from the example", spans.len());
    std::thread::sleep(Duration::from_millis(300)); // nothing more should come
    let spans = collector.spans(&id);
    assert_eq!(
        spans.len(),
        expected,
        "{:#?}",
        spans
            .iter()
            .map(|s| (s["name"].clone(), s["span_id"].clone(), s["parent_span_id"].clone()))
            .collect::<Vec<_>>()
    );
    assert!(spans.iter().all(|s| s["trace_id"] == TRACE_ID), "every span joins the launcher's trace");
    assert_no_orphans(&spans, &[LAUNCHER_SPAN]);

    let r = &spans[0]["resource"];
    assert_eq!(r["service.name"], "otlp_trace", "the binary's name by default");
    assert_eq!(r["deployment.environment"], "test");
    assert_eq!(
        (r["job.rank"].as_i64(), r["job.local_rank"].as_i64(), r["job.world_size"].as_i64()),
        (Some(3), Some(1), Some(4))
    );
    assert!(r["process.pid"].as_i64().is_some() && r["host.name"].is_string());

    let root = by_name(&spans, "otlp_trace");
    assert_eq!(root["parent_span_id"], LAUNCHER_SPAN, "the run's root is a child of TRACEPARENT");
    let requests = all_named(&spans, "request");
    assert_eq!(requests.len(), REQUESTS);
    for req in &requests {
        assert_eq!(req["parent_span_id"], root["span_id"]);
        let children: Vec<&Json> = spans.iter().filter(|s| s["parent_span_id"] == req["span_id"]).collect();
        let mut names: Vec<&str> = children.iter().filter_map(|s| s["name"].as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["download", "relax", "upload"], "gpuspan's host spans sit under the request span");
        for host in children {
            let name = host["name"].as_str().unwrap();
            let gpu: Vec<&Json> = spans.iter().filter(|s| s["parent_span_id"] == host["span_id"]).collect();
            assert_eq!(gpu.len(), 1, "{name} has its GPU span");
            let gpu = gpu[0];
            assert_eq!(gpu["name"], format!("{name} [gpu]"));
            assert_eq!(attr(gpu, "gpu.timing.source"), "gpu_timestamp");
            assert_eq!(attr(gpu, "gpu.backend"), "wgpu");
            assert_eq!(attr(host, "gpuspan.role"), "host");
            // The GPU ran the work after the CPU began recording it, on its own clock: the
            // GPU span is not the host interval.
            assert!(
                gpu["start_ns"].as_u64() >= host["start_ns"].as_u64(),
                "{name}: GPU starts after the host call began"
            );
            // Before any causality correction, the GPU start was placed no earlier than the
            // call's start minus the error the record stated: strict, no tolerance added.
            let corrected_ns = gpu["attributes"].get("gpu.clock_corrected_ns").and_then(Json::as_f64).unwrap_or(0.0);
            let error_ns = attr(gpu, "gpu.clock_error_us").as_f64().unwrap() * 1000.0;
            assert!(
                corrected_ns <= error_ns,
                "{name}: placed {corrected_ns} ns before its call, beyond its stated error of {error_ns} ns"
            );
            assert_ne!(
                (gpu["start_ns"].as_u64(), gpu["end_ns"].as_u64()),
                (host["start_ns"].as_u64(), host["end_ns"].as_u64())
            );
            let gpu_ns = gpu["end_ns"].as_u64().unwrap() - gpu["start_ns"].as_u64().unwrap();
            let label = if name == "relax" { "gpu.duration_us" } else { "gpu_transfer.duration_us" };
            let busy_us = attr(gpu, label).as_f64().unwrap();
            assert!(busy_us * 1000.0 <= gpu_ns as f64 + 1.0, "{name}: busy time within the GPU span");
        }
    }

    let points = collector.wait_metrics(&id, Duration::from_secs(20), |m| {
        m.iter().any(|p| p["name"] == "gpuspan.call.duration" && p["attributes"]["gpuspan.site"] == "relax")
    });
    let relax = points
        .iter()
        .rev()
        .find(|p| p["name"] == "gpuspan.call.duration" && p["attributes"]["gpuspan.site"] == "relax")
        .unwrap();
    assert_eq!(relax["count"], REQUESTS as u64);
    assert_eq!(relax["attributes"]["gpu.timing.source"], "gpu_timestamp");
}

/// The number after `prefix` in `text`, e.g. `took 1.23 s`.
fn number_after(text: &str, prefix: &str) -> Option<f64> {
    let at = text.find(prefix)? + prefix.len();
    text[at..].split(|c: char| !(c.is_ascii_digit() || c == '.')).next()?.parse().ok()
}

#[test]
fn without_a_collector_the_example_finishes_in_time_and_counts_its_losses() {
    let secret = "s3cr3t-api-key";
    let headers = format!("authorization=Bearer%20{secret},x-team=gpu");
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let Some((out, took)) = run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
        // Bad values: one message each, defaults, the run goes on.
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "smoke-signals"),
        ("RANK", "first"),
    ]) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(secret), "header values are never printed");
    for bad in ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_PROTOCOL", "RANK=\"first\""] {
        let said = stderr.lines().filter(|l| l.starts_with("gpuspan: ") && l.contains(bad)).count();
        assert_eq!(said, 1, "one message for {bad}:\n{stderr}");
    }
    let line = stderr.lines().find(|l| l.starts_with("gpuspan: OTLP export to")).expect("the export's report line");
    let shutdown = number_after(line, "shutdown took ").expect("shutdown time");
    let lost = number_after(line, "exported, ").expect("lost count");
    let in_summary = stderr
        .lines()
        .find(|l| l.starts_with("lost: ") && l.contains("not delivered to the OTLP collector"))
        .and_then(|l| number_after(l, "lost: "))
        .expect("the summary counts the spans");
    println!("collector absent: process ran {took:?}, OTLP shutdown {shutdown} s, {lost} spans lost, summary says {in_summary}");
    assert!(shutdown <= 5.5, "{line}");
    assert_eq!(lost as usize, 1 + REQUESTS + REQUESTS * 6, "{line}");
    assert_eq!(in_summary, lost);
}
