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
//!
//! Files are read in one streaming pass each ([`compare_files`]): per row at most [`KEEP`]
//! durations are kept, all of them when there are no more, else a uniform random sample of
//! them (seeded by the row's name: the same files give the same answer), so memory is bounded
//! by the rows, not the records. The median, interval and test then speak of that sample.

use crate::analysis::Index;
use crate::load::LoadError;
use crate::stats::{self, Rng};
use crate::table::{self, Table};
use gpuspan_capture::{ActivityKind, Capture, Record};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

/// Durations a row keeps at most: 128 KiB a row.
pub const KEEP: usize = 16 * 1024;

/// A row's durations: every one up to [`KEEP`], then a uniform sample of that many (Vitter's
/// algorithm R), with the count of all.
#[derive(Debug, Clone)]
pub struct Reservoir {
    values: Vec<f64>,
    seen: u64,
    rng: Rng,
}

impl Reservoir {
    /// Seeded by the row's name, so each row is reproducible on its own.
    pub fn new(name: &str) -> Reservoir {
        Reservoir { values: Vec::new(), seen: 0, rng: Rng::new(seed(name)) }
    }

    pub fn push(&mut self, v: f64) {
        self.seen += 1;
        if self.values.len() < KEEP {
            self.values.push(v);
        } else {
            let j = self.rng.below(usize::try_from(self.seen).unwrap_or(usize::MAX));
            if j < KEEP {
                self.values[j] = v;
            }
        }
    }

    pub fn seen(&self) -> u64 {
        self.seen
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }
}

fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The rows of one capture fed one record at a time: sites by id (named at the end), kernels
/// by name.
#[derive(Debug, Default)]
pub struct Rows {
    sites: BTreeMap<u32, Reservoir>,
    kernels: HashMap<String, Reservoir>,
}

impl Rows {
    pub fn record(&mut self, r: &Record) {
        self.sites.entry(r.site).or_insert_with(|| Reservoir::new(&r.site.to_string())).push(r.duration_ns() as f64);
        for a in &r.activities {
            if matches!(a.kind, ActivityKind::Kernel(_)) {
                let ns = a.interval.duration_ns() as f64;
                match self.kernels.get_mut(&a.name) {
                    Some(k) => k.push(ns),
                    None => self.kernels.entry(a.name.clone()).or_insert_with(|| Reservoir::new(&a.name)).push(ns),
                }
            }
        }
    }

    /// The rows by (what, name), sites named from `capture`.
    pub fn finish(self, capture: &Capture) -> BTreeMap<(&'static str, String), Reservoir> {
        let index = Index::new(capture);
        let mut out: BTreeMap<(&'static str, String), Reservoir> = BTreeMap::new();
        for (id, v) in self.sites {
            let name = index.site_name(id);
            match out.get_mut(&("site", name.clone())) {
                // Two sites with one name: one row, as the names say.
                Some(row) => v.values().iter().for_each(|x| row.push(*x)),
                None => {
                    out.insert(("site", name), v);
                }
            }
        }
        out.extend(self.kernels.into_iter().map(|(k, v)| (("kernel", k), v)));
        out
    }
}

/// Compares the captures at two paths, each read in one streaming pass; the captures come back
/// without their records (for their truncation, if any).
pub fn compare_files(
    base: &Path,
    new: &Path,
    progress: bool,
    settings: &Settings,
) -> Result<(Diff, Capture, Capture), LoadError> {
    let read = |path: &Path| {
        let mut rows = Rows::default();
        let meta = crate::load::stream(path, progress, |_, r| rows.record(r))?;
        Ok::<_, LoadError>((rows.finish(&meta), meta))
    };
    let (a, base_meta) = read(base)?;
    let (b, new_meta) = read(new)?;
    Ok((compare_rows(&a, &b, settings), base_meta, new_meta))
}

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

/// The rows of a capture in memory.
fn rows(capture: &Capture) -> BTreeMap<(&'static str, String), Reservoir> {
    let mut rows = Rows::default();
    capture.records.iter().for_each(|r| rows.record(r));
    rows.finish(capture)
}

/// Compares every site and kernel of `new` with `base`.
pub fn compare(base: &Capture, new: &Capture, settings: &Settings) -> Diff {
    compare_rows(&rows(base), &rows(new), settings)
}

fn compare_rows(
    a: &BTreeMap<(&'static str, String), Reservoir>,
    b: &BTreeMap<(&'static str, String), Reservoir>,
    settings: &Settings,
) -> Diff {
    let mut keys: Vec<&(&'static str, String)> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let changes = keys
        .into_iter()
        .map(|key| {
            fn side(r: Option<&Reservoir>) -> (&[f64], usize) {
                r.map_or((&[][..], 0), |r| (r.values(), r.seen() as usize))
            }
            change(key.0, &key.1, side(a.get(key)), side(b.get(key)), settings)
        })
        .collect();
    Diff { confidence: settings.confidence, alpha: settings.alpha, changes }
}

/// One row: each side's kept durations and how many there were in all.
fn change(
    what: &str,
    name: &str,
    (base, base_n): (&[f64], usize),
    (new, new_n): (&[f64], usize),
    s: &Settings,
) -> Change {
    let median = |v: &[f64]| stats::median(&mut v.to_vec());
    let (mb, mn) = (median(base), median(new));
    let mut c = Change {
        what: what.to_owned(),
        name: name.to_owned(),
        base_count: base_n,
        new_count: new_n,
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
    let ci = stats::bootstrap_median_change(&tb, &tn, s.resamples, s.confidence, &mut Rng::new(seed(name)));
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
        crate::table::shown_text(&out).into_owned()
    }
}
