//! The timeline of one or several captures (feature `perfetto`), as Chrome Trace Event JSON
//! (which Perfetto, ui.perfetto.dev, and chrome://tracing open; [`json`]) or as Perfetto's native
//! protobuf trace ([`native`]): what `gpuspan timeline` and `gpuspan merge` write, and the
//! runtime's own timeline at exit when it is asked for the native format (the runtime hands it
//! its records as a [`Capture`] built in memory, with [`Source::counters`] and
//! [`Source::args`] for what a capture file does not carry). The tracks, slices, flows and counters are
//! decided once, here, and handed to a [`Sink`] that writes them in its format, so both formats
//! show the same timeline.
//!
//! One process per capture (a rank of a job, for a merge), named after the program, its pid
//! and host; in it one track per host thread with the annotated calls (each naming the
//! application spans it was made in), one per device with the
//! calls' GPU intervals, one per (device, stream) with the kernels and copies; flow arrows from
//! each call to its GPU work; counter tracks derived from the records (GPU work in flight and
//! calls in flight per device, bytes moved by transfers) and, where a device monitor ran, its
//! readings (utilization, memory, power, clocks, PCIe throughput, temperature) per device, and
//! an instrumented wgpu device's memory (logical bytes after each change). Captures are
//! aligned on their timestamps, which are Unix-epoch nanoseconds of each process's clock: on one machine they share one clock; on
//! several, the alignment is as good as the machines' clock synchronisation (each process's
//! GPU mapping error is in its process's arguments). Events that overlap on a track without
//! nesting go on lanes of it, each a track of its own (`gpuspan_capture::lanes`).

use crate::analysis::{self, Index, Spans};
use crate::lanes::{lane_name, Placer};
use crate::{ActivityKind, Capture, KernelGeometry, Record, SiteKind};
use serde_json::{json, Map, Number, Value};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// First track id of GPU tracks in a process: host thread indexes stay below it.
pub const GPU_TID: u64 = 1 << 32;

/// First track id of the extra lanes of tracks (see `gpuspan_capture::lanes`).
const LANE_TID: u64 = 1 << 40;

/// First track id of the selected spans' host tracks (one per span site, `span: NAME`): a span
/// may be entered on any number of threads, so it is no one thread's.
const SPAN_TID: u64 = 1 << 36;

/// The device key of the track of calls whose work ran on several devices (no device of their
/// own: a collective over the process's GPUs), so that they are not drawn on an unnamed one.
const SEVERAL_DEVICES: u32 = u32::MAX;

mod json;
pub mod native;
mod proto;

/// The output formats of a timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Chrome Trace Event JSON.
    Json,
    /// Perfetto's native protobuf trace (`TracePacket`s; open it in ui.perfetto.dev or its
    /// trace processor).
    Perfetto,
}

/// A slice's link to another by a flow arrow (from the call to its GPU work).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    None,
    /// The arrow starts at this slice; the next [`Flow::End`] slice ends it. The key is unique
    /// over the whole timeline (process, scope id).
    Start((u64, u64)),
    End((u64, u64)),
}

/// One slice on a track: `[start_ns, end_ns]` in the captures' clock (Unix-epoch ns).
#[derive(Debug)]
pub struct Slice<'a> {
    pub pid: u64,
    pub tid: u64,
    pub name: &'a str,
    pub category: &'a str,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Its arguments: an object of numbers, strings, booleans and arrays of them.
    pub args: Value,
    /// More arguments, where `args` has none of the name ([`Source::args`]; empty for a
    /// capture's own).
    pub extra: &'a Map<String, Value>,
    pub flow: Flow,
}

