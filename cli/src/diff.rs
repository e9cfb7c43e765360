//! `gpuspan diff BASE NEW`: per site and per kernel, how the recorded durations changed, with a
//! confidence interval and a test, so that a CI job can fail on a GPU slowdown and only on one
//! that the data shows.
//!
//! For each site (by name) and each kernel the GPU reported (by name): the change of the
//! median, `new/base − 1`, with a 95 % percentile-bootstrap interval (seeded: the same inputs
//! give the same output), and the one-sided Mann–Whitney U test in each direction. A change is
//! *slower* when the test says new tends to be larger (p < α) and the whole interval is above
//! zero; `--fail-if-slower X%` fails when some change is slower with the interval's lower end at
//! or above X %: slower by at least X % with 95 % confidence.

use crate::analysis::Index;
use crate::stats::{self, Rng};
use crate::table::{self, Table};
use gpuspan_capture::{ActivityKind, Capture};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How the comparison is made.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Of the bootstrap interval.
    pub confidence: f64,
    /// Significance level of the test.
    pub alpha: f64,
    pub resamples: usize,
    /// Fewer values than this on a side: no verdict (the test's normal approximation needs
    /// about eight).
    pub min_samples: usize,
    /// Values per side the bootstrap uses at most (evenly thinned beyond).
    pub cap: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { confidence: 0.95, alpha: 0.05, resamples: 1000, min_samples: 8, cap: 4000 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Slower,
    Faster,
    /// No significant change.
    Same,
    TooFewSamples,
    OnlyInBase,
    OnlyInNew,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Same => "no significant change",
            Verdict::TooFewSamples => "too few samples",
            Verdict::OnlyInBase => "only in base",
            Verdict::OnlyInNew => "only in new",
        }
    }
}

/// The change of one site or kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `site` or `kernel`.
    pub what: String,
    pub name: String,
    pub base_count: usize,
    pub new_count: usize,
    pub base_median_ns: Option<f64>,
    pub new_median_ns: Option<f64>,
    /// `new/base − 1`, in percent.
    pub change_percent: Option<f64>,
    pub ci_low_percent: Option<f64>,
    pub ci_high_percent: Option<f64>,
    /// One-sided p-value that new is slower.
    pub p_slower: Option<f64>,
    /// One-sided p-value that new is faster.
    pub p_faster: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub confidence: f64,
    pub alpha: f64,
    pub changes: Vec<Change>,
}

/// Duration samples by (what, name).
fn samples(capture: &Capture) -> BTreeMap<(&'static str, String), Vec<f64>> {
    let index = Index::new(capture);
    // By site id first: a name per record would be a string allocation per record.
    let mut by_site: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut out: BTreeMap<(&'static str, String), Vec<f64>> = BTreeMap::new();
    for r in &capture.records {
        by_site.entry(r.site).or_default().push(r.duration_ns() as f64);
        for a in &r.activities {
            if matches!(a.kind, ActivityKind::Kernel { .. }) {
                out.entry(("kernel", a.name.clone())).or_default().push(a.interval.duration_ns() as f64);
            }
        }
    }
    for (id, v) in by_site {
        out.entry(("site", index.site_name(id))).or_default().extend(v);
    }
    out
}

/// Compares every site and kernel of `new` with `base`.
pub fn compare(base: &Capture, new: &Capture, settings: &Settings) -> Diff {
    let a = samples(base);
    let b = samples(new);
    let mut keys: Vec<&(&'static str, String)> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let empty = Vec::new();
    let changes = keys
        .into_iter()
        .map(|key| {
            let (x, y) = (a.get(key).unwrap_or(&empty), b.get(key).unwrap_or(&empty));
            change(key.0, &key.1, x, y, settings)
        })
        .collect();
    Diff { confidence: settings.confidence, alpha: settings.alpha, changes }
}

fn change(what: &str, name: &str, base: &[f64], new: &[f64], s: &Settings) -> Change {
    let median = |v: &[f64]| stats::median(&mut v.to_vec());
    let (mb, mn) = (median(base), median(new));
    let mut c = Change {
        what: what.to_owned(),
        name: name.to_owned(),
        base_count: base.len(),
        new_count: new.len(),
        base_median_ns: mb,
        new_median_ns: mn,
        change_percent: match (mb, mn) {
            (Some(b), Some(n)) if b > 0.0 => Some((n / b - 1.0) * 100.0),
            _ => None,
        },
        ci_low_percent: None,
        ci_high_percent: None,
        p_slower: None,
        p_faster: None,
        verdict: Verdict::Same,
    };
    if base.is_empty() {
        c.verdict = Verdict::OnlyInNew;
        return c;
    }
    if new.is_empty() {
        c.verdict = Verdict::OnlyInBase;
        return c;
    }
    if base.len() < s.min_samples || new.len() < s.min_samples {
        c.verdict = Verdict::TooFewSamples;
        return c;
    }
    let (tb, tn) = (stats::thin(base, s.cap), stats::thin(new, s.cap));
    // Seeded by the name, so each row is reproducible on its own.
    let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let ci = stats::bootstrap_median_change(&tb, &tn, s.resamples, s.confidence, &mut Rng::new(seed));
    c.ci_low_percent = ci.map(|c| c.0 * 100.0);
    c.ci_high_percent = ci.map(|c| c.1 * 100.0);
    c.p_slower = stats::mann_whitney_greater(base, new);
    c.p_faster = stats::mann_whitney_greater(new, base);
    c.verdict = match (c.p_slower, c.p_faster, ci) {
        (Some(p), _, Some((low, _))) if p < s.alpha && low > 0.0 => Verdict::Slower,
        (_, Some(p), Some((_, high))) if p < s.alpha && high < 0.0 => Verdict::Faster,
        _ => Verdict::Same,
    };
    c
}

impl Diff {
    /// The significant slowdowns whose interval's lower end is at least `percent`.
    pub fn slower_than(&self, percent: f64) -> Vec<&Change> {
        self.changes
            .iter()
            .filter(|c| c.verdict == Verdict::Slower && c.ci_low_percent.is_some_and(|l| l >= percent))
            .collect()
    }

    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "what",
            "name",
            "base n",
            "new n",
            "base median",
            "new median",
            "change",
            "95% interval",
            "p",
            "verdict",
        ]);
        let pct = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:+.1}%"));
        let med = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| table::duration(v.round() as u64));
        for c in &self.changes {
            let p = match c.verdict {
                Verdict::Faster => c.p_faster,
                _ => c.p_slower,
            };
            t.row(vec![
                c.what.clone(),
                c.name.clone(),
                c.base_count.to_string(),
                c.new_count.to_string(),
                med(c.base_median_ns),
                med(c.new_median_ns),
                pct(c.change_percent),
                match (c.ci_low_percent, c.ci_high_percent) {
                    (Some(l), Some(h)) => format!("{l:+.1}% .. {h:+.1}%"),
                    _ => "-".into(),
                },
                p.map_or_else(|| "-".into(), |p| format!("{p:.3}")),
                c.verdict.as_str().to_owned(),
            ]);
        }
        t.rows.sort_by_key(|r| r[9] != "slower");
        t
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "gpuspan diff: median change per site and kernel, {:.0}% bootstrap interval, one-sided Mann–Whitney p (α = {})\n",
            self.confidence * 100.0,
            self.alpha
        );
        if self.changes.is_empty() {
            out.push_str("  nothing recorded in either capture\n");
        } else {
            out.push_str(&self.table().to_text());
        }
        let slower = self.changes.iter().filter(|c| c.verdict == Verdict::Slower).count();
        let _ = writeln!(out, "{slower} significantly slower");
        out
    }
}
