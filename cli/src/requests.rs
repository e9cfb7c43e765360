//! "GPU cost per request": the GPU time of the recorded calls made under each application
//! `tracing` span instance (a request, a batch, an epoch), summed per instance, then summarised
//! per span name: how many instances, their total, and the p50/p99/max of one instance's.
//!
//! A call counts under every span of its chain, so an outer span holds its inner spans' time. A
//! call's GPU time is its GPU busy time, as the site table counts it: host-timed calls add none,
//! and a call nested in another annotated call counts in both (as both sites' rows do).
//!
//! A selected span (a site of kind `span`) has a record of its own, timed by a queue bracket
//! that already holds everything made inside it, or (CUDA) by the launches it owns. So an
//! instance's GPU time is folded up the span tree, not summed over every record under it: a
//! bracketed span instance counts its bracket alone, any other instance its own work plus its
//! children's totals. Summing every record under it counted a bracket and the brackets inside
//! it again (issue 39: `epoch ≤ 14.618 s` in a 7.639 s capture).
//! Memory grows with the span instances (a few numbers each), not with the records.

use crate::analysis::Spans;
use crate::stats::Samples;
use gpuspan_capture::{Record, Span};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One span name's instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRow {
    pub span: String,
    /// Instances of the span that enclosed recorded calls.
    pub requests: u64,
    /// Recorded calls made under them.
    pub records: u64,
    /// Of those, the calls with a GPU time: with none, the times below are no GPU time (0) and
    /// the table shows none rather than "0 ns".
    pub gpu_timed: u64,
    /// GPU time of all of them.
    pub total_ns: u64,
    pub mean_ns: Option<u64>,
    /// Of one instance's GPU time.
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Some of the calls were timed by queue brackets: the times are upper bounds.
    pub bracketed: bool,
}

/// Sums fed one record at a time; feed the spans before the records made in them.
#[derive(Debug, Default)]
pub struct Builder {
    spans: Spans,
    /// Site ids of kind `span`: their records are a span instance's own.
    span_sites: HashSet<u32>,
    per: HashMap<u64, Instance>,
}

/// One span instance's records.
#[derive(Debug, Default, Clone, Copy)]
struct Instance {
    /// GPU ns of the calls made directly in it (its innermost span).
    direct_ns: u64,
    /// A selected span's own record: its GPU ns, and whether a bracket timed it (then it holds
    /// everything made inside it).
    own: Option<(u64, bool)>,
    /// Recorded calls under it, at any depth.
    records: u64,
    /// Of those, the GPU-timed ones.
    gpu_timed: u64,
    /// A call under it was timed by a queue bracket.
    bracketed: bool,
}

impl Builder {
    /// A site the records may name.
    pub fn site(&mut self, s: &gpuspan_capture::Site) {
        if s.kind == gpuspan_capture::SiteKind::Span {
            self.span_sites.insert(s.id);
        }
    }

    /// The spans read so far (`all` may grow between calls).
    pub fn spans(&mut self, all: &[Span]) {
        if all.len() > self.spans.fed {
            self.spans.feed(all);
        }
    }

    pub fn record(&mut self, r: &Record) {
        let chain = self.spans.chain(r.span);
        let Some(&(innermost, _)) = chain.last() else { return };
        let ns = r.gpu.as_ref().map_or(0, |g| g.busy_ns);
        let bracketed = r.gpu.as_ref().is_some_and(|g| g.bracketed());
        for &(id, _) in &chain {
            let e = self.per.entry(id).or_default();
            e.records += 1;
            e.gpu_timed += u64::from(r.gpu.is_some());
            e.bracketed |= bracketed;
        }
        let e = self.per.entry(innermost).or_default();
        if self.span_sites.contains(&r.site) {
            // A span's record names the span instance itself as its chain.
            let (own, was_bracketed) = e.own.unwrap_or_default();
            e.own = Some((own + ns, was_bracketed || bracketed));
        } else {
            e.direct_ns += ns;
        }
    }

    /// Each instance's GPU time, folded up the span tree (children before parents).
    fn totals(&self) -> HashMap<u64, u64> {
        let mut children: HashMap<u64, Vec<u64>> = HashMap::new();
        let mut depth: Vec<(usize, u64)> = Vec::with_capacity(self.per.len());
        for &id in self.per.keys() {
            let chain = self.spans.chain(Some(id));
            if let [.., (parent, _), _] = chain.as_slice() {
                children.entry(*parent).or_default().push(id);
            }
            depth.push((chain.len(), id));
        }
        // Deepest first: every child's total is known before its parent's.
        depth.sort_unstable_by(|a, b| b.cmp(a));
        let mut totals: HashMap<u64, u64> = HashMap::with_capacity(depth.len());
        for (_, id) in depth {
            let i = self.per[&id];
            let inside = || {
                let kids: u64 =
                    children.get(&id).map_or(0, |c| c.iter().map(|k| totals.get(k).copied().unwrap_or(0)).sum());
                i.direct_ns + kids
            };
            let total = match i.own {
                Some((own, true)) => own,
                Some((own, false)) => own + inside(),
                None => inside(),
            };
            totals.insert(id, total);
        }
        totals
    }

    /// One row per span name, the largest total first; whether some quantile is approximate.
    pub fn finish(self) -> (Vec<RequestRow>, bool) {
        let totals = self.totals();
        let mut by_name: BTreeMap<String, (Samples, u64, u64, bool)> = BTreeMap::new();
        for (id, i) in &self.per {
            let name = self.spans.chain(Some(*id)).last().map_or("?", |&(_, n)| self.spans.name(n)).to_owned();
            let e = by_name.entry(name).or_default();
            e.0.push(totals.get(id).copied().unwrap_or(0));
            e.1 += i.records;
            e.2 += i.gpu_timed;
            e.3 |= i.bracketed;
        }
        let mut approximate = false;
        let mut rows: Vec<RequestRow> = by_name
            .into_iter()
            .map(|(span, (mut totals, records, gpu_timed, bracketed))| {
                approximate |= totals.approximate();
                let n = totals.len();
                RequestRow {
                    span,
                    requests: n,
                    records,
                    gpu_timed,
                    total_ns: totals.total(),
                    mean_ns: (n > 0).then(|| totals.total() / n),
                    p50_ns: totals.quantile(0.5),
                    p99_ns: totals.quantile(0.99),
                    max_ns: totals.quantile(1.0),
                    bracketed,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.span.cmp(&b.span)));
        (rows, approximate)
    }
}
