//! The summary table printed at shutdown: one row per site with every call counted, the sites
//! never reached, and everything that was lost or could not be done.

use super::format;
use crate::record::TimingSource;
use crate::site::{Site, SiteKind};
use std::fmt;

pub(crate) mod row;
pub use row::SiteSummary;

/// A snapshot of everything gpuspan measured so far. Printing it shows what it holds: nothing
/// is read at printing time.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Summary {
    /// Sites that were called, most total time first.
    pub reached: Vec<SiteSummary>,
    /// Sites compiled into the program but never called.
    pub never_reached: Vec<&'static Site>,
    /// Sites called, none of whose calls had finished when the summary was taken (an annotated
    /// `main` whose `init()` guard drops inside it).
    pub still_running: Vec<&'static Site>,
    /// gpuspan was off at run time (`GPUSPAN=off` or `set_enabled(false)`): nothing was recorded.
    pub off: bool,
    /// Measurements lost, by cause.
    pub losses: Vec<(&'static str, u64)>,
    /// The causality check of GPU placements, per timing source that produced records.
    pub trust: Vec<crate::Trust>,
    /// Everything gpuspan said once (missing GPU features, fallbacks).
    pub notes: Vec<String>,
    /// What the leaves (the device monitor) add after the sites, taken with the rest.
    sections: Vec<String>,
}

/// Takes a snapshot of every site's aggregates. Empty without the `enabled` feature: nothing was
/// measured (it still prints, as a table with no rows).
pub fn summary() -> Summary {
    #[cfg(feature = "enabled")]
    return {
        let mut reached = Vec::new();
        let mut never_reached = Vec::new();
        let mut still_running = Vec::new();
        for site in crate::sites::all_sites() {
            let s = SiteSummary::of(site);
            if s.calls == 0 {
                if site.was_entered() {
                    still_running.push(site);
                } else if !site.desc.module_path.starts_with("gpuspan::") {
                    // gpuspan's own sites (CUDA's `unattributed`) are not the user's to reach.
                    never_reached.push(site);
                }
            } else {
                reached.push(s);
            }
        }
        reached.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.site.desc.name.cmp(b.site.desc.name)));
        crate::span_scopes::say_if_layer_missing();
        crate::span_scopes::say_unselected_spans();
        Summary {
            sections: crate::hooks::leaves().summary_sections(&reached),
            reached,
            never_reached,
            still_running,
            off: !crate::switch::is_on(),
            losses: crate::diagnostics::losses().snapshot(),
            trust: crate::collector::collector().checks.report(),
            notes: crate::diagnostics::notes(),
        }
    };
    // Nothing measured, nothing said.
    #[cfg(not(feature = "enabled"))]
    Summary {
        reached: Vec::new(),
        never_reached: Vec::new(),
        still_running: Vec::new(),
        off: false,
        losses: Vec::new(),
        trust: Vec::new(),
        notes: Vec::new(),
        sections: Vec::new(),
    }
}

impl Summary {
    /// The row of the site with this display name, if it was reached.
    pub fn site(&self, name: &str) -> Option<&SiteSummary> {
        self.reached.iter().find(|s| s.site.desc.name == name)
    }
}

impl Summary {
    /// A site's name as the table shows it: with its place where another site compiled in has
    /// the same name (two types' `copy` methods: `copy (buffer.rs:40)`), as `gpuspan report`
    /// shows it (`cli/src/analysis.rs`, `shared_names`).
    fn label(&self, site: &Site) -> String {
        let d = &site.desc;
        let all = self.reached.iter().map(|s| s.site).chain(self.never_reached.iter().copied());
        let shared = all
            .chain(self.still_running.iter().copied())
            .any(|o| o.desc.name == d.name && (o.desc.file, o.desc.line) != (d.file, d.line));
        if shared {
            let file = d.file.rsplit(['/', '\\']).next().unwrap_or(d.file);
            format!("{} ({file}:{})", d.name, d.line)
        } else {
            d.name.to_owned()
        }
    }
}

/// Said under a table with span rows: a span's time is inclusive.
const SPANS_NEST: &str = "spans nest: a span row's time holds the spans and calls made inside it where it is a bracket (≤), so the rows do not add up; `gpuspan report` splits each span's self and inclusive time";

