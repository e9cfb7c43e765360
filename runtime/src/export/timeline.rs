//! The timeline: sampled records written at shutdown as Chrome Trace Event JSON, which
//! Perfetto (ui.perfetto.dev) and chrome://tracing open.
//!
//! Layout: process "host" has one track per thread with the host span of each call; process
//! "GPU" has one track per device (and per CUDA stream) with the GPU interval and the kernels
//! and copies inside it; calls whose work ran on several devices have a track of their own, their
//! kernels and copies on each device's tracks. A flow arrow joins each host span to its GPU work.

use crate::diagnostics::{Losses, LOSSES};
use crate::pipeline::Sink;
use crate::record::{Record, Value};
use serde_json::{json, Map, Value as Json};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

const HOST_PID: u32 = 1;
const GPU_PID: u32 = 2;

/// Collects sampled records up to a capacity; what does not fit is counted as lost.
#[derive(Debug)]
pub(crate) struct Timeline {
    records: Mutex<Vec<Record>>,
    capacity: usize,
    /// Where [`Sink::finish`] writes it.
    path: Option<PathBuf>,
}

impl Timeline {
    #[cfg_attr(not(test), allow(dead_code))] // a timeline with nowhere to go, for tests
    pub(crate) fn new(capacity: usize) -> Self {
        Timeline { records: Mutex::new(Vec::new()), capacity, path: None }
    }

    /// A timeline written to `path` when it finishes.
    pub(crate) fn to_file(capacity: usize, path: PathBuf) -> Self {
        Timeline { path: Some(path), ..Timeline::new(capacity) }
    }

    pub(crate) fn len(&self) -> usize {
        self.records.lock().map_or(0, |r| r.len())
    }

    /// Writes the timeline as JSON to `out`, streamed: memory stays bounded by one record's
    /// events, whatever the number of records (the records are not copied either).
    pub(crate) fn write_json(&self, out: impl Write) -> io::Result<()> {
        match self.records.lock() {
            Ok(records) => write_events(&records, out),
            Err(_) => write_events(&[], out),
        }
    }

    /// Writes the timeline to `path` whole or not at all (see [`super::file`]).
    pub(crate) fn write_file(&self, path: &Path) -> io::Result<()> {
        super::file::write_atomically(path, |w| self.write_json(w))
    }
}

impl Sink for Timeline {
    fn accept(&self, record: &Record) {
        if let Ok(mut r) = self.records.lock() {
            if r.len() < self.capacity {
                r.push(record.clone());
                return;
            }
        }
        Losses::add(&LOSSES.timeline_events, 1);
    }

    /// Writes the file (whole, so without a deadline of its own: it is one write of memory
    /// already held).
    fn finish(&self, _deadline: Instant) -> Option<String> {
        let path = self.path.as_ref()?;
        let calls = self.len();
        // Switched off before anything was recorded: an empty file would say nothing.
        if calls == 0 && !crate::switch::is_on() {
            return None;
        }
        Some(match self.write_file(path) {
            Ok(()) => format!(
                "gpuspan: timeline with {calls} calls written to {} (open it in https://ui.perfetto.dev)",
                path.display()
            ),
            Err(e) => format!("gpuspan: could not write the timeline to {}: {e}", path.display()),
        })
    }
}

fn to_json(v: &Value) -> Json {
    match v {
        Value::Str(s) => Json::String(s.to_string()),
        Value::I64(i) => json!(i),
        Value::F64(f) => json!(f),
        Value::Bool(b) => json!(b),
        Value::I64Array(v) => json!(v),
    }
}

/// Microseconds relative to `base`, as Chrome trace `ts` wants (relative, so an f64 keeps
/// nanosecond precision).
fn us(ns: u64, base: u64) -> f64 {
    ns.saturating_sub(base) as f64 / 1000.0
}

/// The device number of the track of calls whose work ran on several devices.
const SEVERAL_DEVICES: u32 = u32::MAX;

/// GPU track id: one per device, and one per (device, stream) for activities with a stream.
fn gpu_tid(device: u32, stream: Option<u64>) -> u64 {
    (u64::from(device) << 32) | stream.map_or(0, |s| s + 1)
}

/// The Chrome Trace Event document, written one event at a time: `{"traceEvents":[...], ...}`.
struct Events<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> Events<W> {
    fn start(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"traceEvents\":[")?;
        Ok(Events { out, first: true })
    }

    fn push(&mut self, event: &Json) -> io::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.out.write_all(b",")?;
        }
        serde_json::to_writer(&mut self.out, event).map_err(io::Error::from)
    }

    fn finish(mut self, base: u64) -> io::Result<()> {
        self.out.write_all(b"],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        serde_json::to_writer(&mut self.out, &json!({"generator": "gpuspan", "epoch_base_ns": base}))?;
        self.out.write_all(b"}")?;
        self.out.flush()
    }
}

