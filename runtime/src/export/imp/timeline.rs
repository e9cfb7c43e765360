//! The timeline: sampled records written at shutdown as Chrome Trace Event JSON, which
//! Perfetto (ui.perfetto.dev) and chrome://tracing open, or, where configured
//! ([`TraceFormat::Perfetto`]), as Perfetto's native protobuf trace ([`super::perfetto`]: the
//! writer of `gpuspan timeline --format perfetto`, with this JSON's slices, flows and counters
//! on its own layout: one process, the devices' tracks in it).
//!
//! The JSON's layout: process "host" has one track per thread with the host span of each call;
//! process "GPU" has one track per device (and per CUDA stream) with the GPU interval and the
//! kernels and copies inside it; calls whose work ran on several devices have a track of their
//! own, their kernels and copies on each device's tracks. A flow arrow joins each host span to
//! its GPU work. Events that overlap on a track without nesting go on lanes of it, each a track
//! of its own (`gpuspan_capture::lanes`: Perfetto drops them otherwise).

use super::capture_file::Sampling;
use crate::config::TraceFormat;
use crate::diagnostics::{losses, Losses};
use crate::pipeline::Sink;
use crate::record::{Record, Value};
use gpuspan_capture::lanes::{lane_name, Placer};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
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
    /// The names of the threads its records were made on, taken as each first appears (a
    /// thread's name is not kept long after it ends: `crate::thread`).
    threads: Mutex<HashMap<u32, String>>,
    capacity: usize,
    /// Where [`Sink::finish`] writes it.
    path: Option<PathBuf>,
    /// In which format, and (for the native one's capture header) how the run sampled.
    format: TraceFormat,
    sampling: Sampling,
    /// When it started (Unix-epoch ns): the native format's capture header says it.
    started_ns: u64,
}

impl Timeline {
    pub(crate) fn new(capacity: usize) -> Self {
        Timeline {
            records: Mutex::new(Vec::new()),
            threads: Mutex::new(HashMap::new()),
            capacity,
            path: None,
            format: TraceFormat::Json,
            sampling: Sampling { threshold_us: crate::sampling::DEFAULT_THRESHOLD_US, trace_all: false },
            started_ns: crate::clock::now_ns(),
        }
    }

    /// A timeline written to `path` in `format` when it finishes.
    pub(crate) fn to_file(capacity: usize, path: PathBuf, format: TraceFormat, sampling: Sampling) -> Self {
        Timeline { path: Some(path), format, sampling, ..Timeline::new(capacity) }
    }

    pub(crate) fn len(&self) -> usize {
        self.records.lock().map_or(0, |r| r.len())
    }

    /// Writes the timeline as JSON to `out`, streamed: beside the records (not copied), memory
    /// holds each event's track and lane, not its JSON.
    pub(crate) fn write_json(&self, out: impl Write) -> io::Result<()> {
        let threads = self.threads.lock().map(|t| t.clone()).unwrap_or_default();
        let name = |index| threads.get(&index).cloned().unwrap_or_else(|| crate::thread::name(index));
        let counters = crate::hooks::leaves().counter_tracks();
        match self.records.lock() {
            Ok(records) => write_timeline(&records, &counters, name, out),
            Err(_) => write_timeline(&[], &counters, name, out),
        }
    }

    /// Writes the timeline as Perfetto's native protobuf trace to `out` (see [`super::perfetto`]).
    pub(crate) fn write_perfetto(&self, out: impl Write) -> io::Result<()> {
        let threads = self.threads.lock().map(|t| t.clone()).unwrap_or_default();
        let name = |index| threads.get(&index).cloned().unwrap_or_else(|| crate::thread::name(index));
        let counters = crate::hooks::leaves().counter_tracks();
        // The readings the device monitor still holds (its history), where one ran.
        let readings = crate::hooks::leaves().devices().map(|d| d.readings(0)).unwrap_or_default();
        let label = self.path.as_ref().and_then(|p| p.file_name()).map_or("timeline".into(), |n| n.to_string_lossy());
        let records = self.records.lock();
        let records = records.as_deref().map_or(&[][..], Vec::as_slice);
        let run = super::perfetto::Run { records, name, counters: &counters, readings, started_ns: self.started_ns };
        super::perfetto::write(run, &label, self.sampling, out)
    }

