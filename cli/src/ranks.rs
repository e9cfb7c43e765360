//! `gpuspan ranks`: the captures of one job's ranks side by side, and which rank the others wait
//! for.
//!
//! In a data-parallel job every rank computes, then all meet in a collective (an NCCL
//! all-reduce): the collective cannot finish before its last rank arrives, so the ranks that
//! finished their compute early spend the difference inside the collective's kernels, waiting.
//! A straggler shows as the rank with the most GPU compute and the least collective time. Per
//! rank this reads the GPU work of its calls as intervals (CUPTI's kernels and copies, else a
//! call's GPU interval) and takes their union, apart for the collective calls and the rest.
//!
//! A call is collective when its site is named with `--collective`, or when any of its site's
//! calls ran an NCCL or RCCL kernel (`nccl…`, `rccl…`, as CUPTI names them).

use crate::analysis::{self, Index};
use crate::table::{self, Table};
use gpuspan_capture::{ActivityKind, Capture, Interval};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Compute this much above the other ranks' median names a straggler.
pub const STRAGGLER_PCT: f64 = 5.0;

/// One rank's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rank {
    pub rank: usize,
    pub capture: String,
    pub program: String,
    pub pid: u32,
    pub calls: usize,
    /// First call's start to last call's end, on the host.
    pub span_ns: u64,
    /// Union of the GPU work of calls that are not collective.
    pub compute_ns: u64,
    /// Union of the GPU work of collective calls (their kernels wait for the slowest rank).
    pub collective_ns: u64,
}

/// One site across the ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteAcross {
    pub site: String,
    pub collective: bool,
    /// Per rank: calls, and their summed time (GPU where timed, else host); `None` where the
    /// rank has no call of it.
    pub per_rank: Vec<Option<(u64, u64)>>,
    /// The largest rank total over the smallest, among the ranks that called it.
    pub spread: f64,
    /// The rank with the largest total; `None` when all are equal.
    pub slowest_rank: Option<usize>,
}

/// The answer: ranks, sites, collective sites and what they say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranks {
    pub ranks: Vec<Rank>,
    pub sites: Vec<SiteAcross>,
    pub collectives: Vec<String>,
    pub findings: Vec<String>,
    /// Step by step, where `--step NAME` asked ([`with_steps`](Ranks::with_steps)).
    pub steps: Option<crate::steps::Steps>,
}

