//! `gpuspan ranks --step NAME`: the ranks of one job step by step. A step is an instance of an
//! annotated site named NAME (each call) or of an application `tracing` span named NAME (from
//! the first call made in it to the last one's end): a training iteration, a batch. The k-th step
//! of every rank is the k-th instance in time order, so the ranks' steps are compared as the
//! iterations of one job, without comparing the hosts' clocks. A step lasts until its GPU work
//! ends where that is later than its host end (launches are asynchronous).
//!
//! Within a step, a rank's GPU work (the same intervals `gpuspan ranks` totals: CUPTI's kernels
//! and copies, else a call's GPU interval) is split into compute and collectives; their unions
//! are clipped to the step, and the overlap is the time both ran at once (communication hidden
//! behind compute). The straggler of a step is the rank with the most compute, 5 % above the
//! others' median, as for the whole run (decision 47).

use crate::analysis::{self, Index};
use crate::ranks::{median, STRAGGLER_PCT};
use crate::stats::Samples;
use crate::table::{self, Table};
use gpuspan_capture::{Capture, Interval};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// One rank's share of one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankStep {
    /// The step's host time on this rank.
    pub step_ns: u64,
    /// Union of the rank's compute inside the step.
    pub compute_ns: u64,
    /// Union of its collectives inside the step.
    pub collective_ns: u64,
    /// Time compute and collectives ran at once.
    pub overlap_ns: u64,
}

/// The k-th step across the ranks (in rank order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRow {
    pub step: usize,
    pub per_rank: Vec<RankStep>,
    /// The rank the others waited for in this step, if one stands out.
    pub straggler: Option<usize>,
}

/// Per rank, over its steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankSteps {
    pub rank: usize,
    /// Instances of the step this rank has (ranks may differ: only the first `steps` of each
    /// are compared).
    pub instances: usize,
    pub median_step_ns: u64,
    pub p90_step_ns: u64,
    /// Steps in which this rank was the straggler.
    pub straggler_in: usize,
}

/// The job step by step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steps {
    pub name: String,
    /// Whether NAME named a site (each call a step) or an application span.
    pub of: &'static str,
    pub rows: Vec<StepRow>,
    pub ranks: Vec<RankSteps>,
}

/// Where a call's work lies: from its host start to the later of its host end and the end of
/// its GPU work (launches are asynchronous: a step's kernels may run after its call returned).
fn extent(r: &gpuspan_capture::Record) -> Interval {
    let gpu_end = r.gpu.as_ref().map_or(0, |g| g.interval.end_ns);
    let work_end = r.activities.iter().map(|a| a.interval.end_ns).max().unwrap_or(0);
    Interval { start_ns: r.host.start_ns, end_ns: r.host.end_ns.max(gpu_end).max(work_end) }
}

/// The instances of `name` in `c`, in start order: the calls of a site so named, else the
/// application spans so named, each from its first call's start to its last call's end (each
/// call's end being that of its GPU work where later: [`extent`]).
fn instances(c: &Capture, name: &str) -> (Vec<Interval>, &'static str) {
    let index = Index::new(c);
    let mut calls: Vec<Interval> =
        c.records.iter().filter(|r| index.site(r.site).is_some_and(|s| s.name == name)).map(extent).collect();
    if !calls.is_empty() {
        calls.sort_by_key(|i| (i.start_ns, i.end_ns));
        return (calls, "site");
    }
    let named: BTreeSet<u64> = c.spans.iter().filter(|s| s.name == name).map(|s| s.id).collect();
    let parent = |id: u64| c.spans.iter().find(|s| s.id == id).and_then(|s| s.parent);
    let mut spans: std::collections::BTreeMap<u64, Interval> = std::collections::BTreeMap::new();
    for r in &c.records {
        // The innermost enclosing span so named (a step inside a step counts as the inner one).
        let mut at = r.span;
        let mut hops = 0;
        while let Some(id) = at {
            if named.contains(&id) {
                let x = extent(r);
                let e = spans.entry(id).or_insert(x);
                e.start_ns = e.start_ns.min(x.start_ns);
                e.end_ns = e.end_ns.max(x.end_ns);
                break;
            }
            hops += 1;
            // A chain is short; a cycle in a damaged capture must not loop.
            at = if hops > c.spans.len() { None } else { parent(id) };
        }
    }
    let mut out: Vec<Interval> = spans.into_values().collect();
    out.sort_by_key(|i| (i.start_ns, i.end_ns));
    (out, "span")
}

/// Length of the part of `union` (sorted, disjoint) inside `within`.
fn clipped(union: &[Interval], within: Interval) -> u64 {
    union.iter().map(|i| i.end_ns.min(within.end_ns).saturating_sub(i.start_ns.max(within.start_ns))).sum()
}

