//! How table cells are written.

use crate::table;

/// How table cells are written: for people (units chosen per value, bounds marked) or raw for
/// scripts (`--format csv`: nanoseconds, bytes, bytes per second, with the unit in the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    pub raw: bool,
}

impl Units {
    pub(super) fn head(self, name: &str, unit: &str) -> String {
        if self.raw && !unit.is_empty() {
            format!("{name} ({unit})")
        } else {
            name.to_owned()
        }
    }

    pub(super) fn ns(self, ns: u64) -> String {
        if self.raw {
            ns.to_string()
        } else {
            table::duration(ns)
        }
    }

    pub(super) fn opt_ns(self, ns: Option<u64>) -> String {
        ns.map_or_else(|| "-".into(), |n| self.ns(n))
    }

    pub(super) fn bytes(self, b: u64) -> String {
        if self.raw {
            b.to_string()
        } else {
            table::bytes(b)
        }
    }

    pub(super) fn rate(self, r: Option<f64>) -> String {
        match r {
            None => "-".into(),
            Some(r) if self.raw => format!("{r:.0}"),
            Some(r) => table::bandwidth(r),
        }
    }

    /// A fraction of a peak: a percentage for people, the fraction for scripts.
    pub(super) fn efficiency(self, e: Option<f64>) -> String {
        match e {
            None => "-".into(),
            Some(e) if self.raw => format!("{e:.6}"),
            Some(e) => format!("{:.1} %", e * 100.0),
        }
    }

    /// A bound marker (`≤ `, `≥ `) where it applies, for people only: raw cells stay numbers
    /// (the JSON says which rows are bounds).
    pub(super) fn bound(self, on: bool, mark: &str) -> &str {
        if on && !self.raw {
            mark
        } else {
            ""
        }
    }
}
