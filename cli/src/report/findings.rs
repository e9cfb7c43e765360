//! The findings that are not a table's: what the report's figures are (bounds, samples, an
//! incomplete capture). The transfers' and links' findings are made beside their tables.

use super::sites::SiteRow;
use super::Report;
use crate::table::Table;
use gpuspan_capture::Capture;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `pageable_copy`, `low_link_efficiency`, `upper_bound`, `unowned_work`, `sampled`, `incomplete`.
    pub kind: String,
    pub message: String,
}

/// Findings about the sites' figures: queue brackets are upper bounds, unrecorded calls are
/// left out of the quantiles, and the capture may be incomplete.
pub(super) fn of_sites(sites: &[SiteRow], capture: &Capture) -> Vec<Finding> {
    let mut findings = Vec::new();
    for s in sites.iter().filter(|s| s.bracketed) {
        // A selected span is no function: its bracket ends when the span closes.
        let at_exit = match (s.bracket_ends.iter().any(|e| e == "exit"), s.kind == "span") {
            (false, _) => "",
            (true, false) => "; some brackets ended at the function's exit, not with its last submission, so they also hold the host's work after it (submissions in a callee, a closure or a macro are not seen)",
            (true, true) => "; some brackets ended when the span closed, not with its last submission, so they also hold the host's work after it",
        };
        findings.push(Finding {
            kind: "upper_bound".into(),
            message: format!(
                "{}: timed by timestamps around its queue submissions, so its GPU times are upper bounds (they include submission latency while the GPU idled){at_exit}",
                s.site
            ),
        });
    }
    // Work nobody owned names the unselected span entered at its launch: what to select.
    for s in sites.iter().filter(|s| !s.spans_at_launch.is_empty() && s.site != "during several spans") {
        let list: Vec<String> = s.spans_at_launch.iter().map(|(n, c)| format!("{n} ({c})")).collect();
        findings.push(Finding {
            kind: "unowned_work".into(),
            message: format!(
                "{}: launched outside every annotated call and selected span while these unselected spans were entered (records each): {}; select them (GPUSPAN_SPANS) to measure them",
                s.site,
                list.join("; ")
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
                capture.header.threshold_us,
                all - unrecorded
            ),
        });
    }
    if let Some(t) = &capture.truncation {
        findings.push(Finding { kind: "incomplete".into(), message: t.to_string() });
    }
    findings
}

impl Report {
    pub fn findings_table(&self) -> Table {
        let mut t = Table::new(&["kind", "finding"]);
        for f in &self.findings {
            t.row(vec![f.kind.clone(), f.message.clone()]);
        }
        t
    }
}
