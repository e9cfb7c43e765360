//! The collector fails and the program does not: absent, hung, killed and restarted, too slow
//! for a burst, behind TLS with a private CA and a header. Every lost span is counted, and
//! shutdown stays within its 5 s bound.
#![cfg(feature = "otlp")]

use crate::otlp_common;

use gpuspan::otlp::{Otlp, OtlpConfig, Protocol};
use gpuspan::{gpu_kernel, Backend, Site, SiteDesc, SiteKind, TimingSource};
use gpuspan_testing::record::{Activity, ActivityKind, GpuTiming, Interval, KernelGeometry, Record};
use gpuspan_testing::OtlpExport;
use otlp_common::{assert_no_orphans, free_port, test_id, Collector, Proc, TempDir};
use rusty_fork::rusty_fork_test;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// Each test runs in its own process (rusty-fork): each starts the process's OTLP export, of
// which one runs at a time, and reads the losses it caused in the process's summary.
#[gpu_kernel(trace_all)]
fn work(x: u64) -> u64 {
    x.wrapping_mul(7)
}

#[gpu_kernel(trace_all)]
fn before_crash() {}

#[gpu_kernel(trace_all)]
fn during_outage() {}

#[gpu_kernel(trace_all)]
fn after_restart() {}

#[gpu_kernel(trace_all)]
fn burst() {}

const BOUND: Duration = Duration::from_secs(5);

fn pipeline(protocol: Protocol, endpoint: String, id: &str) -> OtlpConfig {
    OtlpConfig::new()
        .protocol(protocol)
        .endpoint(endpoint)
        .resource_attribute("test.id", id)
        .schedule_delay(Duration::from_millis(50))
        .metric_interval(Duration::from_millis(200))
}

fn lost_in_summary(what: &str) -> u64 {
    gpuspan::summary().losses.iter().filter(|(w, _)| w.contains(what)).map(|(_, n)| *n).sum()
}

rusty_fork_test! {
    #[test]
    fn absent_collector_program_finishes_within_the_bound_and_losses_are_counted() {
        for protocol in [Protocol::Grpc, Protocol::HttpProtobuf] {
            let before = lost_in_summary("not delivered to the OTLP collector");
            let id = test_id("absent");
            let otlp = pipeline(protocol, format!("http://127.0.0.1:{}", free_port()), &id).start().unwrap();
            for i in 0..50 {
                work(i);
            }
            std::thread::sleep(Duration::from_millis(300)); // some exports fail while running
            let t = Instant::now();
            let report = otlp.shutdown();
            let took = t.elapsed();
            println!("absent collector, {protocol:?}: {report}");
            assert!(took <= BOUND + Duration::from_millis(500), "shutdown took {took:?}");
            assert_eq!(report.spans_exported, 0);
            assert_eq!(report.spans_lost(), 50, "every span counted: {report}");
            assert!(report.metric_exports_failed >= 1, "{report}");
            let after = lost_in_summary("not delivered to the OTLP collector");
            assert!(after - before >= 50, "the summary counts them: {before} -> {after}");
        }
        let notes = gpuspan::summary().notes;
        assert!(notes.iter().any(|n| n.contains("OTLP span export to") && n.contains("failed")), "{notes:?}");
    }
}

rusty_fork_test! {
    #[test]
    fn hung_collector_cannot_hold_shutdown_past_the_bound() {
        // Accepts connections (the kernel completes the handshake) and never answers.
        let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = hung.local_addr().unwrap().port();
        for protocol in [Protocol::Grpc, Protocol::HttpProtobuf] {
            let id = test_id("hung");
            // An export timeout far longer than the shutdown bound.
            let otlp = pipeline(protocol, format!("http://127.0.0.1:{port}"), &id)
                .timeout(Duration::from_secs(60))
                .start()
                .unwrap();
            for i in 0..20 {
                work(i);
            }
            std::thread::sleep(Duration::from_millis(200)); // an export is now in flight, hanging
            let t = Instant::now();
            let report = otlp.shutdown();
            let took = t.elapsed();
            println!("hung collector, {protocol:?}: {report}");
            assert!(took <= BOUND + Duration::from_millis(500), "shutdown took {took:?}");
            assert_eq!(report.spans_exported, 0);
            assert_eq!(report.spans_lost(), 20, "{report}");
        }
        drop(hung);
        // The export cut off says the bound that applied (5 s), not its own timeout (60 s).
        let notes = gpuspan::summary().notes;
        assert!(notes.iter().any(|n| n.contains("cut off by the shutdown bound (5.0 s")), "{notes:?}");
        assert!(notes.iter().all(|n| !n.contains("timed out after 60s")), "{notes:?}");
    }
}