    /// Writes the timeline in its format to `path` whole or not at all (see [`super::file`]).
    pub(crate) fn write_file(&self, path: &Path) -> io::Result<()> {
        match self.format {
            TraceFormat::Perfetto => super::file::write_atomically(path, |w| self.write_perfetto(w)),
            _ => super::file::write_atomically(path, |w| self.write_json(w)),
        }
    }
}

impl Sink for Timeline {
    fn accept(&self, record: &Record) {
        if let Ok(mut r) = self.records.lock() {
            if r.len() < self.capacity {
                r.push(record.clone());
                if let Ok(mut t) = self.threads.lock() {
                    t.entry(record.thread).or_insert_with(|| crate::thread::name(record.thread));
                }
                return;
            }
        }
        Losses::add(&losses().timeline_events, 1);
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

/// A record attribute's value as JSON (both formats' arguments).
pub(super) fn to_json(v: &Value) -> Json {
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

/// First track id of the extra lanes of tracks (see `gpuspan_capture::lanes`).
const LANE_TID: u64 = 1 << 40;

/// First track id of the host process's span tracks: a selected span's record (entered on any
/// number of threads) is drawn on a track of its span name, not on the thread that opened it.
const SPAN_TID: u64 = 1 << 32;

/// A track: (process, track id).
type Track = (u32, u64);

/// The GPU process's tracks: one per device for the calls' GPU intervals (and activities with no
/// stream), one per (device, stream). Keys are handed out in order of first use; the track ids,
/// by device and stream, once every track is known ([`GpuTracks::ids`]).
/// A selected span's GPU interval (a bracket, or its first to last kernel) goes on a track of
/// its span name beside its device's, so that it neither hides the device's work nor pushes it
/// onto lanes; its kernels and copies stay on their device's tracks.
#[derive(Default)]
struct GpuTracks(std::collections::BTreeMap<GpuTrackKey, (u64, String)>);

/// A GPU track: (device, the selected span's name for its own track, stream).
type GpuTrackKey = (u32, Option<&'static str>, Option<u64>);

impl GpuTracks {
    fn key(&mut self, device: u32, stream: Option<u64>, name: impl FnOnce() -> String) -> u64 {
        self.key_of((device, None, stream), name)
    }

    fn key_of(&mut self, key: GpuTrackKey, name: impl FnOnce() -> String) -> u64 {
        let next = self.0.len() as u64;
        self.0.entry(key).or_insert_with(|| (next, name())).0
    }

    /// Each key's track id, and the tracks' names by id.
    fn ids(self) -> (Vec<u64>, Vec<String>) {
        let mut ids = vec![0; self.0.len()];
        let names = self.0.into_values().enumerate().map(|(id, (key, name))| {
            ids[key as usize] = id as u64;
            name
        });
        let names = names.collect();
        (ids, names)
    }
}

/// A record's events as (track, start, end), in the order the timeline writes them: the call
/// on its thread, then, when GPU-timed, its GPU interval on its device's track (or the track of
/// calls on several devices) and its activities.
/// A selected span's record is on its span's own tracks: the host one here (`spans` hands out
/// their ids by span name), the GPU one in [`GpuTracks`].
fn record_slices(
    r: &Record,
    tracks: &mut GpuTracks,
    spans: &mut std::collections::BTreeMap<&'static str, u64>,
) -> Vec<(Track, u64, u64)> {
    let span = r.site.is_span().then_some(r.site.desc.name);
    let host = match span {
        Some(name) => {
            let next = SPAN_TID + spans.len() as u64;
            *spans.entry(name).or_insert(next)
        }
        None => u64::from(r.thread),
    };
    let mut out = vec![((HOST_PID, host), r.host.start_ns, r.host.end_ns)];
    let Some(gpu) = &r.gpu else { return out };
    let device = gpu.device.as_ref().map_or(0, |d| d.id);
    // A call whose work ran on several devices (a collective over the GPUs of the process) has no
    // device of its own: it gets a track of its own rather than device 0's.
    let several = gpu.device.is_none() && r.activities.iter().any(|a| a.device.is_some());
    let tid = tracks.key_of((if several { SEVERAL_DEVICES } else { device }, span, None), || {
        let label = match &gpu.device {
            Some(d) => format!("GPU {}: {}", d.id, d.name),
            None if several => "GPUs: calls on several devices".to_owned(),
            None => "GPU".to_owned(),
        };
        match span {
            Some(name) => format!("{label} ({}) span: {name}", r.backend().as_str()),
            None => format!("{label} ({})", r.backend().as_str()),
        }
    });
    out.push(((GPU_PID, tid), gpu.interval.start_ns, gpu.interval.end_ns));
    for a in &r.activities {
        let dev = a.device.as_ref().map_or(device, |d| d.id);
        let tid = tracks.key(dev, a.stream, || match a.stream {
            Some(s) => format!("GPU {dev} stream {s}"),
            None => format!("GPU {dev}"),
        });
        out.push(((GPU_PID, tid), a.interval.start_ns, a.interval.end_ns));
    }
    out
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

/// [`write_named_events`], with counter tracks (a device's memory) on the GPU process.
fn write_timeline(
    records: &[Record],
    counters: &[crate::hooks::CounterTrack],
    name: impl Fn(u32) -> String,
    out: impl Write,
) -> io::Result<()> {
    let first_sample = counters.iter().filter_map(|(_, s)| s.first().map(|x| x.0)).min();
    let base =
        records.iter().map(|r| r.host.start_ns.min(r.interval().start_ns)).chain(first_sample).min().unwrap_or(0);
    let mut events = Events::start(out)?;
    for (track, samples) in counters {
        for (t, value) in samples {
            events.push(
                &json!({"ph": "C", "name": track, "pid": GPU_PID, "ts": us(*t, base), "args": {"bytes": value}}),
            )?;
        }
    }
    events.push(&json!({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}}))?;
    events.push(&json!({"ph": "M", "name": "process_name", "pid": GPU_PID, "args": {"name": "GPU"}}))?;
    // Thread 0 (GPU work outside every call) is no thread's.
    let mut names: std::collections::BTreeMap<Track, String> = std::collections::BTreeMap::new();
    for r in records.iter().filter(|r| r.thread != 0 && !r.site.is_span()) {
        names.entry((HOST_PID, u64::from(r.thread))).or_insert_with(|| name(r.thread));
    }
    // Every event's track, then its lane of it: a lane past the first is a track of its own.
    let mut gpu_tracks = GpuTracks::default();
    let mut span_tracks = std::collections::BTreeMap::new();
    let mut slices: Vec<Vec<(Track, u64, u64)>> =
        records.iter().map(|r| record_slices(r, &mut gpu_tracks, &mut span_tracks)).collect();
    names.extend(span_tracks.into_iter().map(|(name, tid)| ((HOST_PID, tid), format!("span: {name}"))));
    let (ids, gpu_names) = gpu_tracks.ids();
    for (track, _, _) in slices.iter_mut().flatten().filter(|(t, _, _)| t.0 == GPU_PID) {
        track.1 = ids[track.1 as usize];
    }
    names.extend(gpu_names.into_iter().enumerate().map(|(tid, name)| ((GPU_PID, tid as u64), name)));
    let flat: Vec<(Track, u64, u64)> = slices.iter().flatten().copied().collect();
    let mut lanes = Placer::new(&flat, LANE_TID);

    for (r, slices) in records.iter().zip(slices) {
        // Every event's lane is taken here, in order, whichever of them are written.
        let tids: Vec<Track> =
            slices.into_iter().map(|(t, _, _)| lanes.next(t).map_or(t, |lane| (t.0, lane))).collect();
        let args = Json::Object(r.attributes().into_iter().map(|(k, v)| (k.to_owned(), to_json(&v))).collect());
        let name = r.site.desc.name;
        let cat = r.site.kind_label();
        let (_, host_tid) = tids[0];
        events.push(&json!({
            "ph": "X", "name": name, "cat": cat, "pid": HOST_PID, "tid": host_tid,
            "ts": us(r.host.start_ns, base), "dur": us(r.host.end_ns, r.host.start_ns), "args": &args,
        }))?;
        let Some(gpu) = &r.gpu else { continue };
        let (_, tid) = tids[1];
        events.push(&json!({
            "ph": "X", "name": name, "cat": format!("gpu.{cat}"), "pid": GPU_PID, "tid": tid,
            "ts": us(gpu.interval.start_ns, base), "dur": us(gpu.interval.end_ns, gpu.interval.start_ns), "args": args,
        }))?;
        // Flow arrow from the host call to the GPU work it caused.
        events.push(&json!({"ph": "s", "id": r.scope_id, "name": "launch", "cat": "gpuspan.flow", "pid": HOST_PID, "tid": host_tid, "ts": us(r.host.start_ns, base)}))?;
        events.push(&json!({"ph": "f", "bp": "e", "id": r.scope_id, "name": "launch", "cat": "gpuspan.flow", "pid": GPU_PID, "tid": tid, "ts": us(gpu.interval.start_ns, base)}))?;
        for (a, &(_, tid)) in r.activities.iter().zip(&tids[2..]) {
            let aargs: Map<String, Json> =
                a.attributes(r).into_iter().map(|(k, v)| (k.to_owned(), to_json(&v))).collect();
            events.push(&json!({
                "ph": "X", "name": a.name, "cat": "gpu.activity", "pid": GPU_PID, "tid": tid,
                "ts": us(a.interval.start_ns, base), "dur": us(a.interval.end_ns, a.interval.start_ns), "args": aargs,
            }))?;
        }
    }
    for (track, lane, tid) in lanes.lanes() {
        let track_name = names.get(&track).cloned().unwrap_or_else(|| format!("thread {}", track.1));
        names.insert((track.0, tid), lane_name(&track_name, lane));
    }
    for ((pid, tid), name) in names {
        events.push(&json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}))?;
    }
    events.finish(base)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// [`write_named_events`] with the names the thread registry holds now.
    pub(crate) fn write_events(records: &[Record], out: impl Write) -> io::Result<()> {
        write_named_events(records, crate::thread::name, out)
    }

    /// Writes the records' timeline, each host thread's track labelled `name(index)`.
    pub(crate) fn write_named_events(
        records: &[Record],
        name: impl Fn(u32) -> String,
        out: impl Write,
    ) -> io::Result<()> {
        write_timeline(records, &[], name, out)
    }
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

    /// A selected span's record is on tracks of its own, named after the span: its host event
    /// (entered on any thread) beside the threads', its GPU interval beside the device's; an
    /// annotated call made inside it stays on its thread's and its device's tracks.
    #[test]
    fn a_selected_span_is_drawn_on_its_own_tracks() {
        let span_site: &'static Site = Box::leak(Box::new(Site::for_span(SiteDesc {
            trace_all: true,
            ..crate::site::site_desc!("frame_span", SiteKind::Kernel, Backend::Wgpu)
        })));
        let gpu = |start_ns, end_ns| GpuTiming {
            interval: Interval { start_ns, end_ns },
            busy_ns: end_ns - start_ns,
            source: TimingSource::GpuTimestamp,
            clock_error_ns: 0,
            bracketed: false,
            bracket_at_exit: false,
            device: None,
        };
        let mut span = Record::new(span_site, 1, 3, Interval { start_ns: 0, end_ns: 1000 });
        span.gpu = Some(GpuTiming { bracketed: true, bracket_at_exit: true, ..gpu(10, 900) });
        let mut call = Record::new(site("inside_call"), 2, 3, Interval { start_ns: 100, end_ns: 200 });
        call.gpu = Some(gpu(150, 180));
        let mut out = Vec::new();
        write_named_events(&[span, call], |t| format!("thread {t}"), &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let track = |pid: &serde_json::Value, tid: &serde_json::Value| {
            events
                .iter()
                .find(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == *pid && e["tid"] == *tid)
                .map(|e| e["args"]["name"].as_str().unwrap().to_owned())
        };
        let tracks = |name: &str| -> Vec<(String, String)> {
            events
                .iter()
                .filter(|e| e["ph"] == "X" && e["name"] == name)
                .map(|e| (e["cat"].as_str().unwrap().to_owned(), track(&e["pid"], &e["tid"]).unwrap()))
                .collect()
        };
        assert_eq!(
            tracks("frame_span"),
            [
                ("span".to_owned(), "span: frame_span".to_owned()),
                ("gpu.span".into(), "GPU (wgpu) span: frame_span".into())
            ]
        );
        assert_eq!(
            tracks("inside_call"),
            [("kernel".to_owned(), "thread 3".to_owned()), ("gpu.kernel".into(), "GPU (wgpu)".into())]
        );
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

    /// Two async calls taking turns on one thread overlap there without nesting, and their GPU
    /// intervals on the device's track: the second of each goes on a lane, nothing is dropped.
    #[test]
    fn events_that_overlap_without_nesting_go_on_lanes() {
        let call = |scope: u64, host: (u64, u64), gpu: (u64, u64)| {
            let mut r = Record::new(site("forward"), scope, 1, Interval { start_ns: host.0, end_ns: host.1 });
            r.gpu = Some(GpuTiming::new(Interval { start_ns: gpu.0, end_ns: gpu.1 }, TimingSource::GpuTimestamp));
            r
        };
        let records = [call(1, (0, 100), (10, 90)), call(2, (50, 150), (40, 140)), call(3, (60, 70), (95, 99))];
        let mut out = Vec::new();
        write_events(&records, &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        let ns = |v: &serde_json::Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
        let slices: Vec<((u64, u64), u64, u64)> = events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                ((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()), ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"]))
            })
            .collect();
        assert_eq!(slices.len(), 6, "every call and GPU interval");
        assert_eq!(gpuspan_capture::lanes::overlapping(&slices), None, "every track's events nest");
        let lanes: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.ends_with("(overlapping 1)"))
            .collect();
        assert_eq!(lanes.len(), 2, "one lane beside the thread's track, one beside the device's: {lanes:?}");
        assert!(lanes.contains(&"GPU (wgpu) (overlapping 1)"), "{lanes:?}");
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

    /// The runtime's timeline in both formats, for docs/benchmarks.md: `n` wgpu-shaped calls
    /// (host call, GPU interval on one device, no activities), written into memory three rounds
    /// each, alternating (the native first: the peak memory it adds is read after its first). `GPUSPAN_BENCH_CALLS` sets `n` (default 200 000); run it in release:
    /// `cargo test --release -p gpuspan --features enabled --lib -- --ignored --nocapture timeline_formats`.
    #[test]
    #[ignore = "a measurement, run by hand in release"]
    fn timeline_formats_size_and_write_time() {
        use crate::record::DeviceLabel;
        let n: u64 = std::env::var("GPUSPAN_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
        let kernel = site("synthetic_kernel");
        let timeline = Timeline::new(n as usize);
        let base = 1_764_000_000_000_000_000u64;
        for i in 0..n {
            let start = base + i * 10_000;
            let mut r = Record::new(kernel, i + 1, 1, Interval { start_ns: start, end_ns: start + 8_000 });
            let mut g =
                GpuTiming::new(Interval { start_ns: start + 2_000, end_ns: start + 7_000 }, TimingSource::GpuTimestamp);
            g.device = Some(DeviceLabel::new(0, "llvmpipe".to_owned()));
            r.gpu = Some(g);
            timeline.accept(&r);
        }
        // Peak resident memory so far (Linux), to see what the first native write adds.
        let peak_mib = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().split(' ').next()?.parse::<f64>().ok());
            kib.map_or(f64::NAN, |k| k / 1024.0)
        };
        let before = peak_mib();
        for round in 1..=3 {
            let mut native = Vec::new();
            let t = Instant::now();
            timeline.write_perfetto(&mut native).unwrap();
            let native_s = t.elapsed().as_secs_f64();
            if round == 1 {
                crate::diagnostics::say(format_args!(
                    "peak RSS with the records held {before:.0} MiB, after the native write {:.0} MiB (its output included)",
                    peak_mib()
                ));
            }
            let mut json = Vec::new();
            let t = Instant::now();
            timeline.write_json(&mut json).unwrap();
            let json_s = t.elapsed().as_secs_f64();
            crate::diagnostics::say(format_args!(
                "round {round}: {n} calls: JSON {:.1} MB in {json_s:.2} s, Perfetto {:.1} MB in {native_s:.2} s",
                json.len() as f64 / 1e6,
                native.len() as f64 / 1e6
            ));
        }
    }
}