/// Where a timeline goes, event by event; each format writes these in its own way. Processes
/// come first, each process's slices before its track names and counters.
pub trait Sink {
    /// Begins the document; `base` is the earliest instant of all the captures.
    fn start(&mut self, base: u64) -> io::Result<()>;
    /// Process `pid` (capture number), named, sorted by `pid`, with one line of labels.
    fn process(&mut self, pid: u64, name: &str, labels: &str) -> io::Result<()>;
    fn slice(&mut self, slice: Slice<'_>) -> io::Result<()>;
    /// The name of track `tid` of process `pid` (host threads are below [`GPU_TID`]).
    fn track_name(&mut self, pid: u64, tid: u64, name: &str) -> io::Result<()>;
    /// Counter track `name` of process `pid` at `time_ns`, in `unit`: an integer or a float.
    fn counter(&mut self, pid: u64, name: &str, unit: &str, time_ns: u64, value: Number) -> io::Result<()>;
    /// Ends the document; `sources` has one object per capture (label, program, pid, host).
    fn finish(&mut self, sources: Vec<Value>) -> io::Result<()>;
}

/// One process of a timeline: a capture, its label, and what a program's own timeline adds
/// that a capture file does not carry.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    pub label: &'a str,
    pub capture: &'a Capture,
    /// Counter tracks drawn after the capture's own, each a name and its (Unix-epoch ns, bytes)
    /// samples: the runtime's instrumented wgpu devices' memory.
    pub counters: &'a [(String, Vec<(u64, u64)>)],
    /// The arguments of record `i`'s slices (its call and its GPU interval) beside those the
    /// capture gives, which win on a shared name: the runtime's attributes of each record (its
    /// fields, the device's state). Asked once per record as it is written, so that only one
    /// record's are held at a time.
    pub args: &'a dyn Fn(usize) -> Map<String, Value>,
}

impl<'a> Source<'a> {
    /// A capture as it is, labelled `label`.
    pub fn new(label: &'a str, capture: &'a Capture) -> Source<'a> {
        Source { label, capture, counters: &[], args: &|_| Map::new() }
    }
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("label", &self.label)
            .field("records", &self.capture.records.len())
            .field("counters", &self.counters.len())
            .finish_non_exhaustive()
    }
}

/// Writes the captures as one Chrome JSON trace, capture `i` as process `i + 1`, labelled
/// `labels[i]`.
pub fn write(captures: &[(&str, &Capture)], out: impl Write) -> io::Result<()> {
    write_as(Format::Json, captures, out)
}

/// Writes the captures as one trace in `format`, capture `i` as process `i + 1`, labelled
/// `labels[i]`.
pub fn write_as(format: Format, captures: &[(&str, &Capture)], out: impl Write) -> io::Result<()> {
    let sources: Vec<Source<'_>> = captures.iter().map(|&(label, c)| Source::new(label, c)).collect();
    write_sources(format, &sources, out)
}

