//! `gpuspan report`: per-site, per-kernel and per-transfer tables, device busy time, GPU idle
//! time attributed to the host, GPU cost per request (application span), the device monitor's
//! readings, launch-bound sites and transfer findings (pageable copies, low link efficiency:
//! [`crate::link`]).
//!
//! Every figure but the "all calls" columns is computed from the recorded (sampled) calls, so
//! it can be checked against the records; "all calls" comes from the runtime's aggregates of
//! every call.

use crate::analysis::Index;
use crate::idle::{self, DeviceIdle};
use crate::link;
use crate::load::LoadError;
use crate::requests::{self, RequestRow};
use crate::span_time::{self, SpanRow};
use crate::stats::{self, Samples};
use crate::table::{self, Table};
use gpuspan_capture::{ActivityKind, Backend, Bracket, Capture, MemoryKind, Record, SiteKind, TimingSource};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

/// Everything the report says, as `--format json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub capture: About,
    pub sites: Vec<SiteRow>,
    pub kernels: Vec<KernelRow>,
    pub transfers: Vec<TransferRow>,
    pub devices: Vec<DeviceIdle>,
    /// GPU time per application span instance, by span name.
    pub requests: Vec<RequestRow>,
    /// The selected `tracing` spans (sites of kind `span`): GPU self and inclusive time per
    /// span name ([`crate::span_time`]).
    pub spans: Vec<SpanRow>,
    /// The device monitor's readings, per device.
    pub readings: Vec<ReadingsRow>,
    pub launch_bound: Vec<LaunchBound>,
    pub findings: Vec<Finding>,
    /// Sites compiled in that no call reached.
    pub never_reached: Vec<String>,
    /// Sites still running at shutdown, none of whose calls had finished (an annotated `main`):
    /// called, so not in `never_reached`, but with no time counted (capture format 5).
    pub still_running: Vec<String>,
    pub losses: Vec<(String, u64)>,
    pub notes: Vec<String>,
    /// What this capture cannot answer, and why.
    pub limits: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct About {
    pub program: String,
    pub pid: u32,
    pub hostname: Option<String>,
    pub writer: String,
    pub start_ns: u64,
    /// From the start to the end marker (or the last record of an unfinished capture).
    pub duration_ns: u64,
    pub threshold_us: u64,
    pub trace_all: bool,
    pub records: usize,
    /// The writer finished the file (an end marker was read).
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteRow {
    pub site: String,
    pub kind: String,
    pub backend: String,
    /// Timing sources of the recorded calls.
    pub sources: Vec<String>,
    /// Recorded (sampled) calls.
    pub recorded: u64,
    /// Every call, from the aggregates (absent in an unfinished capture).
    pub calls: Option<u64>,
    pub total_all_ns: Option<u64>,
    /// Over the recorded calls: GPU busy time where measured, else host time.
    pub total_ns: u64,
    pub mean_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub host_total_ns: u64,
    pub bytes: u64,
    pub bandwidth_bytes_per_s: Option<f64>,
    pub errors: u64,
    /// Some durations are queue brackets: upper bounds.
    pub bracketed: bool,
    /// Where those brackets ended: `last_submit` (with the call's last submission), `exit` (at
    /// the function's exit, holding host work after it), `unstated` (a capture of format 3 or
    /// older); each that occurs.
    pub bracket_ends: Vec<String>,
    /// Recorded calls whose GPU interval was moved to start at the call (clock correction).
    pub clock_corrected: u64,
}

/// The backend shown for a site: as declared, except that a bare site (declared `host`) whose
/// calls were GPU-timed is `cuda (bare)` (CUPTI or CUDA events found its work) or `wgpu (bare)`
/// (`gpuspan::wgpu::attach` timed it). The runtime's summary labels a site by the same rule
/// (`SiteSummary::backend_label`); `tests/tests/labels_agree.rs` holds the two together.
fn backend_label(declared: Backend, sources: &[TimingSource]) -> String {
    let cuda = sources.iter().any(|s| matches!(s, TimingSource::Cupti | TimingSource::CudaEvent));
    let wgpu = sources.iter().any(|s| matches!(s, TimingSource::GpuTimestamp | TimingSource::GpuPasses));
    match (declared, cuda, wgpu) {
        (Backend::Host, true, _) => "cuda (bare)".to_owned(),
        (Backend::Host, false, true) => "wgpu (bare)".to_owned(),
        (declared, ..) => declared.as_str().to_owned(),
    }
}

/// A site's timing sources, and where its brackets ended: `gpu_timestamp (bracket to last
/// submit)`. Shown in the table and in its CSV.
fn source_cell(s: &SiteRow) -> String {
    let sources = if s.sources.is_empty() { "-".to_owned() } else { s.sources.join("+") };
    let ends: Vec<&str> = s
        .bracket_ends
        .iter()
        .map(|e| match e.as_str() {
            "last_submit" => "bracket to last submit",
            "exit" => "bracket to exit",
            _ => "bracket",
        })
        .collect();
    if ends.is_empty() {
        sources
    } else {
        format!("{sources} ({})", ends.join(", "))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    pub kernel: String,
    /// `activity`: kernels the GPU reported (CUPTI); `scope`: a kernel site's GPU time (wgpu).
    pub from: String,
    pub count: u64,
    pub total_ns: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    /// The most frequent launch geometry, and how many others were seen.
    pub geometry: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferRow {
    pub transfer: String,
    pub direction: Option<String>,
    pub src_kind: Option<String>,
    pub dst_kind: Option<String>,
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    pub bandwidth_bytes_per_s: Option<f64>,
    /// Bandwidth over the link's peak (0 to 1), for copies between host and device the GPU
    /// reported on a device whose PCIe peak the capture holds (format 3, a device monitor).
    pub link_efficiency: Option<f64>,
    /// The peak it is measured against (time-weighted where the copies ran on several devices).
    pub link_peak_bytes_per_s: Option<f64>,
    /// Some times are queue brackets (upper bounds): the bandwidth is a lower bound.
    pub bracketed: bool,
}

/// A kernel site whose GPU work per call is shorter than the host time of the call: the GPU
/// waits on launching (batch the work, or launch less often). Transfers are left out: a
/// synchronous copy's host time includes waiting for the copy, which says nothing of launching.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchBound {
    pub site: String,
    pub recorded: u64,
    pub gpu_p50_ns: u64,
    pub host_p50_ns: u64,
}

/// What a device monitor (NVML) read over the capture: mean and peak of each counter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadingsRow {
    pub device: String,
    pub samples: u64,
    pub gpu_utilization_pct: Option<(f64, f64)>,
    pub memory_used_bytes: Option<(f64, f64)>,
    pub power_w: Option<(f64, f64)>,
    pub sm_clock_mhz: Option<(f64, f64)>,
    pub pcie_rx_bytes_per_s: Option<(f64, f64)>,
    pub pcie_tx_bytes_per_s: Option<(f64, f64)>,
}

/// (mean, max) of the values present.
fn mean_max(values: impl Iterator<Item = Option<f64>>) -> Option<(f64, f64)> {
    let (mut n, mut sum, mut max) = (0u64, 0.0, f64::MIN);
    for v in values.flatten() {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| (sum / n as f64, max))
}

fn readings_rows(capture: &Capture, index: &Index<'_>) -> Vec<ReadingsRow> {
    let mut by_device: BTreeMap<u32, Vec<&gpuspan_capture::DeviceSample>> = BTreeMap::new();
    for s in &capture.samples {
        by_device.entry(s.device).or_default().extend(&s.samples);
    }
    by_device
        .into_iter()
        .map(|(device, v)| ReadingsRow {
            device: index.device_label(Some(device)),
            samples: v.len() as u64,
            gpu_utilization_pct: mean_max(v.iter().map(|s| s.gpu_utilization_pct.map(f64::from))),
            memory_used_bytes: mean_max(v.iter().map(|s| s.memory_used_bytes.map(|b| b as f64))),
            power_w: mean_max(v.iter().map(|s| s.power_w)),
            sm_clock_mhz: mean_max(v.iter().map(|s| s.sm_clock_mhz.map(f64::from))),
            pcie_rx_bytes_per_s: mean_max(v.iter().map(|s| s.pcie_rx_bytes_per_s)),
            pcie_tx_bytes_per_s: mean_max(v.iter().map(|s| s.pcie_tx_bytes_per_s)),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `pageable_copy`, `low_link_efficiency`, `upper_bound`, `sampled`, `incomplete`.
    pub kind: String,
    pub message: String,
}

/// Builds the report of one capture.
pub fn build(capture: &Capture) -> Report {
    let mut b = Builder { idle: idle::Builder::exact(), ..Builder::default() };
    for s in &capture.sites {
        b.site(s);
    }
    b.spans(&capture.spans);
    b.links(&capture.links);
    for r in &capture.records {
        b.record(r);
    }
    b.finish(capture).0
}

/// The report of the capture at `path`, read in one streaming pass (see [`Builder`]); the
/// capture comes back without its records (for its truncation, if any).
pub fn stream(path: &Path, progress: bool) -> Result<(Report, Capture), LoadError> {
    let mut b = Builder::default();
    let mut fed = 0;
    let meta = crate::load::stream(path, progress, |c, r| {
        for s in &c.sites[fed..] {
            b.site(s);
        }
        fed = c.sites.len();
        b.spans(&c.spans);
        b.links(&c.links);
        b.record(r);
    })?;
    let (mut report, again) = b.finish(&meta);
    if again.idle || again.links {
        // Records too far out of order for the idle analysis' window, or large copies read
        // before their link's peak: a second pass, exact, with every peak known.
        let mut idle = again.idle.then(idle::Builder::exact);
        let mut links = again.links.then(|| link::Builder::new(&meta.links));
        let second = crate::load::stream(path, progress, |_, r| {
            if let Some(idle) = &mut idle {
                idle.record(r);
            }
            if let Some(links) = &mut links {
                for a in &r.activities {
                    links.copy(r, a);
                }
            }
        })?;
        let index = Index::new(&second);
        if let Some(idle) = idle {
            report.devices = idle.finish(&index).expect("an unbounded builder takes records in any order");
        }
        if let Some(links) = links {
            let at = report.findings.iter().position(|f| f.kind == "low_link_efficiency");
            report.findings.retain(|f| f.kind != "low_link_efficiency");
            let at = at.unwrap_or_else(|| report.findings.iter().take_while(|f| f.kind == "pageable_copy").count());
            report.findings.splice(at..at, links.findings(&index));
        }
    }
    Ok((report, meta))
}

#[derive(Debug, Default)]
struct SiteAcc {
    recorded: u64,
    durations: Samples,
    total_ns: u64,
    bytes: u64,
    sources: Vec<TimingSource>,
    host_total_ns: u64,
    errors: u64,
    brackets: BTreeSet<Bracket>,
    clock_corrected: u64,
}

#[derive(Debug, Default)]
struct KernelAcc {
    durations: Samples,
    geometry: BTreeMap<String, u64>,
}

type TransferKey = (String, Option<String>, Option<String>, Option<String>);

#[derive(Debug, Default)]
struct TransferAcc {
    count: u64,
    bytes: u64,
    ns: u64,
    bracketed: bool,
    /// The host↔device copies among them, per device.
    link: link::Sums,
}

/// What [`Builder::finish`] could not answer in one pass over records in file order: read the
/// records again for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Again {
    /// Records too far out of order for the idle analysis' window: `devices` is empty.
    pub idle: bool,
    /// Large copies read before their device's link peak: the low-efficiency findings lack them.
    pub links: bool,
}

/// The report built one record at a time: memory grows with the sites, kernels, transfers,
/// devices and threads, and (for the idle analysis) with the GPU work and calls, not with the
/// records' contents. Feed it every site, then the records in any order, then
/// [`Builder::finish`] with the capture's other frames.
#[derive(Debug, Default)]
pub struct Builder {
    kinds: HashMap<u32, SiteKind>,
    /// `gpu_to_cpu` transfer sites, and those of them with host-timed calls: a read-back timed
    /// on the host is mostly waiting for the GPU, so it gets no bandwidth.
    read_backs: BTreeSet<u32>,
    host_read_backs: BTreeSet<u32>,
    sites: BTreeMap<u32, SiteAcc>,
    kernels: HashMap<String, KernelAcc>,
    /// Kernel sites' own GPU time, by site id (named at the end: no string per record).
    scopes: BTreeMap<u32, Samples>,
    transfers: BTreeMap<TransferKey, TransferAcc>,
    /// Transfer sites without reported copies, by site id (named at the end).
    transfer_sites: BTreeMap<u32, TransferAcc>,
    /// Kernel sites' GPU and host times.
    launch: BTreeMap<u32, (Samples, Samples)>,
    /// (direction, pageable?) -> (count, bytes, ns)
    copies: BTreeMap<(String, bool), (u64, u64, u64)>,
    last_ns: Option<u64>,
    records: usize,
    idle: idle::Builder,
    requests: requests::Builder,
    span_time: span_time::Builder,
    links: link::Builder,
}

fn add_transfer(acc: &mut BTreeMap<TransferKey, TransferAcc>, key: TransferKey, x: TransferAcc) {
    let e = acc.entry(key).or_default();
    e.count += x.count;
    e.bytes += x.bytes;
    e.ns += x.ns;
    e.bracketed |= x.bracketed;
    e.link.merge(&x.link);
}

impl Builder {
    /// A site the records may name.
    pub fn site(&mut self, s: &gpuspan_capture::Site) {
        self.kinds.insert(s.id, s.kind);
        self.span_time.site(s);
        if s.direction == Some(gpuspan_capture::Direction::GpuToCpu) {
            self.read_backs.insert(s.id);
        }
    }

    /// The application spans read so far (feed them before the records made in them).
    pub fn spans(&mut self, all: &[gpuspan_capture::Span]) {
        self.requests.spans(all);
        self.span_time.spans(all);
    }

    /// The link frames read so far (feed them before the records: a large copy read before its
    /// device's peak is judged only by a second pass, see [`Again::links`]).
    pub fn links(&mut self, all: &[gpuspan_capture::DeviceLink]) {
        self.links.links(all);
    }

    pub fn record(&mut self, r: &Record) {
        self.records += 1;
        let end = r.host.end_ns.max(r.gpu.as_ref().map_or(0, |g| g.interval.end_ns));
        self.last_ns = Some(self.last_ns.map_or(end, |l| l.max(end)));
        let kind = self.kinds.get(&r.site).copied();
        let d = r.duration_ns();
        let s = self.sites.entry(r.site).or_default();
        s.recorded += 1;
        s.durations.push(d);
        s.total_ns += d;
        s.bytes += r.bytes.unwrap_or(0);
        if !s.sources.contains(&r.source()) {
            s.sources.push(r.source());
        }
        if r.source() == TimingSource::Host && self.read_backs.contains(&r.site) {
            self.host_read_backs.insert(r.site);
        }
        s.host_total_ns += r.host.duration_ns();
        s.errors += u64::from(r.error);
        if let Some(g) = r.gpu.as_ref().filter(|g| g.bracketed()) {
            s.brackets.insert(g.bracket);
        }
        s.clock_corrected += u64::from(r.clock_corrected_ns > 0);

        let mut copies = false;
        for a in &r.activities {
            let ns = a.interval.duration_ns();
            match &a.kind {
                ActivityKind::Kernel { grid, block, .. } => {
                    let e = match self.kernels.get_mut(&a.name) {
                        Some(e) => e,
                        None => self.kernels.entry(a.name.clone()).or_default(),
                    };
                    e.durations.push(ns);
                    *e.geometry.entry(format!("grid {grid:?} block {block:?}")).or_default() += 1;
                }
                ActivityKind::Copy { bytes, direction, src, dst } => {
                    copies = true;
                    let key = (
                        a.name.clone(),
                        direction.map(|d| d.as_str().to_owned()),
                        Some(src.as_str().to_owned()),
                        Some(dst.as_str().to_owned()),
                    );
                    // Into the row directly: its per-device sums allocate once, not per copy.
                    let e = self.transfers.entry(key).or_default();
                    e.count += 1;
                    e.bytes += bytes;
                    e.ns += ns;
                    if let Some(device) = self.links.copy(r, a) {
                        e.link.add(device, *bytes, ns);
                    }
                    let pageable = *src == MemoryKind::Pageable || *dst == MemoryKind::Pageable;
                    let pinned = *src == MemoryKind::Pinned || *dst == MemoryKind::Pinned;
                    if pageable || pinned {
                        let d = direction.map_or("copy", |d| d.as_str()).to_owned();
                        let e = self.copies.entry((d, pageable)).or_insert((0, 0, 0));
                        e.0 += 1;
                        e.1 += bytes;
                        e.2 += ns;
                    }
                }
                ActivityKind::Set { bytes } => {
                    copies = true;
                    add_transfer(
                        &mut self.transfers,
                        (a.name.clone(), Some("memset".into()), None, None),
                        TransferAcc { count: 1, bytes: *bytes, ns, ..TransferAcc::default() },
                    );
                }
            }
        }
        if kind == Some(SiteKind::Kernel) {
            // A bracket's GPU time is a bound, not the call's work: no evidence either way.
            if let Some(g) = r.gpu.as_ref().filter(|g| !g.bracketed()) {
                if r.activities.is_empty() {
                    self.scopes.entry(r.site).or_default().push(g.busy_ns);
                }
                let e = self.launch.entry(r.site).or_default();
                e.0.push(g.busy_ns);
                e.1.push(r.host.duration_ns());
            }
        }
        if !copies && kind == Some(SiteKind::Transfer) {
            let e = self.transfer_sites.entry(r.site).or_default();
            e.count += 1;
            e.bytes += r.bytes.unwrap_or(0);
            e.ns += d;
            e.bracketed |= r.gpu.as_ref().is_some_and(|g| g.bracketed());
        }
        self.idle.record(r);
        self.requests.record(r);
        self.span_time.record(r);
    }

    /// The report, with everything but the records from `capture` (its records are ignored:
    /// they were fed to [`Builder::record`]), and what a second pass must redo ([`Again`]).
    pub fn finish(mut self, capture: &Capture) -> (Report, Again) {
        // Link frames after the last record (a row's efficiency needs only the end's peaks).
        self.links.links(&capture.links);
        let index = Index::new(capture);
        let h = &capture.header;
        let end_ns = capture.end.as_ref().map(|e| e.end_ns).or(self.last_ns).unwrap_or(h.start_ns);
        let about = About {
            program: h.program.clone(),
            pid: h.pid,
            hostname: h.hostname.clone(),
            writer: h.writer.clone(),
            start_ns: h.start_ns,
            duration_ns: end_ns.saturating_sub(h.start_ns),
            threshold_us: h.threshold_us,
            trace_all: h.trace_all,
            records: self.records,
            complete: capture.end.is_some(),
        };
        let reached: BTreeSet<u32> =
            self.sites.keys().copied().chain(capture.aggregates.iter().map(|a| a.site)).collect();
        let mut approximate = false;
        let sites = self.site_rows(capture, &index, &mut approximate);
        let launch_bound = self.launch_bound(&index, &mut approximate);
        let mut findings = self.transfer_findings();
        findings.extend(self.links.findings(&index));
        for s in sites.iter().filter(|s| s.bracketed) {
            let at_exit = if s.bracket_ends.iter().any(|e| e == "exit") {
                "; some brackets ended at the function's exit, not with its last submission, so they also hold the host's work after it (submissions in a callee, a closure or a macro are not seen)"
            } else {
                ""
            };
            findings.push(Finding {
                kind: "upper_bound".into(),
                message: format!(
                    "{}: timed by timestamps around its queue submissions, so its GPU times are upper bounds (they include submission latency while the GPU idled){at_exit}",
                    s.site
                ),
            });
        }
        let unrecorded: u64 = sites.iter().map(|s| s.calls.unwrap_or(s.recorded).saturating_sub(s.recorded)).sum();
        if unrecorded > 0 {
            let all: u64 = sites.iter().map(|s| s.calls.unwrap_or(s.recorded)).sum();
            findings.push(Finding {
                kind: "sampled".into(),
                message: format!(
                    "{unrecorded} of {all} calls were not recorded (shorter than {} µs): quantiles, kernels, transfers and idle time cover the {} recorded calls; run with GPUSPAN_TRACE_ALL=on to record every call",
                    h.threshold_us,
                    all - unrecorded
                ),
            });
        }
        if let Some(t) = &capture.truncation {
            findings.push(Finding { kind: "incomplete".into(), message: t.to_string() });
        }
        let never_reached = if capture.end.is_some() {
            capture
                .sites
                .iter()
                .filter(|s| {
                    !reached.contains(&s.id)
                        && !capture.running.contains(&s.id)
                        && !s.module_path.starts_with("gpuspan::")
                })
                .map(|s| s.name.clone())
                .collect()
        } else {
            // Without the aggregates, an unrecorded site may still have been called.
            Vec::new()
        };
        let (losses, notes) = capture
            .end
            .as_ref()
            .map(|e| (e.losses.iter().map(|l| (l.what.clone(), l.count)).collect(), e.notes.clone()))
            .unwrap_or_default();
        let kernels = self.kernel_rows(&index, &mut approximate);
        let transfers = self.transfer_rows(&index);
        let devices = std::mem::take(&mut self.idle).finish(&index);
        let idle_again = devices.is_none();
        let devices = devices.unwrap_or_default();
        let (requests, approximate_requests) = std::mem::take(&mut self.requests).finish();
        approximate |= approximate_requests;
        let (spans, approximate_spans) =
            std::mem::take(&mut self.span_time).finish(|id| index.site_name(id), &capture.aggregates);
        approximate |= approximate_spans;
        let readings = readings_rows(capture, &index);
        let mut limits = Vec::new();
        if requests.is_empty() {
            limits.push("GPU cost per request: no recorded call was made inside an application tracing span (a subscriber built on tracing-subscriber's registry is needed; captures of format 1 hold no spans)".into());
        }
        if readings.is_empty() {
            limits.push("device counters: no device monitor readings (NVML: the `nvml` feature, on a machine with an NVIDIA driver)".into());
        }
        limits.extend(self.links.limit(&index));
        if approximate {
            limits.push(format!(
                "exact p50/p99: rows with more than {} recorded values take them from a log-linear histogram, within {:.2} % of the exact value",
                stats::EXACT_CAP,
                stats::HISTOGRAM_ERROR * 100.0
            ));
        }
        let report = Report {
            capture: about,
            sites,
            kernels,
            transfers,
            devices,
            requests,
            spans,
            readings,
            launch_bound,
            findings,
            never_reached,
            still_running: capture.running.iter().map(|id| index.site_name(*id)).collect(),
            losses,
            notes,
            limits,
        };
        (report, Again { idle: idle_again, links: self.links.needs_second_pass() })
    }

    fn site_rows(&mut self, capture: &Capture, index: &Index<'_>, approximate: &mut bool) -> Vec<SiteRow> {
        for a in &capture.aggregates {
            self.sites.entry(a.site).or_default();
        }
        let mut rows: Vec<SiteRow> = std::mem::take(&mut self.sites)
            .into_iter()
            .map(|(id, mut s)| {
                let site = index.site(id);
                let aggregate = capture.aggregates.iter().find(|a| a.site == id);
                *approximate |= s.durations.approximate();
                SiteRow {
                    site: index.site_name(id),
                    kind: site.map_or("?", |s| s.kind.as_str()).to_owned(),
                    backend: site.map_or_else(|| "?".to_owned(), |site| backend_label(site.backend, &s.sources)),
                    sources: s.sources.iter().map(|s| s.as_str().to_owned()).collect(),
                    recorded: s.recorded,
                    calls: aggregate.map(|a| a.calls),
                    total_all_ns: aggregate.map(|a| a.total_ns),
                    total_ns: s.total_ns,
                    mean_ns: (s.recorded > 0).then(|| s.total_ns / s.recorded),
                    p50_ns: s.durations.quantile(0.5),
                    p99_ns: s.durations.quantile(0.99),
                    host_total_ns: s.host_total_ns,
                    bytes: s.bytes,
                    // A host-timed read-back is mostly waiting; a bracket holds more than the
                    // copy: neither time makes a bandwidth.
                    // Only a transfer's own time makes a rate (a kernel site's bytes are
                    // copies beside its kernels).
                    bandwidth_bytes_per_s: if site.is_none_or(|site| site.kind != SiteKind::Transfer)
                        || self.host_read_backs.contains(&id)
                        || !s.brackets.is_empty()
                    {
                        None
                    } else {
                        table::rate(s.bytes, s.total_ns)
                    },
                    errors: s.errors,
                    bracketed: !s.brackets.is_empty(),
                    bracket_ends: s.brackets.iter().filter_map(|b| b.end()).map(str::to_owned).collect(),
                    clock_corrected: s.clock_corrected,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_ns.cmp(&a.total_ns).then(b.total_all_ns.cmp(&a.total_all_ns)).then_with(|| a.site.cmp(&b.site))
        });
        rows
    }

    fn kernel_rows(&mut self, index: &Index<'_>, approximate: &mut bool) -> Vec<KernelRow> {
        let mut acc: BTreeMap<(String, &'static str), KernelAcc> =
            std::mem::take(&mut self.kernels).into_iter().map(|(k, a)| ((k, "activity"), a)).collect();
        for (id, d) in std::mem::take(&mut self.scopes) {
            let e = acc.entry((index.site_name(id), "scope")).or_default();
            e.durations.merge(&d);
        }
        let mut rows: Vec<KernelRow> =
            acc.into_iter()
                .map(|((kernel, from), mut a)| {
                    *approximate |= a.durations.approximate();
                    let geometry =
                        a.geometry.iter().max_by_key(|(g, n)| (**n, std::cmp::Reverse((*g).clone()))).map(|(g, _)| {
                            match a.geometry.len() - 1 {
                                0 => g.clone(),
                                more => format!("{g} (+{more} other)"),
                            }
                        });
                    KernelRow {
                        kernel,
                        from: from.to_owned(),
                        count: a.durations.len(),
                        total_ns: a.durations.total(),
                        p50_ns: a.durations.quantile(0.5),
                        p99_ns: a.durations.quantile(0.99),
                        geometry,
                    }
                })
                .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.kernel.cmp(&b.kernel)));
        rows
    }

    fn transfer_rows(&mut self, index: &Index<'_>) -> Vec<TransferRow> {
        let mut acc = std::mem::take(&mut self.transfers);
        let mut waiting = BTreeSet::new();
        for (id, x) in std::mem::take(&mut self.transfer_sites) {
            let direction = index.site(id).and_then(|s| s.direction).map(|d| d.as_str().to_owned());
            let key = (index.site_name(id), direction, None, None);
            if self.host_read_backs.contains(&id) {
                waiting.insert(key.clone());
            }
            add_transfer(&mut acc, key, x);
        }
        let mut rows: Vec<TransferRow> = acc
            .into_iter()
            .map(|(key, x)| {
                let bandwidth_bytes_per_s = if waiting.contains(&key) { None } else { table::rate(x.bytes, x.ns) };
                let link = x.link.efficiency(&self.links);
                let (transfer, direction, src_kind, dst_kind) = key;
                TransferRow {
                    transfer,
                    direction,
                    src_kind,
                    dst_kind,
                    count: x.count,
                    bytes: x.bytes,
                    total_ns: x.ns,
                    bandwidth_bytes_per_s,
                    link_efficiency: link.map(|l| l.0),
                    link_peak_bytes_per_s: link.map(|l| l.1),
                    bracketed: x.bracketed,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.transfer.cmp(&b.transfer)));
        rows
    }

    fn launch_bound(&mut self, index: &Index<'_>, approximate: &mut bool) -> Vec<LaunchBound> {
        let mut out: Vec<LaunchBound> = std::mem::take(&mut self.launch)
            .into_iter()
            .filter_map(|(id, (mut gpu, mut host))| {
                *approximate |= gpu.approximate() || host.approximate();
                let (g, h) = (gpu.quantile(0.5)?, host.quantile(0.5)?);
                (g < h).then(|| LaunchBound {
                    site: index.site_name(id),
                    recorded: gpu.len(),
                    gpu_p50_ns: g,
                    host_p50_ns: h,
                })
            })
            .collect();
        // The largest shortfall first: where batching would gain most.
        out.sort_by_key(|l| std::cmp::Reverse(l.host_p50_ns - l.gpu_p50_ns));
        out
    }

    /// Pageable host memory in copies: the driver stages it through a pinned buffer, which is
    /// slower and makes "async" copies synchronous.
    fn transfer_findings(&self) -> Vec<Finding> {
        let acc = &self.copies;
        let mut out = Vec::new();
        for ((direction, pageable), (count, bytes, ns)) in acc {
            if !pageable {
                continue;
            }
            let mut message =
                format!("{count} {direction} copies from or to pageable host memory moved {}", table::bytes(*bytes));
            if let Some(bw) = table::rate(*bytes, *ns) {
                let _ = write!(message, " at {}", table::bandwidth(bw));
            }
            if let Some((_, pinned_bytes, pinned_ns)) = acc.get(&(direction.clone(), false)) {
                if let Some(bw) = table::rate(*pinned_bytes, *pinned_ns) {
                    let _ = write!(message, "; pinned copies in this capture ran at {}", table::bandwidth(bw));
                }
            }
            message.push_str(
                ": pin the host buffer (cudaHostAlloc / cudaHostRegister) for full bandwidth and truly asynchronous copies",
            );
            out.push(Finding { kind: "pageable_copy".into(), message });
        }
        out
    }
}

/// How table cells are written: for people (units chosen per value, bounds marked) or raw for
/// scripts (`--format csv`: nanoseconds, bytes, bytes per second, with the unit in the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    pub raw: bool,
}

impl Units {
    fn head(self, name: &str, unit: &str) -> String {
        if self.raw && !unit.is_empty() {
            format!("{name} ({unit})")
        } else {
            name.to_owned()
        }
    }

    fn ns(self, ns: u64) -> String {
        if self.raw {
            ns.to_string()
        } else {
            table::duration(ns)
        }
    }

    fn opt_ns(self, ns: Option<u64>) -> String {
        ns.map_or_else(|| "-".into(), |n| self.ns(n))
    }

    fn bytes(self, b: u64) -> String {
        if self.raw {
            b.to_string()
        } else {
            table::bytes(b)
        }
    }

    fn rate(self, r: Option<f64>) -> String {
        match r {
            None => "-".into(),
            Some(r) if self.raw => format!("{r:.0}"),
            Some(r) => table::bandwidth(r),
        }
    }

    /// A fraction of a peak: a percentage for people, the fraction for scripts.
    fn efficiency(self, e: Option<f64>) -> String {
        match e {
            None => "-".into(),
            Some(e) if self.raw => format!("{e:.6}"),
            Some(e) => format!("{:.1} %", e * 100.0),
        }
    }

    /// A bound marker (`≤ `, `≥ `) where it applies, for people only: raw cells stay numbers
    /// (the JSON says which rows are bounds).
    fn bound(self, on: bool, mark: &str) -> &str {
        if on && !self.raw {
            mark
        } else {
            ""
        }
    }
}

impl Report {
    pub fn sites_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "site".into(),
            "kind".into(),
            "source".into(),
            "recorded".into(),
            "all calls".into(),
            u.head("total", "ns"),
            u.head("mean", "ns"),
            u.head("p50", "ns"),
            u.head("p99", "ns"),
            u.head("host", "ns"),
            u.head("bytes", "B"),
            u.head("bandwidth", "B/s"),
            "errors".into(),
        ];
        for s in &self.sites {
            let bound = u.bound(s.bracketed, "≤ ");
            let d = |ns: Option<u64>| ns.map_or_else(|| "-".into(), |n| format!("{bound}{}", u.ns(n)));
            t.row(vec![
                s.site.clone(),
                format!("{}/{}", s.kind, s.backend),
                source_cell(s),
                s.recorded.to_string(),
                s.calls.map_or_else(|| "-".into(), |c| c.to_string()),
                d(Some(s.total_ns)),
                d(s.mean_ns),
                d(s.p50_ns),
                d(s.p99_ns),
                u.ns(s.host_total_ns),
                if s.bytes > 0 { u.bytes(s.bytes) } else { "-".into() },
                // A bracketed duration is an upper bound: its bandwidth would be a guess.
                if s.bracketed { "-".into() } else { u.rate(s.bandwidth_bytes_per_s) },
                s.errors.to_string(),
            ]);
        }
        t
    }

    pub fn kernels_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "kernel".into(),
            "from".into(),
            "count".into(),
            u.head("total", "ns"),
            u.head("p50", "ns"),
            u.head("p99", "ns"),
            "geometry".into(),
        ];
        for k in &self.kernels {
            t.row(vec![
                k.kernel.clone(),
                k.from.clone(),
                k.count.to_string(),
                u.ns(k.total_ns),
                u.opt_ns(k.p50_ns),
                u.opt_ns(k.p99_ns),
                k.geometry.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        t
    }

    pub fn transfers_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "transfer".into(),
            "direction".into(),
            "memory".into(),
            "count".into(),
            u.head("bytes", "B"),
            u.head("total", "ns"),
            u.head("bandwidth", "B/s"),
            u.head("link efficiency", "fraction of peak"),
        ];
        for x in &self.transfers {
            let memory = match (&x.src_kind, &x.dst_kind) {
                (Some(s), Some(d)) => format!("{s} → {d}"),
                _ => "-".into(),
            };
            t.row(vec![
                x.transfer.clone(),
                x.direction.clone().unwrap_or_else(|| "-".into()),
                memory,
                x.count.to_string(),
                u.bytes(x.bytes),
                format!("{}{}", u.bound(x.bracketed, "≤ "), u.ns(x.total_ns)),
                format!("{}{}", u.bound(x.bracketed, "≥ "), u.rate(x.bandwidth_bytes_per_s)),
                u.efficiency(x.link_efficiency),
            ]);
        }
        t
    }

    pub fn devices_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header =
            vec!["device".into(), u.head("window", "ns"), u.head("busy", "ns"), u.head("idle", "ns"), "busy %".into()];
        for d in &self.devices {
            t.row(vec![
                d.device.clone(),
                u.ns(d.window_ns),
                u.ns(d.busy_ns),
                u.ns(d.idle_ns),
                format!("{:.1}", d.busy_percent),
            ]);
        }
        t
    }

    pub fn idle_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "device".into(),
            "launching thread".into(),
            "host was in".into(),
            u.head("idle", "ns"),
            "% of idle".into(),
            "gaps".into(),
        ];
        for d in &self.devices {
            for s in &d.shares {
                t.row(vec![
                    d.device.clone(),
                    s.thread.clone(),
                    s.holder().to_owned(),
                    u.ns(s.idle_ns),
                    format!("{:.1}", idle::percent(s.idle_ns, d.idle_ns)),
                    s.gaps.to_string(),
                ]);
            }
        }
        t
    }

    pub fn requests_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "span".into(),
            "requests".into(),
            "calls".into(),
            u.head("GPU total", "ns"),
            u.head("mean", "ns"),
            u.head("p50", "ns"),
            u.head("p99", "ns"),
            u.head("max", "ns"),
        ];
        for r in &self.requests {
            let bound = u.bound(r.bracketed, "≤ ");
            let d = |ns: Option<u64>| ns.map_or_else(|| "-".into(), |n| format!("{bound}{}", u.ns(n)));
            t.row(vec![
                r.span.clone(),
                r.requests.to_string(),
                r.records.to_string(),
                d(Some(r.total_ns)),
                d(r.mean_ns),
                d(r.p50_ns),
                d(r.p99_ns),
                d(r.max_ns),
            ]);
        }
        t
    }

    pub fn spans_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "span".into(),
            "recorded".into(),
            "all calls".into(),
            u.head("GPU self", "ns"),
            u.head("GPU inclusive", "ns"),
            u.head("self p50", "ns"),
            u.head("self p99", "ns"),
            u.head("inclusive p50", "ns"),
            u.head("inclusive p99", "ns"),
        ];
        for s in &self.spans {
            let bound = u.bound(s.bracketed, "≤ ");
            let d = |ns: Option<u64>| ns.map_or_else(|| "-".into(), |n| format!("{bound}{}", u.ns(n)));
            t.row(vec![
                s.span.clone(),
                s.recorded.to_string(),
                s.calls.map_or_else(|| "-".into(), |c| c.to_string()),
                d(Some(s.self_ns)),
                d(Some(s.inclusive_ns)),
                d(s.self_p50_ns),
                d(s.self_p99_ns),
                d(s.inclusive_p50_ns),
                d(s.inclusive_p99_ns),
            ]);
        }
        t
    }

    pub fn readings_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "device".into(),
            "samples".into(),
            "util % mean/max".into(),
            u.head("memory used max", "B"),
            "power W mean/max".into(),
            "SM MHz max".into(),
            u.head("PCIe rx mean", "B/s"),
            u.head("PCIe tx mean", "B/s"),
        ];
        let pair = |v: Option<(f64, f64)>| v.map_or_else(|| "-".into(), |(m, x)| format!("{m:.0}/{x:.0}"));
        for d in &self.readings {
            t.row(vec![
                d.device.clone(),
                d.samples.to_string(),
                pair(d.gpu_utilization_pct),
                d.memory_used_bytes.map_or_else(|| "-".into(), |(_, x)| u.bytes(x as u64)),
                pair(d.power_w),
                d.sm_clock_mhz.map_or_else(|| "-".into(), |(_, x)| format!("{x:.0}")),
                u.rate(d.pcie_rx_bytes_per_s.map(|p| p.0)),
                u.rate(d.pcie_tx_bytes_per_s.map(|p| p.0)),
            ]);
        }
        t
    }

    pub fn launch_bound_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec!["site".into(), "recorded".into(), u.head("GPU p50", "ns"), u.head("host p50", "ns")];
        for l in &self.launch_bound {
            t.row(vec![l.site.clone(), l.recorded.to_string(), u.ns(l.gpu_p50_ns), u.ns(l.host_p50_ns)]);
        }
        t
    }

    pub fn findings_table(&self) -> Table {
        let mut t = Table::new(&["kind", "finding"]);
        for f in &self.findings {
            t.row(vec![f.kind.clone(), f.message.clone()]);
        }
        t
    }

    /// The table `--format csv --table NAME` prints, raw numbers.
    pub fn table(&self, name: CsvTable) -> Table {
        let u = Units { raw: true };
        match name {
            CsvTable::Sites => self.sites_table(u),
            CsvTable::Kernels => self.kernels_table(u),
            CsvTable::Transfers => self.transfers_table(u),
            CsvTable::Devices => self.devices_table(u),
            CsvTable::Idle => self.idle_table(u),
            CsvTable::Requests => self.requests_table(u),
            CsvTable::Spans => self.spans_table(u),
            CsvTable::Readings => self.readings_table(u),
            CsvTable::LaunchBound => self.launch_bound_table(u),
            CsvTable::Findings => self.findings_table(),
        }
    }

    /// The text report.
    pub fn to_text(&self) -> String {
        let c = &self.capture;
        let mut out = String::new();
        let host = c.hostname.as_deref().map(|h| format!(" on {h}")).unwrap_or_default();
        let sampling = if c.trace_all {
            "every call recorded".to_owned()
        } else {
            format!("calls of {} µs or more recorded", c.threshold_us)
        };
        let _ = writeln!(
            out,
            "gpuspan report: {} (pid {}){host}, {} recorded calls over {}; {sampling}{}",
            c.program,
            c.pid,
            c.records,
            table::duration(c.duration_ns),
            if c.complete { "" } else { " (incomplete capture)" }
        );
        let people = Units { raw: false };
        let mut section = |title: &str, t: Table, empty: &str| {
            let _ = writeln!(out, "\n{title}");
            if t.rows.is_empty() {
                let _ = writeln!(out, "  {empty}");
            } else {
                out.push_str(&t.to_text());
            }
        };
        section(
            "Sites (figures over recorded calls; \"all calls\" counts every call; ≤: upper bound)",
            self.sites_table(people),
            "no annotated function was called",
        );
        section("Kernels", self.kernels_table(people), "no kernel was recorded");
        section(
            "Transfers (≤ / ≥: bounds from queue brackets; link efficiency: bandwidth / the PCIe link's peak, for copies between host and device the GPU reported)",
            self.transfers_table(people),
            "no transfer was recorded",
        );
        section(
            "Devices (busy: union of exact GPU work from the first to the last; brackets, being bounds, are not counted)",
            self.devices_table(people),
            "no GPU work was recorded",
        );
        section(
            "GPU idle time, by what the thread that launched the next work was doing",
            self.idle_table(people),
            "no idle time between recorded GPU work",
        );
        section(
            "GPU cost per request (GPU time of the recorded calls under each application span, by span name; p50/p99 of one instance; ≤: upper bound)",
            self.requests_table(people),
            "no recorded call was made inside an application span",
        );
        if !self.spans.is_empty() {
            section(
                "Selected spans (GPU self: work launched while it was the innermost selected span entered; inclusive: with the spans and calls inside it; p50/p99 of one instance; ≤: upper bound)",
                self.spans_table(people),
                "",
            );
        }
        if !self.readings.is_empty() {
            section("Device readings (the device monitor's samples over the run)", self.readings_table(people), "");
        }
        section(
            "Launch-bound kernel sites (median GPU time per call below the call's host time)",
            self.launch_bound_table(people),
            "none",
        );
        let _ = writeln!(out, "\nFindings");
        if self.findings.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for f in &self.findings {
            let _ = writeln!(out, "  - {}", f.message);
        }
        if !self.still_running.is_empty() {
            let _ = writeln!(
                out,
                "\nStill running at shutdown (no call had finished; its time is not counted): {}",
                self.still_running.join(", ")
            );
        }
        if !self.never_reached.is_empty() {
            let _ = writeln!(out, "\nNever reached: {}", self.never_reached.join(", "));
        }
        if !self.losses.is_empty() {
            let _ = writeln!(out, "\nLost");
            for (what, n) in &self.losses {
                let _ = writeln!(out, "  {n} {what}");
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nThe run said");
            for n in &self.notes {
                let _ = writeln!(out, "  {n}");
            }
        }
        let _ = writeln!(out, "\nNot in this capture");
        for l in &self.limits {
            let _ = writeln!(out, "  {l}");
        }
        crate::table::shown_text(&out).into_owned()
    }
}

/// The tables `--format csv` can print, one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CsvTable {
    Sites,
    Kernels,
    Transfers,
    Devices,
    Idle,
    Requests,
    Spans,
    Readings,
    LaunchBound,
    Findings,
}
