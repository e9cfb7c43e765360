//! The one comparison of labels across outputs (issue 28): a run's summary, its timeline, and
//! `gpuspan report` and `gpuspan flamegraph` on its capture give each site the same kind,
//! backend, timing sources, bound flag and bandwidth. Shared by the lavapipe test
//! (`labels_agree.rs`) and the CUDA programs on the GPU machine (`cuda_placement.rs`).

use gpuspan_capture::Capture;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A run writing every call to a capture and a timeline in a folder of its own (removed when
/// dropped), with the summary off: what [`agree`] reads.
pub struct Outputs {
    pub dir: PathBuf,
    pub capture: PathBuf,
    pub timeline: PathBuf,
}

impl Outputs {
    /// Starts gpuspan writing them; keep the guard until the calls were flushed.
    pub fn start(name: &str) -> (gpuspan::Guard, Outputs) {
        let dir = std::env::temp_dir().join(format!("gpuspan-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (capture, timeline) = (dir.join("run.gpuspan"), dir.join("run.json"));
        let guard =
            gpuspan::Config::default().summary(false).trace_all(true).trace_file(&timeline).capture(&capture).init();
        (guard, Outputs { dir, capture, timeline })
    }
}

impl Drop for Outputs {
    /// Removed, unless the test is failing: then its outputs are the evidence, and are kept.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("outputs of the failing test kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A site's label as every output must show it: (name, backend, bracketed, has a bandwidth).
pub type Label = (String, String, bool, bool);

/// Checks that every site in `sites` reads alike in `summary`, the timeline at `timeline_path`
/// and the report and flamegraph of the capture at `capture_path`; returns their labels.
pub fn agree(summary: &gpuspan::Summary, capture_path: &Path, timeline_path: &Path, sites: &[&str]) -> Vec<Label> {
    let capture = Capture::open(capture_path).expect("the capture reads");
    let report = gpuspan_cli::report::build(&capture);
    let folded = gpuspan_cli::flame::folded(&capture);
    let timeline: serde_json::Value =
        serde_json::from_slice(&std::fs::read(timeline_path).expect("the timeline was written")).expect("JSON");
    let events = timeline["traceEvents"].as_array().expect("events");
    let mut labels = Vec::new();
    for &name in sites {
        let s = summary.reached.iter().find(|s| s.site.desc.name == name).unwrap_or_else(|| panic!("{name} reached"));
        let row = report.sites.iter().find(|r| r.site == name).unwrap_or_else(|| panic!("{name} in the report"));
        let what = format!("{name}: summary {s:?}\nreport {row:?}");
        assert_eq!(row.kind, s.site.kind_label(), "{what}");
        assert_eq!(row.backend, s.backend_label(), "{what}");
        let sources: BTreeSet<&str> = s.sources.iter().map(|x| x.as_str()).collect();
        assert_eq!(row.sources.iter().map(String::as_str).collect::<BTreeSet<_>>(), sources, "{what}");
        assert_eq!(row.bracketed, s.bracketed, "{what}");
        let bandwidth = s.bandwidth_bytes_per_s();
        assert_eq!(row.bandwidth_bytes_per_s.is_some(), bandwidth.is_some(), "{what}");
        if let (Some(a), Some(b)) = (row.bandwidth_bytes_per_s, bandwidth) {
            // Every call is recorded (trace_all): the same bytes over the same time.
            assert!((a / b - 1.0).abs() < 1e-6, "{what}");
        }
        // The timeline's events of the site (its host and GPU events; a block form's function
        // is the one enclosing it, so the site's name finds them) carry a bandwidth only where the summary gives one.
        let site_events: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["name"] == name && e["cat"] != "gpu.activity" && e["args"].is_object())
            .collect();
        assert!(!site_events.is_empty(), "{name} in the timeline");
        let with_bandwidth = site_events.iter().filter(|e| e["args"]["gpu_transfer.bandwidth_bytes_per_s"].is_number());
        if bandwidth.is_none() {
            assert_eq!(with_bandwidth.count(), 0, "{what}");
        }
        // Every GPU-timed site is a frame of the flamegraph (GPU time over the host stack), the
        // exact children of a bracket included; a host-timed one has no GPU time of its own to
        // fold (it may still be the frame above GPU-timed calls made inside it).
        let gpu_timed = s.sources.iter().any(|x| x.as_str() != "host");
        let in_flamegraph = folded.keys().any(|k| k.split(';').any(|f| f == name));
        let own_time = folded.keys().any(|k| k.rsplit(';').next() == Some(name));
        if gpu_timed {
            assert!(in_flamegraph, "{name} in the flamegraph: {folded:?}");
        } else {
            assert!(!own_time, "{name} has no GPU time of its own in the flamegraph: {folded:?}");
        }
        labels.push((name.to_owned(), s.backend_label().to_owned(), s.bracketed, bandwidth.is_some()));
    }
    labels
}