/// Rank numbers from the file names when each names a distinct `rank<N>` (the launcher's
/// `rank<N>.gpuspan`: a shell glob would order `rank10` before `rank2`), else the order given.
pub fn rank_numbers(paths: &[&Path]) -> Vec<usize> {
    let from_name = |p: &&Path| -> Option<usize> {
        let name = p.file_name()?.to_str()?;
        let at = name.find("rank")? + 4;
        let digits: String = name[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let named: Option<Vec<usize>> = paths.iter().map(from_name).collect();
    match named {
        Some(n) if n.iter().collect::<BTreeSet<_>>().len() == n.len() => n,
        _ => (0..paths.len()).collect(),
    }
}

/// Kernels NCCL and RCCL launch: their names start so.
fn is_collective_kernel(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("nccl") || n.starts_with("rccl")
}

/// Compares `captures`, each `(label, rank number, capture)`, in rank order; `named` adds
/// collective sites.
pub fn compare(captures: &[(&str, usize, &Capture)], named: &[String]) -> Ranks {
    let mut captures = captures.to_vec();
    captures.sort_by_key(|(_, number, _)| *number);
    let mut collectives: BTreeSet<String> = named.iter().cloned().collect();
    for (_, _, c) in &captures {
        let index = Index::new(c);
        for r in &c.records {
            if r.activities.iter().any(|a| matches!(a.kind, ActivityKind::Kernel(_)) && is_collective_kernel(&a.name)) {
                collectives.insert(index.site_name(r.site));
            }
        }
    }

    let mut ranks = Vec::new();
    let mut sites: BTreeMap<String, Vec<Option<(u64, u64)>>> = BTreeMap::new();
    for (i, (label, number, c)) in captures.iter().enumerate() {
        let index = Index::new(c);
        let (mut compute, mut collective) = (Vec::new(), Vec::new());
        for w in analysis::work(c) {
            let site = index.site_name(c.records[w.record].site);
            if collectives.contains(&site) { &mut collective } else { &mut compute }.push(w.interval);
        }
        for r in &c.records {
            let row = sites.entry(index.site_name(r.site)).or_insert_with(|| vec![None; captures.len()]);
            let (calls, ns) = row[i].get_or_insert((0, 0));
            *calls += 1;
            *ns += r.duration_ns();
        }
        let start = c.records.iter().map(|r| r.host.start_ns).min().unwrap_or(0);
        let end = c.records.iter().map(|r| r.host.end_ns).max().unwrap_or(0);
        ranks.push(Rank {
            rank: *number,
            capture: (*label).to_owned(),
            program: c.header.program.clone(),
            pid: c.header.pid,
            calls: c.records.len(),
            span_ns: end.saturating_sub(start),
            compute_ns: covered(compute),
            collective_ns: covered(collective),
        });
    }

    let sites: Vec<SiteAcross> = sites
        .into_iter()
        .map(|(site, per_rank)| {
            let present: Vec<(usize, u64)> =
                per_rank.iter().enumerate().filter_map(|(i, v)| v.map(|(_, ns)| (i, ns))).collect();
            // The first of equal largest totals.
            let max = present.iter().rev().max_by_key(|(_, ns)| *ns).copied().unwrap_or((0, 0));
            let min = present.iter().map(|(_, ns)| *ns).min().unwrap_or(0);
            SiteAcross {
                collective: collectives.contains(&site),
                site,
                per_rank,
                spread: if min > 0 { max.1 as f64 / min as f64 } else { 1.0 },
                slowest_rank: (max.1 > min).then(|| ranks[max.0].rank),
            }
        })
        .collect();
    let findings = findings(&ranks, !collectives.is_empty());
    Ranks { ranks, sites, collectives: collectives.into_iter().collect(), findings, steps: None }
}

/// Total length of the union of `intervals`.
fn covered(intervals: Vec<Interval>) -> u64 {
    analysis::union(intervals).iter().map(Interval::duration_ns).sum()
}

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
pub(crate) fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    match v.len() {
        0 => 0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

/// Which rank the others wait for, if one stands out.
fn findings(ranks: &[Rank], with_collectives: bool) -> Vec<String> {
    let d = table::duration;
    let mut out = Vec::new();
    if ranks.len() < 2 {
        out.push("one rank: nothing to compare (give every rank's capture)".to_owned());
        return out;
    }
    if ranks.iter().all(|r| r.compute_ns == 0) {
        out.push("no GPU compute timed in any rank: nothing to compare".to_owned());
        return out;
    }
    let Some(slow) = ranks.iter().max_by_key(|r| r.compute_ns) else { return out };
    let others = |f: fn(&Rank) -> u64| median(ranks.iter().filter(|r| r.rank != slow.rank).map(f).collect());
    let usual = others(|r| r.compute_ns);
    let excess = if usual > 0 { (slow.compute_ns as f64 / usual as f64 - 1.0) * 100.0 } else { f64::INFINITY };
    if excess < STRAGGLER_PCT {
        let fastest = ranks.iter().map(|r| r.compute_ns).min().unwrap_or(0);
        out.push(format!(
            "no straggler: GPU compute within {STRAGGLER_PCT:.0} % across ranks ({} to {})",
            d(fastest),
            d(slow.compute_ns)
        ));
        return out;
    }
    let mut line = format!(
        "rank {} is the straggler: GPU compute {}, {excess:.1} % more than the other ranks' median ({})",
        slow.rank,
        d(slow.compute_ns),
        d(usual)
    );
    if with_collectives {
        let waited = others(|r| r.collective_ns).saturating_sub(slow.collective_ns);
        if waited > 0 {
            let _ = write!(line, "; the others spent {} more in collectives (median), waiting for it", d(waited));
        } else {
            line.push_str("; its collectives took no less than the others': they did not wait for it");
        }
    }
    out.push(line);
    out
}

impl Ranks {
    /// Adds the job step by step (`--step NAME`): `captures` as given to [`compare`].
    pub fn with_steps(mut self, captures: &[(&str, usize, &Capture)], name: &str) -> Ranks {
        let mut sorted: Vec<(usize, &Capture)> = captures.iter().map(|(_, n, c)| (*n, *c)).collect();
        sorted.sort_by_key(|(n, _)| *n);
        self.steps = Some(crate::steps::compare(&sorted, &self.collectives, name));
        self
    }

    /// The ranks, the sites across them and the findings, as text.
    pub fn to_text(&self) -> String {
        let d = table::duration;
        let mut out = String::new();
        let mut t = Table::new(&["rank", "capture", "calls", "span", "GPU compute", "GPU collective"]);
        for r in &self.ranks {
            t.row(vec![
                r.rank.to_string(),
                format!("{} ({}, pid {})", r.capture, r.program, r.pid),
                r.calls.to_string(),
                d(r.span_ns),
                d(r.compute_ns),
                d(r.collective_ns),
            ]);
        }
        let _ =
            writeln!(out, "Ranks (GPU time: union of each rank's kernels and copies, else its calls' GPU intervals)");
        out.push_str(&t.to_text());
        let collectives =
            if self.collectives.is_empty() { "none found".to_owned() } else { self.collectives.join(", ") };
        let _ = writeln!(out, "\ncollective sites: {collectives}");

        let mut header: Vec<String> = vec!["site".into()];
        header.extend(self.ranks.iter().map(|r| format!("rank {}", r.rank)));
        header.extend(["spread".into(), "slowest".into()]);
        let mut t = Table { header, rows: Vec::new() };
        for s in &self.sites {
            let mut row = vec![if s.collective { format!("{} (collective)", s.site) } else { s.site.clone() }];
            row.extend(
                s.per_rank
                    .iter()
                    .map(|v| v.map_or_else(|| "-".to_owned(), |(calls, ns)| format!("{} ×{calls}", d(ns)))),
            );
            row.push(format!("{:.2}×", s.spread));
            row.push(s.slowest_rank.map_or_else(|| "-".to_owned(), |r| format!("rank {r}")));
            t.row(row);
        }
        let _ = writeln!(out, "\nSites across ranks (time: GPU where timed, else host; summed over the calls)");
        out.push_str(&t.to_text());
        if let Some(steps) = &self.steps {
            out.push_str(&steps.to_text());
        }
        let _ = writeln!(out, "\nFindings");
        for f in &self.findings {
            let _ = writeln!(out, "- {f}");
        }
        crate::table::shown_text(&out).into_owned()
    }
}
