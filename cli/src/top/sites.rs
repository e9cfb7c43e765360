//! The site table: columns, sorting, filtering, and the plain-text snapshot.

use super::device_panel::device_lines;
use crate::table::{self, Table};
use gpuspan_capture::live::{Site, Snapshot};

/// The columns of the site table, in order; the sortable ones are [`SortKey`]s.
pub const COLUMNS: [&str; 12] =
    ["SITE", "KIND", "CALLS/S", "GPU%", "SHARE", "P50", "P99", "BYTES/S", "BW", "ERR", "CALLS", "SOURCE"];

/// What the site table is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    Name,
    CallsPerS,
    Gpu,
    Share,
    P50,
    P99,
    BytesPerS,
    Errors,
    Calls,
}

impl SortKey {
    const ALL: [SortKey; 9] = [
        SortKey::Name,
        SortKey::CallsPerS,
        SortKey::Gpu,
        SortKey::Share,
        SortKey::P50,
        SortKey::P99,
        SortKey::BytesPerS,
        SortKey::Errors,
        SortKey::Calls,
    ];

    /// The column it sorts by.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Name => "SITE",
            SortKey::CallsPerS => "CALLS/S",
            SortKey::Gpu => "GPU%",
            SortKey::Share => "SHARE",
            SortKey::P50 => "P50",
            SortKey::P99 => "P99",
            SortKey::BytesPerS => "BYTES/S",
            SortKey::Errors => "ERR",
            SortKey::Calls => "CALLS",
        }
    }

    pub(super) fn next(self, step: isize) -> SortKey {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as isize;
        Self::ALL[(i + step).rem_euclid(Self::ALL.len() as isize) as usize]
    }

    /// Names ascend by default; numbers descend (the biggest first, as top does).
    fn descends(self) -> bool {
        self != SortKey::Name
    }

    fn value(self, s: &Site) -> f64 {
        let w = &s.window;
        let opt = |v: Option<f64>| v.unwrap_or(-1.0);
        match self {
            SortKey::Name => 0.0,
            SortKey::CallsPerS => w.calls_per_s,
            SortKey::Gpu => opt(w.gpu_busy),
            SortKey::Share => opt(w.gpu_share),
            SortKey::P50 => opt(w.p50_ns.map(|v| v as f64)),
            SortKey::P99 => opt(w.p99_ns.map(|v| v as f64)),
            SortKey::BytesPerS => w.bytes_per_s,
            SortKey::Errors => w.errors as f64,
            SortKey::Calls => s.calls as f64,
        }
    }
}

/// How the site table is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub sort: SortKey,
    /// Reversed from the key's natural order.
    pub reversed: bool,
    /// Only sites whose name or function contains this (case-insensitive).
    pub filter: String,
}

impl Default for View {
    fn default() -> Self {
        View { sort: SortKey::CallsPerS, reversed: false, filter: String::new() }
    }
}

impl View {
    /// The snapshot's sites this view shows, in its order.
    pub fn sites<'a>(&self, snapshot: &'a Snapshot) -> Vec<&'a Site> {
        let needle = self.filter.to_lowercase();
        let mut sites: Vec<&Site> = snapshot
            .sites
            .iter()
            .filter(|s| {
                needle.is_empty()
                    || s.name.to_lowercase().contains(&needle)
                    || s.function.to_lowercase().contains(&needle)
            })
            .collect();
        let key = self.sort;
        sites.sort_by(|a, b| {
            let order = if key == SortKey::Name {
                a.name.cmp(&b.name)
            } else {
                key.value(b).total_cmp(&key.value(a)).then_with(|| a.name.cmp(&b.name))
            };
            if self.reversed {
                order.reverse()
            } else {
                order
            }
        });
        sites
    }

    /// The header with the sort column marked (▼ biggest first, ▲ smallest first).
    pub fn header(&self) -> Vec<String> {
        let down = self.sort.descends() != self.reversed;
        COLUMNS
            .iter()
            .map(|c| {
                if *c == self.sort.column() {
                    format!("{c}{}", if down { "▼" } else { "▲" })
                } else {
                    (*c).to_owned()
                }
            })
            .collect()
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |f| format!("{:.1}", f * 100.0))
}

fn kind(s: &Site) -> &'static str {
    match (s.kind.as_str(), s.direction.as_deref()) {
        ("transfer", Some("cpu_to_gpu")) => "h→d",
        ("transfer", Some("gpu_to_cpu")) => "d→h",
        ("transfer", Some("gpu_to_gpu")) => "d→d",
        ("transfer", _) => "xfer",
        _ => "kernel",
    }
}

/// One site's cells, in [`COLUMNS`] order.
pub fn cells(s: &Site) -> Vec<String> {
    let w = &s.window;
    let opt_ns = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), table::duration);
    let rate = |v: f64| if v > 0.0 { table::bandwidth(v) } else { "-".to_owned() };
    let mut source = s.sources.join("+");
    if s.bracketed {
        source.push_str(" ≤");
    }
    vec![
        s.name.clone(),
        kind(s).to_owned(),
        format!("{:.1}", w.calls_per_s),
        percent(w.gpu_busy),
        percent(w.gpu_share),
        opt_ns(w.p50_ns),
        opt_ns(w.p99_ns),
        rate(w.bytes_per_s),
        w.bandwidth_bytes_per_s.map_or_else(|| "-".to_owned(), table::bandwidth),
        w.errors.to_string(),
        s.calls.to_string(),
        source,
    ]
}

/// The site table as text (`--once --format text`).
pub fn sites_table(snapshot: &Snapshot, view: &View) -> Table {
    let header = view.header();
    let mut t = Table { header, rows: Vec::new() };
    for s in view.sites(snapshot) {
        t.row(cells(s));
    }
    t
}

/// One snapshot as text (`--once --format text`): the process, its sites, its devices (the
/// panels' lines without colour), what was lost and said.
pub fn snapshot_text(s: &Snapshot, view: &View) -> String {
    let mut out = format!(
        "{} pid {} · window {:.1} s · {} site(s) · gpuspan {}{}\n",
        s.program,
        s.pid,
        s.window_s,
        s.sites.len(),
        s.writer,
        if s.off { " · GPUSPAN=off" } else { "" }
    );
    out.push_str(&sites_table(s, view).to_text());
    if s.devices.is_empty() {
        out.push_str(&format!("no device panels: {}\n", s.devices_note.as_deref().unwrap_or("no devices")));
    }
    for d in &s.devices {
        out.push_str(&format!("GPU {}: {}\n", d.index, d.name));
        for line in device_lines(d, 70) {
            let text: String = line.spans.iter().map(|span| span.content.as_ref()).collect();
            out.push_str(&format!("  {text}\n"));
        }
        let last: Vec<String> = d.utilization_history.iter().map(|p| format!("{:.0}", p.gpu_utilization_pct)).collect();
        out.push_str(&format!("  Util 60 s (%/s): {}\n", last.join(" ")));
    }
    for l in &s.losses {
        out.push_str(&format!("lost: {} {}\n", l.count, l.what));
    }
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    crate::table::shown_text(&out).into_owned()
}
