//! `gpuspan flamegraph`: GPU time folded over the host stack: thread, the enclosing annotated
//! calls, the site, then the kernel or copy when the GPU reported them.
//!
//! A call's own GPU time is its activities' time when it has activities (CUPTI attributes each
//! kernel to the innermost scope that launched it), else its GPU busy time less what its
//! enclosed calls already account for (a wgpu scope's timestamps enclose those of the scopes
//! inside it). So each nanosecond is counted once and the folded total is the GPU time of the
//! outermost recorded calls.

use crate::analysis::{self, Index};
use gpuspan_capture::Capture;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// A frame name made safe for the folded format: `;` separates frames and a line ends the
/// stack, so neither may appear inside one.
fn frame(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// Folded stacks: `stack -> GPU nanoseconds`, sorted by stack.
pub fn folded(capture: &Capture) -> BTreeMap<String, u64> {
    let index = Index::new(capture);
    let parents = analysis::parents(&capture.records);
    // GPU time each record's enclosed records account for.
    let mut enclosed = vec![0u64; capture.records.len()];
    for (i, r) in capture.records.iter().enumerate() {
        if let (Some(p), Some(g)) = (parents[i], &r.gpu) {
            enclosed[p] += if r.activities.is_empty() {
                g.busy_ns
            } else {
                r.activities.iter().map(|a| a.interval.duration_ns()).sum()
            };
        }
    }
    let mut out = BTreeMap::new();
    for (i, r) in capture.records.iter().enumerate() {
        let Some(g) = &r.gpu else { continue };
        let mut stack = vec![frame(&index.thread_name(r.thread))];
        stack
            .extend(analysis::stack(&parents, i).into_iter().map(|j| frame(&index.site_name(capture.records[j].site))));
        let base = stack.join(";");
        if r.activities.is_empty() {
            let own = g.busy_ns.saturating_sub(enclosed[i]);
            if own > 0 {
                *out.entry(base).or_insert(0) += own;
            }
        } else {
            for a in &r.activities {
                let ns = a.interval.duration_ns();
                if ns > 0 {
                    *out.entry(format!("{base};{}", frame(&a.name))).or_insert(0) += ns;
                }
            }
        }
    }
    out
}

/// The folded lines, as `--folded` prints them and inferno reads them.
pub fn folded_lines(folded: &BTreeMap<String, u64>) -> Vec<String> {
    folded.iter().map(|(stack, ns)| format!("{stack} {ns}")).collect()
}

/// An SVG flamegraph of the folded stacks.
pub fn svg(folded: &BTreeMap<String, u64>, title: &str, out: impl Write) -> io::Result<()> {
    let lines = folded_lines(folded);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.count_name = "ns of GPU time".to_owned();
    // Frames named after kernels and sites, not functions with addresses: colour by name.
    options.hash = true;
    if lines.is_empty() {
        // inferno refuses an empty input; an empty capture still gets a readable picture.
        return writeln!(
            { out },
            "<?xml version=\"1.0\" standalone=\"no\"?><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"60\"><text x=\"10\" y=\"30\">{}: no GPU time was recorded</text></svg>",
            escape(title)
        );
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