/// Length of the intersection of two sorted, disjoint unions inside `within`.
fn overlap(a: &[Interval], b: &[Interval], within: Interval) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let start = a[i].start_ns.max(b[j].start_ns).max(within.start_ns);
        let end = a[i].end_ns.min(b[j].end_ns).min(within.end_ns);
        total += end.saturating_sub(start);
        if a[i].end_ns < b[j].end_ns {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// The straggler among one step's ranks: the most compute, `STRAGGLER_PCT` above the others'
/// median.
fn straggler(per_rank: &[RankStep], numbers: &[usize]) -> Option<usize> {
    if per_rank.len() < 2 {
        return None;
    }
    let (slow, most) = per_rank.iter().enumerate().max_by_key(|(_, s)| s.compute_ns)?;
    let usual = median(per_rank.iter().enumerate().filter(|(i, _)| *i != slow).map(|(_, s)| s.compute_ns).collect());
    let excess = if usual > 0 { (most.compute_ns as f64 / usual as f64 - 1.0) * 100.0 } else { f64::INFINITY };
    (most.compute_ns > 0 && excess >= STRAGGLER_PCT).then(|| numbers[slow])
}

/// The steps of `captures` (in rank order, with their rank numbers), `collectives` being the
/// sites whose calls are collectives.
pub fn compare(captures: &[(usize, &Capture)], collectives: &[String], name: &str) -> Steps {
    let collectives: BTreeSet<&str> = collectives.iter().map(String::as_str).collect();
    let mut of = "site";
    let mut per_rank = Vec::new();
    for (_, c) in captures {
        let index = Index::new(c);
        let (mut compute, mut collective) = (Vec::new(), Vec::new());
        for w in analysis::work(c) {
            let site = index.site_name(c.records[w.record].site);
            if collectives.contains(site.as_str()) { &mut collective } else { &mut compute }.push(w.interval);
        }
        let (steps, kind) = instances(c, name);
        if !steps.is_empty() {
            of = kind;
        }
        per_rank.push((steps, analysis::union(compute), analysis::union(collective)));
    }
    let numbers: Vec<usize> = captures.iter().map(|(n, _)| *n).collect();
    let aligned = per_rank.iter().map(|(s, ..)| s.len()).min().unwrap_or(0);
    let rows: Vec<StepRow> = (0..aligned)
        .map(|k| {
            let cells: Vec<RankStep> = per_rank
                .iter()
                .map(|(steps, compute, collective)| {
                    let s = steps[k];
                    RankStep {
                        step_ns: s.duration_ns(),
                        compute_ns: clipped(compute, s),
                        collective_ns: clipped(collective, s),
                        overlap_ns: overlap(compute, collective, s),
                    }
                })
                .collect();
            StepRow { step: k, straggler: straggler(&cells, &numbers), per_rank: cells }
        })
        .collect();
    let ranks = per_rank
        .iter()
        .enumerate()
        .map(|(i, (steps, ..))| {
            let mut durations = Samples::default();
            for s in &steps[..aligned] {
                durations.push(s.duration_ns());
            }
            RankSteps {
                rank: numbers[i],
                instances: steps.len(),
                median_step_ns: durations.quantile(0.5).unwrap_or(0),
                p90_step_ns: durations.quantile(0.9).unwrap_or(0),
                straggler_in: rows.iter().filter(|r| r.straggler == Some(numbers[i])).count(),
            }
        })
        .collect();
    Steps { name: name.to_owned(), of, rows, ranks }
}

impl Steps {
    /// Per-rank summary, then one row per step, as text.
    pub fn to_text(&self) -> String {
        let d = table::duration;
        let mut out = String::new();
        let aligned = self.rows.len();
        let _ = writeln!(
            out,
            "\nSteps: `{}` ({}), {aligned} aligned by order across the ranks (GPU time inside each step)",
            self.name,
            if self.of == "site" { "each call of the site" } else { "each instance of the span" }
        );
        if aligned == 0 {
            let _ = writeln!(
                out,
                "no rank has an instance of `{}`: name an annotated site or an application span",
                self.name
            );
            return out;
        }
        let mut t = Table::new(&["rank", "instances", "median step", "p90 step", "straggler in"]);
        for r in &self.ranks {
            t.row(vec![
                r.rank.to_string(),
                r.instances.to_string(),
                d(r.median_step_ns),
                d(r.p90_step_ns),
                format!("{} of {aligned}", r.straggler_in),
            ]);
        }
        out.push_str(&t.to_text());
        let mut header = vec!["step".to_owned()];
        header.extend(self.ranks.iter().map(|r| format!("rank {}: step / compute / collective / overlap", r.rank)));
        header.push("straggler".into());
        let mut t = Table { header, rows: Vec::new() };
        for row in &self.rows {
            let mut cells = vec![row.step.to_string()];
            cells.extend(row.per_rank.iter().map(|s| {
                format!("{} / {} / {} / {}", d(s.step_ns), d(s.compute_ns), d(s.collective_ns), d(s.overlap_ns))
            }));
            cells.push(row.straggler.map_or_else(|| "-".to_owned(), |r| format!("rank {r}")));
            t.row(cells);
        }
        out.push('\n');
        out.push_str(&t.to_text());
        out
    }
}