/// Writes the sources as one trace in `format`, source `i` as process `i + 1`.
pub fn write_sources(format: Format, sources: &[Source<'_>], out: impl Write) -> io::Result<()> {
    match format {
        Format::Json => emit_sources(sources, &mut json::Json::new(out)),
        Format::Perfetto => emit_sources(sources, &mut native::Native::new(out)),
    }
}

/// Hands the captures' timeline to `sink`.
pub fn emit(captures: &[(&str, &Capture)], sink: &mut impl Sink) -> io::Result<()> {
    let sources: Vec<Source<'_>> = captures.iter().map(|&(label, c)| Source::new(label, c)).collect();
    emit_sources(&sources, sink)
}

/// Hands the sources' timeline to `sink`.
pub fn emit_sources(sources: &[Source<'_>], sink: &mut impl Sink) -> io::Result<()> {
    let base = sources
        .iter()
        .flat_map(|s| {
            let c = s.capture;
            let records =
                c.records.iter().map(|r| r.host.start_ns.min(r.gpu.as_ref().map_or(u64::MAX, |g| g.interval.start_ns)));
            let memory = c.memory.iter().filter_map(|m| m.samples.first().map(|s| s.time_ns));
            let counters = s.counters.iter().filter_map(|(_, samples)| samples.first().map(|x| x.0));
            records
                .chain(c.samples.iter().filter_map(|d| d.samples.first().map(|s| s.time_ns)))
                .chain(memory)
                .chain(counters)
        })
        .min()
        .unwrap_or(0);
    sink.start(base)?;
    for (n, source) in sources.iter().enumerate() {
        process(sink, n as u64 + 1, source)?;
    }
    let sources: Vec<Value> = sources
        .iter()
        .map(|s| {
            let (label, h) = (s.label, &s.capture.header);
            json!({"label": label, "program": h.program, "pid": h.pid, "host": h.hostname})
        })
        .collect();
    sink.finish(sources)
}

fn process(ev: &mut impl Sink, pid: u64, source: &Source<'_>) -> io::Result<()> {
    let (label, c) = (source.label, source.capture);
    let index = Index::new(c);
    let h = &c.header;
    let host = h.hostname.as_deref().map(|h| format!(" on {h}")).unwrap_or_default();
    let clock_error = c.records.iter().filter_map(|r| r.gpu.as_ref().map(|g| g.clock_error_ns)).max().unwrap_or(0);
    ev.process(
        pid,
        &format!("{} (pid {}){host} [{label}]", h.program, h.pid),
        &format!("GPU clock mapping error ≤ {:.1} µs", clock_error as f64 / 1000.0),
    )?;
    let mut names: BTreeMap<u64, String> = c.threads.iter().map(|t| (u64::from(t.index), t.name.clone())).collect();
    // GPU tracks: (device, stream, selected span's site) -> tid; stream None is the device's call
    // track, or with a span site that span's track beside it.
    let mut tracks: BTreeMap<GpuTrack, u64> = BTreeMap::new();
    let mut track = |key: GpuTrack| {
        let next = GPU_TID + tracks.len() as u64;
        *tracks.entry(key).or_insert(next)
    };
    let span_site = |r: &Record| index.site(r.site).filter(|s| s.kind == SiteKind::Span).map(|s| s.id);
    for s in c.sites.iter().filter(|s| s.kind == SiteKind::Span) {
        names.insert(SPAN_TID + u64::from(s.id), format!("span: {}", index.site_name(s.id)));
    }
    // Each record's events as (track, start, end): the host call, its GPU interval, its
    // activities; then their lanes, and a track of its own for every lane past the first.
    let slices: Vec<Vec<(u64, u64, u64)>> =
        c.records.iter().map(|r| record_slices(r, span_site(r), &mut track)).collect();
    let flat: Vec<(u64, u64, u64)> = slices.iter().flatten().copied().collect();
    let mut lanes = Placer::new(&flat, LANE_TID);
    let spans = Spans::new(&c.spans);
    let no_args = Map::new();
    for (i, (r, slices)) in c.records.iter().zip(slices).enumerate() {
        let extra = &(source.args)(i);
        // Every event's lane is taken here, in order, whichever of them are written.
        let tids: Vec<u64> = slices.into_iter().map(|(tid, _, _)| lanes.next(tid).unwrap_or(tid)).collect();
        let host_tid = tids[0];
        let site = index.site(r.site);
        let name = index.site_name(r.site);
        let cat = site.map_or("call", |s| s.kind.as_str());
        let mut args = json!({"scope_id": r.scope_id, "gpu.timing.source": r.source().as_str()});
        let chain = spans.chain(r.span);
        if !chain.is_empty() {
            // The application spans the call was made in, outermost first, each with its id.
            let names: Vec<String> = chain.iter().map(|&(id, n)| format!("{} #{id}", spans.name(n))).collect();
            args["spans"] = json!(names.join(" > "));
        }
        if let Some(b) = r.bytes {
            args["bytes"] = json!(b);
        }
        if r.error {
            args["error"] = json!(true);
        }
        // Flow keys are unique across the merged processes: scope ids are unique per process.
        let flow = (pid, r.scope_id);
        let host = Slice {
            pid,
            tid: host_tid,
            name: &name,
            category: cat,
            start_ns: r.host.start_ns,
            end_ns: r.host.end_ns,
            args,
            extra,
            flow: if r.gpu.is_some() { Flow::Start(flow) } else { Flow::None },
        };
        ev.slice(host)?;
        let Some(g) = &r.gpu else { continue };
        let tid = tids[1];
        let mut gargs = json!({"gpu.busy_us": g.busy_ns as f64 / 1000.0, "gpu.clock_error_us": g.clock_error_ns as f64 / 1000.0,
            "gpu.timing.source": g.source.as_str()});
        if let Some(end) = g.bracket.end() {
            gargs["gpu.timing.bracketed"] = json!(true);
            gargs["gpu.timing.bracket_end"] = json!(end);
        }
        if r.clock_corrected_ns > 0 {
            gargs["gpu.clock_corrected_ns"] = json!(r.clock_corrected_ns);
        }
        let gpu_cat = format!("gpu.{cat}");
        ev.slice(Slice {
            pid,
            tid,
            name: &name,
            category: &gpu_cat,
            start_ns: g.interval.start_ns,
            end_ns: g.interval.end_ns,
            args: gargs,
            extra,
            flow: Flow::End(flow),
        })?;
        for (a, &tid) in r.activities.iter().zip(&tids[2..]) {
            let args = match &a.kind {
                ActivityKind::Kernel(KernelGeometry {
                    grid,
                    block,
                    registers_per_thread,
                    static_shared_bytes,
                    dynamic_shared_bytes,
                }) => {
                    json!({"gpu.cuda.grid_dim": grid, "gpu.cuda.block_dim": block,
                        "gpu.cuda.registers_per_thread": registers_per_thread,
                        "gpu.cuda.shared_mem_bytes": static_shared_bytes + dynamic_shared_bytes})
                }
                ActivityKind::Copy { bytes, direction, src, dst } => json!({"gpu_transfer.bytes": bytes,
                    "gpu_transfer.direction": direction.map(|d| d.as_str()),
                    "gpu_transfer.src_kind": src.as_str(), "gpu_transfer.dst_kind": dst.as_str()}),
                ActivityKind::Set { bytes } => json!({"gpu_transfer.bytes": bytes}),
            };
            ev.slice(Slice {
                pid,
                tid,
                name: &a.name,
                category: "gpu.activity",
                start_ns: a.interval.start_ns,
                end_ns: a.interval.end_ns,
                args,
                extra: &no_args,
                flow: Flow::None,
            })?;
        }
    }
    for ((device, stream, span), tid) in tracks {
        let label = match device {
            Some(SEVERAL_DEVICES) => "GPUs: several devices".to_owned(),
            _ => index.device_label(device),
        };
        let name = match (stream, span) {
            (Some(s), _) => format!("{label} stream {s}"),
            (None, Some(site)) => format!("{label} span: {}", index.site_name(site)),
            (None, None) => format!("{label} calls"),
        };
        names.insert(tid, name);
    }
    for (tid, lane, lane_tid) in lanes.lanes() {
        names.insert(lane_tid, lane_name(names.get(&tid).map_or("?", String::as_str), lane));
    }
    for (tid, name) in names {
        ev.track_name(pid, tid, &name)?;
    }
    counters(ev, pid, c, &index)?;
    for (name, samples) in source.counters {
        for &(t, bytes) in samples {
            ev.counter(pid, name, "bytes", t, bytes.into())?;
        }
    }
    Ok(())
}

/// A GPU track: (device, stream, the selected span's site for its own track).
type GpuTrack = (Option<u32>, Option<u64>, Option<u32>);

/// A record's events as (track, start, end), in the order [`process`] writes them: the call on
/// its thread, then, when GPU-timed, its GPU interval on its device's call track (or the track of
/// calls on several devices) and its activities on their streams' tracks. A selected span's
/// record (`span`: its site) is on its span's tracks instead, host and GPU; its activities stay
/// on their streams'.
fn record_slices(r: &Record, span: Option<u32>, track: &mut impl FnMut(GpuTrack) -> u64) -> Vec<(u64, u64, u64)> {
    let host = span.map_or(u64::from(r.thread), |site| SPAN_TID + u64::from(site));
    let mut out = vec![(host, r.host.start_ns, r.host.end_ns)];
    if let Some(g) = &r.gpu {
        let several = g.device.is_none() && r.activities.iter().any(|a| a.device.is_some());
        let tid = track((if several { Some(SEVERAL_DEVICES) } else { g.device }, None, span));
        out.push((tid, g.interval.start_ns, g.interval.end_ns));
        for a in &r.activities {
            out.push((track((a.device.or(g.device), a.stream, None)), a.interval.start_ns, a.interval.end_ns));
        }
    }
    out
}

/// A level that steps up and down at the given instants, as a counter track.
fn levels(ev: &mut impl Sink, pid: u64, name: &str, unit: &str, mut e: Vec<(u64, i64)>) -> io::Result<()> {
    // Ends before starts at the same instant: back-to-back work is not counted as overlap.
    e.sort_unstable();
    let mut level = 0i64;
    let mut i = 0;
    while i < e.len() {
        let t = e[i].0;
        while i < e.len() && e[i].0 == t {
            level += e[i].1;
            i += 1;
        }
        ev.counter(pid, name, unit, t, level.into())?;
    }
    Ok(())
}

/// The device monitor's readings: one counter track per device and quantity.
fn readings(ev: &mut impl Sink, pid: u64, c: &Capture, index: &Index<'_>) -> io::Result<()> {
    for d in &c.samples {
        let label = index.device_label(Some(d.device));
        for s in &d.samples {
            let values = [
                ("utilization", "%", s.gpu_utilization_pct.map(f64::from)),
                ("memory utilization", "%", s.memory_utilization_pct.map(f64::from)),
                ("memory used", "bytes", s.memory_used_bytes.map(|b| b as f64)),
                ("power", "W", s.power_w),
                ("SM clock", "MHz", s.sm_clock_mhz.map(f64::from)),
                ("memory clock", "MHz", s.memory_clock_mhz.map(f64::from)),
                ("PCIe rx", "B/s", s.pcie_rx_bytes_per_s),
                ("PCIe tx", "B/s", s.pcie_tx_bytes_per_s),
                ("temperature", "°C", s.temperature_c.map(f64::from)),
            ];
            for (what, unit, v) in values {
                let Some(v) = v else { continue };
                let Some(v) = Number::from_f64(v) else { continue };
                ev.counter(pid, &format!("{label} {what} ({unit})"), unit, s.time_ns, v)?;
            }
        }
    }
    Ok(())
}

/// Counter tracks derived from the records: GPU work in flight per device (kernels, copies, or
/// calls' GPU intervals overlapping in time), calls in flight per device (launched on the host
/// and not yet done on the GPU: the queue's depth), the cumulative bytes moved; then the
/// device monitor's readings.
fn counters(ev: &mut impl Sink, pid: u64, c: &Capture, index: &Index<'_>) -> io::Result<()> {
    let mut edges: BTreeMap<Option<u32>, Vec<(u64, i64)>> = BTreeMap::new();
    for w in analysis::work(c) {
        let e = edges.entry(w.device).or_default();
        e.push((w.interval.start_ns, 1));
        e.push((w.interval.end_ns, -1));
    }
    let mut queued: BTreeMap<Option<u32>, Vec<(u64, i64)>> = BTreeMap::new();
    for r in &c.records {
        let Some(g) = &r.gpu else { continue };
        let e = queued.entry(g.device).or_default();
        e.push((r.host.start_ns, 1));
        e.push((g.interval.end_ns.max(r.host.start_ns), -1));
    }
    for (device, e) in queued {
        levels(ev, pid, &format!("{} calls in flight", index.device_label(device)), "calls", e)?;
    }
    for (device, e) in edges {
        levels(ev, pid, &format!("{} work in flight", index.device_label(device)), "work", e)?;
    }
    for (t, total) in analysis::bytes_moved(c) {
        ev.counter(pid, "bytes moved", "bytes", t, total.into())?;
    }
    readings(ev, pid, c, index)?;
    memory(ev, pid, c)
}

/// An instrumented wgpu device's live bytes (logical sizes) after each change, named as the
/// runtime's own timeline names it ([`crate::MemoryAccount::track_name`]).
fn memory(ev: &mut impl Sink, pid: u64, c: &Capture) -> io::Result<()> {
    for m in &c.memory {
        let id = c.device(m.device).map_or(m.device, |d| d.id);
        let name = crate::MemoryAccount::track_name(id);
        for s in &m.samples {
            ev.counter(pid, &name, "bytes", s.time_ns, s.bytes.into())?;
        }
    }
    Ok(())
}
