//! Self and inclusive GPU time of the selected `tracing` spans (sites of kind `span`, capture
//! format 6), per span name: `gpuspan report`'s "Selected spans" table.
//!
//! A span's record names the span instance itself as its chain ([`Record::span`]), so every
//! record whose chain passes through that instance was made inside it (a nested selected span,
//! an annotated call, on any thread that entered it).
//!
//! - **Self**: the work the span owns. Under CUPTI the innermost selected span entered on the
//!   launching thread owns a launch, so a record's GPU busy time is already its self time. A
//!   wgpu span is a queue bracket that holds its children's brackets: its self time is its
//!   bracket minus the union of the GPU intervals recorded inside it (still a bound).
//! - **Inclusive**: the span with everything inside it. For a bracket, the bracket itself; for
//!   exact timing, its self time plus the GPU time of every record made inside it.
//!
//! Memory grows with the records made inside span instances (an id, a duration and an interval
//! each), and only when the capture has span sites.

use crate::analysis::Spans;
use crate::stats::Samples;
use gpuspan_capture::{Aggregate, Interval, Record, Site, SiteKind, Span};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One selected span's instances, by span name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanRow {
    pub span: String,
    /// Recorded instances.
    pub recorded: u64,
    /// Every instance, from the aggregates (absent in an unfinished capture).
    pub calls: Option<u64>,
    /// GPU time the instances owned.
    pub self_ns: u64,
    /// GPU time of the instances with what ran inside them.
    pub inclusive_ns: u64,
    /// Of one instance.
    pub self_p50_ns: Option<u64>,
    pub self_p99_ns: Option<u64>,
    pub inclusive_p50_ns: Option<u64>,
    pub inclusive_p99_ns: Option<u64>,
    /// Some instances were queue brackets: their times are upper bounds.
    pub bracketed: bool,
}

/// A span's own record.
#[derive(Debug)]
struct Instance {
    site: u32,
    node: Option<u64>,
    busy_ns: u64,
    /// Its bracket, when a bracket timed it.
    bracket: Option<Interval>,
    /// Filled at the end: what ran inside it.
    inside_ns: u64,
    inside: Vec<Interval>,
}

/// A record made inside some span instance.
#[derive(Debug)]
struct Inside {
    node: u64,
    busy_ns: u64,
    interval: Option<Interval>,
    /// The instance this record is, if it is one (it is not inside itself).
    instance: Option<usize>,
}

/// Fed one record at a time; feed the sites and spans before the records.
#[derive(Debug, Default)]
pub struct Builder {
    span_sites: HashSet<u32>,
    spans: Spans,
    instances: Vec<Instance>,
    inside: Vec<Inside>,
}

impl Builder {
    pub fn site(&mut self, s: &Site) {
        if s.kind == SiteKind::Span {
            self.span_sites.insert(s.id);
        }
    }

    /// The spans read so far (`all` may grow between calls).
    pub fn spans(&mut self, all: &[Span]) {
        if !self.span_sites.is_empty() && all.len() > self.spans.fed {
            self.spans.feed(all);
        }
    }

    pub fn record(&mut self, r: &Record) {
        if self.span_sites.is_empty() {
            return;
        }
        let busy_ns = r.gpu.as_ref().map_or(0, |g| g.busy_ns);
        let bracket = r.gpu.as_ref().filter(|g| g.bracketed()).map(|g| g.interval);
        let instance = self.span_sites.contains(&r.site).then(|| {
            self.instances.push(Instance {
                site: r.site,
                node: r.span,
                busy_ns,
                bracket,
                inside_ns: 0,
                inside: Vec::new(),
            });
            self.instances.len() - 1
        });
        if let Some(node) = r.span {
            self.inside.push(Inside { node, busy_ns, interval: r.gpu.as_ref().map(|g| g.interval), instance });
        }
    }

    /// One row per span name, the largest inclusive time first; whether a quantile is approximate.
    pub fn finish(mut self, names: impl Fn(u32) -> String, aggregates: &[Aggregate]) -> (Vec<SpanRow>, bool) {
        let by_node: HashMap<u64, usize> =
            self.instances.iter().enumerate().filter_map(|(i, x)| Some((x.node?, i))).collect();
        for e in &self.inside {
            for (node, _) in self.spans.chain(Some(e.node)) {
                let Some(&i) = by_node.get(&node) else { continue };
                if e.instance == Some(i) {
                    continue;
                }
                let x = &mut self.instances[i];
                x.inside_ns += e.busy_ns;
                if let (Some(b), Some(iv)) = (x.bracket, e.interval) {
                    let clipped = Interval::new(iv.start_ns.max(b.start_ns), iv.end_ns.min(b.end_ns));
                    if clipped.end_ns > clipped.start_ns {
                        x.inside.push(clipped);
                    }
                }
            }
        }
        let mut by_site: BTreeMap<u32, (Samples, Samples, bool)> = BTreeMap::new();
        for x in &mut self.instances {
            let (own, all) = match x.bracket {
                Some(b) => (b.duration_ns().saturating_sub(union_ns(&mut x.inside)), b.duration_ns()),
                None => (x.busy_ns, x.busy_ns + x.inside_ns),
            };
            let e = by_site.entry(x.site).or_default();
            e.0.push(own);
            e.1.push(all);
            e.2 |= x.bracket.is_some();
        }
        let mut approximate = false;
        let mut rows: Vec<SpanRow> = by_site
            .into_iter()
            .map(|(site, (mut own, mut all, bracketed))| {
                approximate |= own.approximate() || all.approximate();
                SpanRow {
                    span: names(site),
                    recorded: own.len(),
                    calls: aggregates.iter().find(|a| a.site == site).map(|a| a.calls),
                    self_ns: own.total(),
                    inclusive_ns: all.total(),
                    self_p50_ns: own.quantile(0.5),
                    self_p99_ns: own.quantile(0.99),
                    inclusive_p50_ns: all.quantile(0.5),
                    inclusive_p99_ns: all.quantile(0.99),
                    bracketed,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.inclusive_ns.cmp(&a.inclusive_ns).then_with(|| a.span.cmp(&b.span)));
        (rows, approximate)
    }
}

/// The length of the union of `v`'s intervals.
fn union_ns(v: &mut [Interval]) -> u64 {
    v.sort_by_key(|i| (i.start_ns, i.end_ns));
    let mut total = 0;
    let mut cur: Option<Interval> = None;
    for i in v.iter() {
        match &mut cur {
            Some(c) if i.start_ns <= c.end_ns => c.end_ns = c.end_ns.max(i.end_ns),
            _ => {
                total += cur.map_or(0, |c| c.duration_ns());
                cur = Some(*i);
            }
        }
    }
    total + cur.map_or(0, |c| c.duration_ns())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_counts_overlaps_once() {
        let mut v = vec![Interval::new(10, 20), Interval::new(0, 5), Interval::new(15, 30), Interval::new(40, 41)];
        assert_eq!(union_ns(&mut v), 5 + 20 + 1);
        assert_eq!(union_ns(&mut []), 0);
    }
}