/// "  name (kind at file:line)": a site the table has no row for.
fn site_line(f: &mut fmt::Formatter<'_>, s: &Site) -> fmt::Result {
    writeln!(f, "  {} ({} at {}:{})", format::name(s.desc.name), s.kind_label(), s.desc.file, s.desc.line)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header =
            ["site", "kind", "calls", "time", "mean", "p50", "p99", "max", "bytes", "bandwidth", "host", "source"];
        let rows: Vec<[String; 12]> = self
            .reached
            .iter()
            .map(|s| {
                let errors = if s.errors > 0 { format!(" ({} err)", s.errors) } else { String::new() };
                let mut sources = s
                    .sources
                    .iter()
                    .map(|x| match (x, s.site.host_reason()) {
                        (TimingSource::Host, Some(why)) => format!("host ({why})"),
                        (TimingSource::GpuPasses, _) => "gpu_passes (first pass start to last pass end)".to_owned(),
                        _ => x.as_str().to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("+");
                if let Some(how) = s.attributed.filter(|a| *a != crate::record::Attributed::Thread) {
                    sources.push_str(&format!(" (attributed by {})", how.as_str()));
                }
                if s.bracket_at_exit {
                    sources.push_str(" (bracket to exit: upper bound, holds host work)");
                } else if s.bracketed {
                    sources.push_str(" (bracket to last submit: upper bound)");
                }
                let is_transfer = s.site.desc.kind == SiteKind::Transfer;
                // A bracket times the submissions and whatever the GPU waited on between them:
                // its durations are bounds, shown as such (and give no bandwidth).
                let bound = if s.bracketed { "≤ " } else { "" };
                let time = |ns: u64| format!("{bound}{}", format::duration(ns));
                let bandwidth = s.bandwidth_bytes_per_s();
                [
                    format::name(&self.label(s.site)),
                    format!("{}/{}", s.site.kind_label(), s.backend_label()),
                    format!("{}{errors}", s.calls),
                    time(s.total_ns),
                    time(s.total_ns / s.calls.max(1)),
                    time(s.p50_ns),
                    time(s.p99_ns),
                    time(s.max_ns),
                    if is_transfer { format::bytes(s.bytes) } else { "-".into() },
                    bandwidth.map_or_else(|| "-".into(), format::bandwidth),
                    format::duration(s.host_total_ns),
                    sources,
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        if self.off && self.reached.is_empty() {
            return writeln!(f, "gpuspan was off (GPUSPAN=off or gpuspan::set_enabled(false)): nothing was recorded");
        }
        writeln!(f, "gpuspan summary (time = GPU time where the source says so, else host time)")?;
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
                let pad = w - c.chars().count();
                if i < 2 || i == cells.len() - 1 {
                    write!(f, "{c}{}", " ".repeat(pad))?;
                } else {
                    write!(f, "{}{c}", " ".repeat(pad))?;
                }
                if i + 1 < cells.len() {
                    write!(f, "  ")?;
                }
            }
            writeln!(f)
        };
        line(f, &header.map(str::to_owned))?;
        for r in &rows {
            line(f, r)?;
        }
        // Selected spans hold what was made inside them (a bracket is inclusive): their rows and
        // those of the calls and spans within them are not to be added up (docs/spans.md).
        if self.reached.len() > 1 && self.reached.iter().any(|s| s.site.is_span()) {
            writeln!(f, "{SPANS_NEST}")?;
        }
        if rows.is_empty() && self.still_running.is_empty() {
            writeln!(f, "(no annotated function was called)")?;
        }
        if self.off {
            writeln!(f, "gpuspan was switched off during the run: later calls were not recorded")?;
        }
        if !self.still_running.is_empty() {
            writeln!(f, "still running at shutdown (no call had finished; its time is not counted):")?;
            for s in &self.still_running {
                site_line(f, s)?;
            }
        }
        let tracked: Vec<&SiteSummary> = self
            .reached
            .iter()
            .filter(|s| s.device_delta_max_bytes.is_some() || s.rss_delta_max_bytes.is_some())
            .collect();
        if !tracked.is_empty() {
            writeln!(f, "memory per call (track_memory), largest growth over one call:")?;
            let signed = |d: Option<i64>| match d {
                Some(d) if d < 0 => format!("-{}", format::bytes(d.unsigned_abs())),
                Some(d) => format!("+{}", format::bytes(d as u64)),
                None => "n/a".into(),
            };
            for s in tracked {
                writeln!(
                    f,
                    "  {}: device {}, process RSS {}",
                    format::name(&self.label(s.site)),
                    signed(s.device_delta_max_bytes),
                    signed(s.rss_delta_max_bytes)
                )?;
            }
        }
        if !self.never_reached.is_empty() && !self.off {
            writeln!(f, "never reached:")?;
            for s in &self.never_reached {
                site_line(f, s)?;
            }
        }
        for l in &self.sections {
            writeln!(f, "{l}")?;
        }
        for t in &self.trust {
            writeln!(f, "{}", t.line())?;
        }
        for (what, n) in &self.losses {
            writeln!(f, "lost: {n} {what}")?;
        }
        for n in &self.notes {
            writeln!(f, "note: {}", format::escaped(n))?;
        }
        Ok(())
    }
}
