//! "GPU cost per request": the GPU time of the recorded calls made under each application
//! `tracing` span instance (a request, a batch, an epoch), summed per instance, then summarised
//! per span name: how many instances, their total, and the p50/p99/max of one instance's.
//!
//! A call counts under every span of its chain, so an outer span holds its inner spans' time. A
//! call's GPU time is its GPU busy time, as the site table counts it: host-timed calls add none,
//! and a call nested in another annotated call counts in both (as both sites' rows do).
//! Memory grows with the span instances (two numbers each), not with the records.

use crate::analysis::Spans;
use crate::stats::Samples;
use gpuspan_capture::{Record, Span};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One span name's instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRow {
    pub span: String,
    /// Instances of the span that enclosed recorded calls.
    pub requests: u64,
    /// Recorded calls made under them.
    pub records: u64,
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
    /// Span instance -> (GPU ns, recorded calls).
    per: HashMap<u64, (u64, u64)>,
    /// Span instances with a bracketed call.
    bracketed: std::collections::HashSet<u64>,
}

impl Builder {
    /// The spans read so far (`all` may grow between calls).
    pub fn spans(&mut self, all: &[Span]) {
        if all.len() > self.spans.fed {
            self.spans.feed(all);
        }
    }

    pub fn record(&mut self, r: &Record) {
        if r.span.is_none() {
            return;
        }
        let ns = r.gpu.as_ref().map_or(0, |g| g.busy_ns);
        let bracketed = r.gpu.as_ref().is_some_and(|g| g.bracketed());
        for (id, _) in self.spans.chain(r.span) {
            let e = self.per.entry(id).or_default();
            e.0 += ns;
            e.1 += 1;
            if bracketed {
                self.bracketed.insert(id);
            }
        }
    }

    /// One row per span name, the largest total first; whether some quantile is approximate.
    pub fn finish(self) -> (Vec<RequestRow>, bool) {
        let mut by_name: BTreeMap<String, (Samples, u64, bool)> = BTreeMap::new();
        for (id, (ns, records)) in &self.per {
            let name = self.spans.chain(Some(*id)).last().map_or("?", |&(_, n)| self.spans.name(n)).to_owned();
            let e = by_name.entry(name).or_default();
            e.0.push(*ns);
            e.1 += records;
            e.2 |= self.bracketed.contains(id);
        }
        let mut approximate = false;
        let mut rows: Vec<RequestRow> = by_name
            .into_iter()
            .map(|(span, (mut totals, records, bracketed))| {
                approximate |= totals.approximate();
                let n = totals.len();
                RequestRow {
                    span,
                    requests: n,
                    records,
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