fn restart(protocol: Protocol) {
    let mut collector = Collector::own();
    let id = test_id(&format!("restart-{}", protocol.as_str().replace('/', "-")));
    let endpoint = collector.url(protocol);
    let otlp = pipeline(protocol, endpoint, &id).timeout(Duration::from_secs(2)).start().unwrap();
    let count = |spans: &[serde_json::Value], name: &str| spans.iter().filter(|s| s["name"] == name).count();

    for _ in 0..20 {
        before_crash();
    }
    assert!(otlp.flush(Duration::from_secs(10)));
    collector.wait_spans(&id, Duration::from_secs(20), |s| count(s, "before_crash") == 20);

    collector.kill();
    for _ in 0..20 {
        during_outage();
    }
    otlp.flush(Duration::from_secs(10));
    let during = otlp.stats();
    assert_eq!(during.spans_failed, 20, "the spans sent while the collector was down are counted: {during:?}");

    collector.start();
    for _ in 0..20 {
        after_restart();
    }
    assert!(otlp.flush(Duration::from_secs(10)));
    let spans = collector.wait_spans(&id, Duration::from_secs(20), |s| count(s, "after_restart") == 20);
    let report = otlp.shutdown();
    println!("killed and restarted, {protocol:?}: {report}; received {} spans", spans.len());
    assert_eq!(count(&spans, "during_outage"), 0);
    assert_eq!(report.spans_exported, 40, "{report}");
    assert_eq!(report.spans_lost(), 20, "{report}");
}

rusty_fork_test! {
    #[test]
    fn collector_killed_and_restarted_spans_after_the_restart_arrive_and_losses_are_counted() {
        restart(Protocol::Grpc);
        restart(Protocol::HttpProtobuf);
    }
}

static BURST_SITE: Site = Site::new(SiteDesc {
    name: "burst.gemm",
    function: "gemm",
    kind: SiteKind::Kernel,
    backend: Backend::Cuda,
    module_path: "otlp_failures",
    file: file!(),
    line: line!(),
    direction: None,
    threshold_us: None,
    trace_all: true,
    track_memory: false,
});

/// Host span, GPU span and one kernel: three spans that must arrive together or not at all.
fn gpu_record(t: u64) -> Record {
    let mut r = Record::new(&BURST_SITE, t, 0, Interval { start_ns: t, end_ns: t + 5_000 });
    let gpu = Interval { start_ns: t + 8_000, end_ns: t + 150_000 };
    r.gpu = Some(GpuTiming::new(gpu, TimingSource::Cupti));
    r.activities = vec![Activity::new("gemm_kernel", gpu, ActivityKind::Kernel(KernelGeometry::default()))];
    r
}

