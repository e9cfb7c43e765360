//! A real OpenTelemetry collector for the OTLP tests, and reading back what it received.
//!
//! `scripts/collector` starts rotel on loopback; its processor (tests/collector/record.py)
//! appends every span and metric point it receives to JSON-lines files. Each test tags its
//! pipeline with a unique `test.id` resource attribute and reads back only its own lines, so
//! tests can share one collector (`GPUSPAN_TEST_COLLECTOR=GRPC_PORT,HTTP_PORT,DIR`, set by
//! scripts/test) or start their own.
#![allow(dead_code)] // each test file uses a different part

use serde_json::Value as Json;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the repository").to_path_buf()
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free loopback port")
}

/// A name no other test run uses: `<what>-<pid>-<nanos>`.
pub fn test_id(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{what}-{}-{nanos}", std::process::id())
}

/// A fresh directory under the system's temp dir, removed on drop unless the test failed (then
/// it is kept, and named, for a look at what the collector received).
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(test_id(what));
        std::fs::create_dir_all(&dir).expect("cannot create a temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[derive(Debug)]
pub struct Collector {
    pub grpc: u16,
    pub http: u16,
    pub dir: PathBuf,
    /// Our own process: stopped on drop. `None` for the shared one.
    pid: Option<u32>,
    /// Our own output directory (the shared collector's belongs to scripts/test).
    _own_dir: Option<TempDir>,
}

fn script(args: &[&str]) -> String {
    let out = Command::new(repo().join("scripts/collector"))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("could not run scripts/collector");
    assert!(out.status.success(), "scripts/collector {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Collector {
    /// The collector scripts/test started, or a new one for this test.
    pub fn shared_or_own() -> Collector {
        if let Ok(v) = std::env::var("GPUSPAN_TEST_COLLECTOR") {
            let parts: Vec<&str> = v.split(',').collect();
            if let [g, h, d] = parts[..] {
                return Collector {
                    grpc: g.parse().expect("GPUSPAN_TEST_COLLECTOR: gRPC port"),
                    http: h.parse().expect("GPUSPAN_TEST_COLLECTOR: HTTP port"),
                    dir: d.into(),
                    pid: None,
                    _own_dir: None,
                };
            }
            panic!("GPUSPAN_TEST_COLLECTOR={v:?}: expected GRPC_PORT,HTTP_PORT,DIR");
        }
        Collector::own()
    }

    /// A collector of this test's own, on fresh ports.
    pub fn own() -> Collector {
        let dir = TempDir::new("gpuspan-collector");
        let mut c =
            Collector { grpc: free_port(), http: free_port(), dir: dir.0.clone(), pid: None, _own_dir: Some(dir) };
        c.start();
        c
    }

    /// (Re)starts the process on the same ports and files.
    pub fn start(&mut self) {
        let (g, h) = (self.grpc.to_string(), self.http.to_string());
        let pid = script(&["start", &g, &h, &self.dir.to_string_lossy()]);
        self.pid = Some(pid.parse().expect("scripts/collector start prints a PID"));
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            // Wait until the ports are closed, so the test knows the collector is gone.
            let deadline = Instant::now() + Duration::from_secs(5);
            while std::net::TcpStream::connect(("127.0.0.1", self.grpc)).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc)
    }

    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http)
    }

    /// The endpoint for `protocol` (`Protocol` is `#[non_exhaustive]`: a new one needs a port here).
    #[cfg(feature = "otlp")] // multi_gpu_example includes this module without the export
    #[allow(dead_code)] // not every test file that includes this module uses it
    pub fn url(&self, protocol: gpuspan::otlp::Protocol) -> String {
        match protocol {
            gpuspan::otlp::Protocol::Grpc => self.grpc_url(),
            gpuspan::otlp::Protocol::HttpProtobuf => self.http_url(),
            other => panic!("the test collector has no endpoint for {other:?}"),
        }
    }

    fn lines(&self, file: &str, test: &str) -> Vec<Json> {
        let Ok(text) = std::fs::read_to_string(self.dir.join(file)) else { return Vec::new() };
        text.lines()
            .filter_map(|l| serde_json::from_str::<Json>(l).ok())
            .filter(|j| j["resource"]["test.id"] == test)
            .collect()
    }

    /// The spans of this test received so far.
    pub fn spans(&self, test: &str) -> Vec<Json> {
        self.lines("spans.jsonl", test)
    }

    /// The metric points of this test received so far.
    pub fn metrics(&self, test: &str) -> Vec<Json> {
        self.lines("metrics.jsonl", test)
    }

    /// Polls the spans of `test` until `done` holds, or fails after `timeout` showing them.
    pub fn wait_spans(&self, test: &str, timeout: Duration, done: impl Fn(&[Json]) -> bool) -> Vec<Json> {
        wait(timeout, || self.spans(test), done, "spans", &self.dir)
    }

    pub fn wait_metrics(&self, test: &str, timeout: Duration, done: impl Fn(&[Json]) -> bool) -> Vec<Json> {
        wait(timeout, || self.metrics(test), done, "metric points", &self.dir)
    }
}

fn wait(
    timeout: Duration,
    get: impl Fn() -> Vec<Json>,
    done: impl Fn(&[Json]) -> bool,
    what: &str,
    dir: &Path,
) -> Vec<Json> {
    let deadline = Instant::now() + timeout;
    loop {
        let got = get();
        if done(&got) {
            return got;
        }
        if Instant::now() > deadline {
            let errors = std::fs::read_to_string(dir.join("processor-errors.log")).unwrap_or_default();
            panic!(
                "the collector did not receive the expected {what} within {timeout:?}; got {}:\n{}\nprocessor errors: {errors}",
                got.len(),
                got.iter().map(|j| format!("{} parent={}", j["name"], j["parent_span_id"])).collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new(repo().join("scripts/collector")).args(["stop", &pid.to_string()]).status();
        }
    }
}

/// Spans by name (the first of each name).
pub fn by_name<'a>(spans: &'a [Json], name: &str) -> &'a Json {
    spans.iter().find(|s| s["name"] == name).unwrap_or_else(|| {
        panic!("no span named {name:?} among {:?}", spans.iter().map(|s| s["name"].clone()).collect::<Vec<_>>())
    })
}

pub fn all_named<'a>(spans: &'a [Json], name: &str) -> Vec<&'a Json> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// Every span's parent is among `spans` or is `allowed` (roots have parent "").
pub fn assert_no_orphans(spans: &[Json], allowed: &[&str]) {
    let ids: std::collections::HashSet<&str> = spans.iter().filter_map(|s| s["span_id"].as_str()).collect();
    for s in spans {
        let p = s["parent_span_id"].as_str().unwrap_or("");
        assert!(
            p.is_empty() || ids.contains(p) || allowed.contains(&p),
            "span {} has a parent {p} the collector never received",
            s["name"]
        );
    }
}

/// A child process killed on drop (TLS proxy).
#[derive(Debug)]
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
