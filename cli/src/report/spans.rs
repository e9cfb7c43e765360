//! GPU time per application span instance ([`crate::requests`]) and per selected span
//! ([`crate::span_time`]).

use super::{Report, Units};
use crate::table::Table;

impl Report {
    pub fn requests_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "span".into(),
            "requests".into(),
            "calls".into(),
            u.head("GPU total", "ns"),
            u.head("mean", "ns"),
            u.head("p50", "ns"),
            u.head("p99", "ns"),
            u.head("max", "ns"),
        ];
        for r in &self.requests {
            let bound = u.bound(r.bracketed, "≤ ");
            // Host-timed calls only: no GPU time was measured, which is not 0 ns of it.
            let measured = r.gpu_timed > 0;
            let d =
                |ns: Option<u64>| ns.filter(|_| measured).map_or_else(|| "-".into(), |n| format!("{bound}{}", u.ns(n)));
            t.row(vec![
                r.span.clone(),
                r.requests.to_string(),
                r.records.to_string(),
                d(Some(r.total_ns)),
                d(r.mean_ns),
                d(r.p50_ns),
                d(r.p99_ns),
                d(r.max_ns),
            ]);
        }
        t
    }

    pub fn spans_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "span".into(),
            "recorded".into(),
            "all calls".into(),
            u.head("GPU self", "ns"),
            u.head("GPU inclusive", "ns"),
            u.head("self p50", "ns"),
            u.head("self p99", "ns"),
            u.head("inclusive p50", "ns"),
            u.head("inclusive p99", "ns"),
        ];
        for s in &self.spans {
            let bound = u.bound(s.bracketed, "≤ ");
            let d = |ns: Option<u64>| ns.map_or_else(|| "-".into(), |n| format!("{bound}{}", u.ns(n)));
            t.row(vec![
                s.span.clone(),
                s.recorded.to_string(),
                s.calls.map_or_else(|| "-".into(), |c| c.to_string()),
                d(Some(s.self_ns)),
                d(Some(s.inclusive_ns)),
                d(s.self_p50_ns),
                d(s.self_p99_ns),
                d(s.inclusive_p50_ns),
                d(s.inclusive_p99_ns),
            ]);
        }
        t
    }
}