rusty_fork_test! {
    #[test]
    fn a_burst_overflows_the_bounded_queue_and_every_drop_is_counted() {
        let collector = Collector::shared_or_own();
        let before = lost_in_summary("OTLP export queue full");

        // 5000 calls into a 64-span queue, in bursts of 100 far faster than a collector takes them,
        // with pauses in which the queue drains.
        let id = test_id("burst");
        let otlp: Otlp = pipeline(Protocol::Grpc, collector.grpc_url(), &id)
            .max_queue_size(64)
            .max_export_batch_size(64)
            .schedule_delay(Duration::from_secs(30))
            .start()
            .unwrap();
        let mut most_pending = 0;
        for _ in 0..50 {
            for _ in 0..100 {
                burst();
            }
            most_pending = most_pending.max(otlp.stats().spans_pending);
            std::thread::sleep(Duration::from_millis(20));
        }
        // Memory is bounded: at most the queue's 64 spans wait, plus one batch of 64 in flight.
        assert!(most_pending <= 128, "never more than capacity + one batch pending (saw {most_pending})");
        assert!(otlp.flush(Duration::from_secs(10)));
        let report = otlp.shutdown();
        println!("burst of 5000 calls, queue of 64: {report}");
        let s = &report;
        assert!(s.spans_dropped > 0, "{report}");
        assert_eq!(s.spans_failed + s.spans_abandoned, 0, "{report}");
        assert_eq!(s.spans_exported + s.spans_dropped, 5000, "every span is exported or counted: {report}");
        let received = collector.wait_spans(&id, Duration::from_secs(20), |r| r.len() as u64 >= s.spans_exported);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            collector.spans(&id).len() as u64,
            s.spans_exported,
            "the collector got exactly what was counted as exported"
        );
        assert_eq!(received.len() as u64, s.spans_exported);
        assert!(lost_in_summary("OTLP export queue full") - before >= s.spans_dropped);

        // Records of three spans each: a full queue takes all three or none, so no span that
        // arrives lacks its parent.
        let id = test_id("burst-groups");
        let otlp = pipeline(Protocol::Grpc, collector.grpc_url(), &id)
            .max_queue_size(64)
            .max_export_batch_size(64)
            .schedule_delay(Duration::from_secs(30))
            .start()
            .unwrap();
        let t0 = gpuspan_testing::clock::now_ns();
        for round in 0..20 {
            for i in 0..100 {
                otlp.export(&gpu_record(t0 + (round * 100 + i) * 200_000));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(otlp.flush(Duration::from_secs(10)));
        let report = otlp.shutdown();
        println!("burst of 2000 three-span records, queue of 64: {report}");
        let s = &report;
        assert!(s.spans_dropped > 0 && s.spans_dropped.is_multiple_of(3), "whole records are dropped: {report}");
        assert_eq!(s.spans_exported + s.spans_dropped, 6000, "{report}");
        let received = collector.wait_spans(&id, Duration::from_secs(20), |r| r.len() as u64 >= s.spans_exported);
        assert_eq!(received.len() as u64, s.spans_exported);
        assert!(s.spans_exported > 64, "several exports interleaved with the drops: {report}");
        assert_no_orphans(&received, &[]);
    }
}

/// A CA, and a certificate it signed for localhost and 127.0.0.1.
fn make_ca(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "gpuspan test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let paths = (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, server.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

fn tls_proxy(args: &[&str]) -> Proc {
    let mut child = Command::new("python3")
        .arg(otlp_common::repo().join("tests/collector/tls_proxy.py"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the TLS proxy");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the TLS proxy started");
    Proc(child)
}

rusty_fork_test! {
    #[test]
    fn tls_with_a_private_ca_and_a_header() {
        let collector = Collector::shared_or_own();
        let dir = TempDir::new("gpuspan-tls");
        let (ca, cert, key) = make_ca(&dir.0);
        let (https, grpcs) = (free_port(), free_port());
        let secret = "s3cret-token-value";
        let (c, k) = (cert.to_string_lossy(), key.to_string_lossy());
        let _http_proxy =
            tls_proxy(&["http", &https.to_string(), &collector.http.to_string(), &c, &k, "x-gpuspan-token", secret]);
        let _grpc_proxy = tls_proxy(&["grpc", &grpcs.to_string(), &collector.grpc.to_string(), &c, &k]);

        for (protocol, url) in [
            (Protocol::HttpProtobuf, format!("https://localhost:{https}")),
            (Protocol::Grpc, format!("https://localhost:{grpcs}")),
        ] {
            let id = test_id("tls");
            let otlp = pipeline(protocol, url, &id).ca_certificate(&ca).header("x-gpuspan-token", secret).start().unwrap();
            for i in 0..5 {
                work(i);
            }
            assert!(otlp.flush(Duration::from_secs(10)));
            let report = otlp.shutdown();
            println!("TLS with a private CA, {protocol:?}: {report}");
            assert_eq!(report.spans_lost(), 0, "{report}");
            collector.wait_spans(&id, Duration::from_secs(20), |s| s.len() == 5);
        }

        // A wrong header is refused, and neither value is ever printed.
        let wrong = "wr0ng-token-value";
        let id = test_id("tls-wrong-header");
        let otlp = pipeline(Protocol::HttpProtobuf, format!("https://localhost:{https}"), &id)
            .ca_certificate(&ca)
            .header("x-gpuspan-token", wrong)
            .start()
            .unwrap();
        assert!(!format!("{otlp:?}").contains(wrong), "Debug redacts header values");
        work(1);
        otlp.flush(Duration::from_secs(10));
        let report = otlp.shutdown();
        println!("TLS, wrong header: {report}");
        assert_eq!(report.spans_failed, 1, "{report}");

        // Without the CA the collector's certificate is not trusted.
        let id = test_id("tls-untrusted");
        let otlp = pipeline(Protocol::Grpc, format!("https://localhost:{grpcs}"), &id).start().unwrap();
        work(2);
        otlp.flush(Duration::from_secs(10));
        let report = otlp.shutdown();
        println!("TLS, CA not given: {report}");
        assert_eq!(report.spans_failed, 1, "{report}");

        let notes = gpuspan::summary().notes.join("\n");
        assert!(notes.contains("401") || notes.contains("Unauthorized"), "the refusal is reported: {notes}");
        assert!(!notes.contains(secret) && !notes.contains(wrong), "header values never appear: {notes}");
        assert!(collector.spans(&test_id("never")).is_empty());
    }
}
