//! The sites table: one row per annotated function over its recorded calls, beside the
//! aggregates' count of every call.

use super::{Report, Units};
use crate::analysis::Index;
use crate::stats::Samples;
use crate::table::{self, Table};
use gpuspan_capture::{Backend, Bracket, Capture, Record, SiteKind, TimingSource};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteRow {
    pub site: String,
    pub kind: String,
    pub backend: String,
    /// Timing sources of the recorded calls.
    pub sources: Vec<String>,
    /// How the recorded calls' GPU work was found to be theirs, where that was a question
    /// (`thread`, `time`, `thread+time`, `ambiguous`; each that occurs; capture format 8).
    pub attributed: Vec<String>,
    /// Spans entered when its work was launched with no owner, with how many records each:
    /// the unrelated selected ones of `during several spans`, the unselected one of unowned
    /// work (capture format 8; decision 55).
    pub spans_at_launch: Vec<(String, u64)>,
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
/// (`gpuspan::wgpu::attach` timed it); a selected span's is the backend(s) that timed its
/// records (`host` where none did). The runtime's summary labels a site by the same rule
/// (`SiteSummary::backend_label`); `tests/tests/labels_agree/labels_agree.rs` holds the two together.
fn backend_label(declared: Backend, span: bool, sources: &[TimingSource]) -> String {
    let cuda = sources.iter().any(|s| matches!(s, TimingSource::Cupti | TimingSource::CudaEvent));
    let wgpu = sources.iter().any(|s| matches!(s, TimingSource::GpuTimestamp | TimingSource::GpuPasses));
    if span {
        let label = match (cuda, wgpu) {
            (true, true) => "wgpu+cuda",
            (true, false) => "cuda",
            (false, true) => "wgpu",
            (false, false) => "host",
        };
        return label.to_owned();
    }
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
    let mut cell = if ends.is_empty() { sources } else { format!("{sources} ({})", ends.join(", ")) };
    // By thread is the rule; other ways are said (the runtime's summary says them the same way).
    if s.attributed.iter().any(|a| a != "thread") {
        cell.push_str(&format!(" (attributed by {})", s.attributed.join(", ")));
    }
    cell
}

#[derive(Debug, Default)]
struct SiteAcc {
    recorded: u64,
    durations: Samples,
    total_ns: u64,
    bytes: u64,
    sources: Vec<TimingSource>,
    attributed: BTreeSet<&'static str>,
    spans_at_launch: BTreeMap<String, u64>,
    host_total_ns: u64,
    errors: u64,
    brackets: BTreeSet<Bracket>,
    clock_corrected: u64,
}

/// Each site's calls, fed one record at a time.
#[derive(Debug, Default)]
pub(super) struct Sites {
    kinds: HashMap<u32, SiteKind>,
    /// `gpu_to_cpu` transfer sites, and those of them with host-timed calls: a read-back timed
    /// on the host is mostly waiting for the GPU, so it gets no bandwidth.
    read_backs: BTreeSet<u32>,
    host_read_backs: BTreeSet<u32>,
    sites: BTreeMap<u32, SiteAcc>,
}

impl Sites {
    /// A site the records may name.
    pub(super) fn site(&mut self, s: &gpuspan_capture::Site) {
        self.kinds.insert(s.id, s.kind);
        if s.direction == Some(gpuspan_capture::Direction::GpuToCpu) {
            self.read_backs.insert(s.id);
        }
    }

    pub(super) fn kind(&self, id: u32) -> Option<SiteKind> {
        self.kinds.get(&id).copied()
    }

    /// Read-back sites with host-timed calls: no bandwidth for them (see `read_backs`).
    pub(super) fn host_read_backs(&self) -> &BTreeSet<u32> {
        &self.host_read_backs
    }

    /// The sites with recorded calls.
    pub(super) fn recorded(&self) -> impl Iterator<Item = u32> + '_ {
        self.sites.keys().copied()
    }

    pub(super) fn record(&mut self, r: &Record) {
        let d = r.duration_ns();
        let s = self.sites.entry(r.site).or_default();
        s.recorded += 1;
        s.durations.push(d);
        s.total_ns += d;
        s.bytes += r.bytes.unwrap_or(0);
        if !s.sources.contains(&r.source()) {
            s.sources.push(r.source());
        }
        if let Some(how) = r.attributed {
            s.attributed.insert(how.as_str());
        }
        if let Some(spans) = &r.spans_at_launch {
            *s.spans_at_launch.entry(spans.clone()).or_insert(0) += 1;
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
    }

    pub(super) fn rows(&mut self, capture: &Capture, index: &Index<'_>, approximate: &mut bool) -> Vec<SiteRow> {
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
                    backend: site.map_or_else(
                        || "?".to_owned(),
                        |site| backend_label(site.backend, site.kind == SiteKind::Span, &s.sources),
                    ),
                    sources: s.sources.iter().map(|s| s.as_str().to_owned()).collect(),
                    attributed: s.attributed.iter().map(|a| (*a).to_owned()).collect(),
                    spans_at_launch: {
                        let mut v: Vec<(String, u64)> = std::mem::take(&mut s.spans_at_launch).into_iter().collect();
                        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                        v
                    },
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
}
