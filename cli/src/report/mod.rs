//! `gpuspan report`: per-site, per-kernel and per-transfer tables, device busy time, GPU idle
//! time attributed to the host, GPU cost per request (application span), the device monitor's
//! readings, launch-bound sites and transfer findings (pageable copies, low link efficiency:
//! [`crate::link`]).
//!
//! Every figure but the "all calls" columns is computed from the recorded (sampled) calls, so
//! it can be checked against the records; "all calls" comes from the runtime's aggregates of
//! every call.

//!
//! One module per section: its rows, what it accumulates per record, and its table.

mod devices;
mod findings;
mod kernels;
mod launch;
mod memory;
mod readings;
mod sites;
mod spans;
mod transfers;
mod units;

pub use findings::Finding;
pub use kernels::KernelRow;
pub use launch::LaunchBound;
pub use memory::MemoryRow;
pub use readings::ReadingsRow;
pub use sites::SiteRow;
pub use transfers::TransferRow;
pub use units::Units;

use crate::analysis::Index;
use crate::idle::{self, DeviceIdle};
use crate::link;
use crate::load::LoadError;
use crate::requests::{self, RequestRow};
use crate::span_time::{self, SpanRow};
use crate::stats;
use crate::table::{self, Table};
use gpuspan_capture::{Capture, Record, SiteKind};
use kernels::Kernels;
use launch::Launch;
use serde::Serialize;
use sites::Sites;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use transfers::Transfers;

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
    /// GPU memory of instrumented wgpu devices, logical sizes (capture format 9).
    pub memory: Vec<MemoryRow>,
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
    sites: Sites,
    kernels: Kernels,
    transfers: Transfers,
    launch: Launch,
    last_ns: Option<u64>,
    records: usize,
    idle: idle::Builder,
    requests: requests::Builder,
    span_time: span_time::Builder,
    links: link::Builder,
}

impl Builder {
    /// A site the records may name.
    pub fn site(&mut self, s: &gpuspan_capture::Site) {
        self.sites.site(s);
        self.requests.site(s);
        self.span_time.site(s);
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
        let kind = self.sites.kind(r.site);
        self.sites.record(r);
        let mut copies = false;
        for a in &r.activities {
            self.kernels.activity(a);
            copies |= self.transfers.activity(r, a, &mut self.links);
        }
        if kind == Some(SiteKind::Kernel) {
            // A bracket's GPU time is a bound, not the call's work: no evidence either way.
            if let Some(g) = r.gpu.as_ref().filter(|g| !g.bracketed()) {
                if r.activities.is_empty() {
                    self.kernels.scope(r.site, g.busy_ns);
                }
                self.launch.call(r.site, g.busy_ns, r.host.duration_ns());
            }
        }
        if !copies && kind == Some(SiteKind::Transfer) {
            self.transfers.site_call(r);
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
        let reached: BTreeSet<u32> = self.sites.recorded().chain(capture.aggregates.iter().map(|a| a.site)).collect();
        let mut approximate = false;
        let sites = self.sites.rows(capture, &index, &mut approximate);
        let launch_bound = self.launch.rows(&index, &mut approximate);
        let mut findings = self.transfers.pageable_findings();
        findings.extend(self.links.findings(&index));
        findings.extend(findings::of_sites(&sites, capture));
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
        let kernels = self.kernels.rows(&index, &mut approximate);
        let transfers = self.transfers.rows(&index, self.sites.host_read_backs(), &self.links);
        let devices = std::mem::take(&mut self.idle).finish(&index);
        let idle_again = devices.is_none();
        let devices = devices.unwrap_or_default();
        let (requests, approximate_requests) = std::mem::take(&mut self.requests).finish();
        approximate |= approximate_requests;
        let (spans, approximate_spans) =
            std::mem::take(&mut self.span_time).finish(|id| index.site_name(id), &capture.aggregates);
        approximate |= approximate_spans;
        let readings = readings::rows(capture, &index);
        let memory = memory::rows(capture, &index);
        findings.extend(memory::findings(&memory));
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
            memory,
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
}

impl Report {
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
            CsvTable::Memory => self.memory_table(u),
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
        if !self.memory.is_empty() {
            section(
                "GPU memory (wgpu, logical sizes: what the program asked for, not the driver's allocations; buffers and textures made through an instrumented device)",
                self.memory_table(people),
                "",
            );
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
    Memory,
    LaunchBound,
    Findings,
}