pub(crate) fn write_events(records: &[Record], out: impl Write) -> io::Result<()> {
    let base = records.iter().map(|r| r.host.start_ns.min(r.interval().start_ns)).min().unwrap_or(0);
    let mut events = Events::start(out)?;
    events.push(&json!({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}}))?;
    events.push(&json!({"ph": "M", "name": "process_name", "pid": GPU_PID, "args": {"name": "GPU"}}))?;
    for (index, name) in crate::thread::names() {
        events
            .push(&json!({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": index, "args": {"name": name}}))?;
    }
    let mut gpu_tracks = std::collections::BTreeMap::new();

    for r in records {
        let args = Json::Object(r.attributes().into_iter().map(|(k, v)| (k.to_owned(), to_json(&v))).collect());
        let name = r.site.desc.name;
        let cat = r.site.desc.kind.as_str();
        events.push(&json!({
            "ph": "X", "name": name, "cat": cat, "pid": HOST_PID, "tid": r.thread,
            "ts": us(r.host.start_ns, base), "dur": us(r.host.end_ns, r.host.start_ns), "args": &args,
        }))?;
        let Some(gpu) = &r.gpu else { continue };
        let device = gpu.device.as_ref().map_or(0, |d| d.id);
        // A call whose work ran on several devices (a collective over the GPUs of the process)
        // has no device of its own: it gets a track of its own rather than device 0's.
        let several = gpu.device.is_none() && r.activities.iter().any(|a| a.device.is_some());
        let tid = if several { gpu_tid(SEVERAL_DEVICES, None) } else { gpu_tid(device, None) };
        gpu_tracks.entry(tid).or_insert_with(|| {
            let label = match &gpu.device {
                Some(d) => format!("GPU {}: {}", d.id, d.name),
                None if several => "GPUs: calls on several devices".to_owned(),
                None => "GPU".to_owned(),
            };
            format!("{label} ({})", r.backend().as_str())
        });
        events.push(&json!({
            "ph": "X", "name": name, "cat": format!("gpu.{cat}"), "pid": GPU_PID, "tid": tid,
            "ts": us(gpu.interval.start_ns, base), "dur": us(gpu.interval.end_ns, gpu.interval.start_ns), "args": args,
        }))?;
        // Flow arrow from the host call to the GPU work it caused.
        events.push(&json!({"ph": "s", "id": r.scope_id, "name": "launch", "cat": "gpuspan.flow", "pid": HOST_PID, "tid": r.thread, "ts": us(r.host.start_ns, base)}))?;
        events.push(&json!({"ph": "f", "bp": "e", "id": r.scope_id, "name": "launch", "cat": "gpuspan.flow", "pid": GPU_PID, "tid": tid, "ts": us(gpu.interval.start_ns, base)}))?;
        for a in &r.activities {
            let dev = a.device.as_ref().map_or(device, |d| d.id);
            let tid = gpu_tid(dev, a.stream);
            gpu_tracks.entry(tid).or_insert_with(|| match a.stream {
                Some(s) => format!("GPU {dev} stream {s}"),
                None => format!("GPU {dev}"),
            });
            let aargs: Map<String, Json> =
                a.attributes(r).into_iter().map(|(k, v)| (k.to_owned(), to_json(&v))).collect();
            events.push(&json!({
                "ph": "X", "name": a.name, "cat": "gpu.activity", "pid": GPU_PID, "tid": tid,
                "ts": us(a.interval.start_ns, base), "dur": us(a.interval.end_ns, a.interval.start_ns), "args": aargs,
            }))?;
        }
    }
    for (tid, name) in gpu_tracks {
        events.push(&json!({"ph": "M", "name": "thread_name", "pid": GPU_PID, "tid": tid, "args": {"name": name}}))?;
    }
    events.finish(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{GpuTiming, Interval, TimingSource};
    use crate::site::{Backend, Site, SiteDesc, SiteKind};
    use proptest::prelude::*;

    fn site(name: &str) -> &'static Site {
        let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
        Box::leak(Box::new(Site::new(SiteDesc {
            trace_all: true,
            ..crate::site::site_desc!(name, SiteKind::Kernel, Backend::Wgpu)
        })))
    }

    proptest! {
        /// Whatever a site is called (quotes, backslashes, control characters, any unicode), the
        /// timeline is valid JSON and carries the name back unchanged.
        #[test]
        fn any_name_gives_valid_json(name in any::<String>(), start in 0u64..1u64 << 60) {
            let mut r = Record::new(site(&name), 7, 1, Interval { start_ns: start, end_ns: start + 500 });
            r.gpu = Some(GpuTiming {
                interval: Interval { start_ns: start + 100, end_ns: start + 400 },
                busy_ns: 300,
                source: TimingSource::GpuTimestamp,
                clock_error_ns: 5,
                bracketed: false,
                bracket_at_exit: false,
                device: None,
            });
            let mut out = Vec::new();
            write_events(&[r], &mut out).unwrap();
            let json: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
            let events = json["traceEvents"].as_array().unwrap();
            let named: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
            prop_assert_eq!(named.len(), 2, "a host and a GPU event");
            for e in named {
                prop_assert_eq!(e["name"].as_str(), Some(name.as_str()));
            }
        }
    }

    /// One track per device: a call on device 1 is on device 1's track, a call whose kernels ran
    /// on devices 0 and 1 on a track of its own (not device 0's), its kernels on each device's.
    #[test]
    fn each_device_has_its_track_and_a_call_on_several_has_its_own() {
        use crate::record::{Activity, ActivityKind, DeviceLabel, KernelGeometry};
        let dev = |id| DeviceLabel::new(id, format!("GPU {id} name"));
        let kernel = |id: u32, start: u64| {
            let mut a = Activity::new(
                "k",
                Interval { start_ns: start, end_ns: start + 10 },
                ActivityKind::Kernel(KernelGeometry::default()),
            );
            a.stream = Some(u64::from(id) + 7);
            a.device = Some(dev(id));
            a
        };
        let call = |scope: u64, device: Option<DeviceLabel>, activities: Vec<Activity>| {
            let mut r = Record::new(site("call"), scope, 1, Interval { start_ns: 0, end_ns: 100 });
            let mut g = GpuTiming::new(Interval { start_ns: 10, end_ns: 60 }, TimingSource::Cupti);
            g.device = device;
            r.gpu = Some(g);
            r.activities = activities;
            r
        };
        let records = [
            call(1, Some(dev(1)), vec![kernel(1, 10)]),
            call(2, None, vec![kernel(0, 20), kernel(1, 30)]),
            call(3, Some(dev(0)), vec![kernel(0, 40)]),
        ];
        let mut out = Vec::new();
        write_events(&records, &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        let track_name = |tid: &serde_json::Value| {
            events
                .iter()
                .find(|e| e["ph"] == "M" && e["pid"] == GPU_PID && e["tid"] == *tid)
                .and_then(|e| e["args"]["name"].as_str())
                .unwrap_or("?")
                .to_owned()
        };
        let calls: Vec<String> =
            events.iter().filter(|e| e["cat"] == "gpu.kernel").map(|e| track_name(&e["tid"])).collect();
        assert_eq!(
            calls,
            ["GPU 1: GPU 1 name (cuda)", "GPUs: calls on several devices (cuda)", "GPU 0: GPU 0 name (cuda)"]
        );
        let kernels: Vec<String> =
            events.iter().filter(|e| e["cat"] == "gpu.activity").map(|e| track_name(&e["tid"])).collect();
        assert_eq!(kernels, ["GPU 1 stream 8", "GPU 0 stream 7", "GPU 1 stream 8", "GPU 0 stream 7"]);
    }

    #[test]
    fn gpu_events_are_placed_relative_to_the_earliest_time_with_nanosecond_precision() {
        let base = 1_763_000_000_000_000_000; // a Unix-epoch time in ns, as CUPTI gives
        let mut r = Record::new(site("k"), 1, 1, Interval { start_ns: base, end_ns: base + 1_000 });
        r.gpu = Some(GpuTiming {
            interval: Interval { start_ns: base + 1_234, end_ns: base + 2_345 },
            busy_ns: 1_111,
            source: TimingSource::Cupti,
            clock_error_ns: 0,
            bracketed: false,
            bracket_at_exit: false,
            device: None,
        });
        let mut out = Vec::new();
        write_events(&[r], &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let gpu = json["traceEvents"].as_array().unwrap().iter().find(|e| e["cat"] == "gpu.kernel").unwrap();
        assert_eq!(gpu["ts"].as_f64(), Some(1.234));
        assert_eq!(gpu["dur"].as_f64(), Some(1.111));
    }
}
