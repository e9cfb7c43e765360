//! Launch-bound kernel sites: the GPU waits on the host's launches.

use super::{Report, Units};
use crate::analysis::Index;
use crate::stats::Samples;
use crate::table::Table;
use serde::Serialize;
use std::collections::BTreeMap;

/// A kernel site whose GPU work per call is shorter than the host time of the call: the GPU
/// waits on launching (batch the work, or launch less often). Transfers are left out: a
/// synchronous copy's host time includes waiting for the copy, which says nothing of launching.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchBound {
    pub site: String,
    pub recorded: u64,
    pub gpu_p50_ns: u64,
    pub host_p50_ns: u64,
}

/// Kernel sites' GPU and host times per call, fed one record at a time.
#[derive(Debug, Default)]
pub(super) struct Launch {
    by_site: BTreeMap<u32, (Samples, Samples)>,
}

impl Launch {
    /// A kernel site's call with exact GPU time.
    pub(super) fn call(&mut self, site: u32, gpu_ns: u64, host_ns: u64) {
        let e = self.by_site.entry(site).or_default();
        e.0.push(gpu_ns);
        e.1.push(host_ns);
    }

    pub(super) fn rows(&mut self, index: &Index<'_>, approximate: &mut bool) -> Vec<LaunchBound> {
        let mut out: Vec<LaunchBound> = std::mem::take(&mut self.by_site)
            .into_iter()
            .filter_map(|(id, (mut gpu, mut host))| {
                *approximate |= gpu.approximate() || host.approximate();
                let (g, h) = (gpu.quantile(0.5)?, host.quantile(0.5)?);
                (g < h).then(|| LaunchBound {
                    site: index.site_name(id),
                    recorded: gpu.len(),
                    gpu_p50_ns: g,
                    host_p50_ns: h,
                })
            })
            .collect();
        // The largest shortfall first: where batching would gain most.
        out.sort_by_key(|l| std::cmp::Reverse(l.host_p50_ns - l.gpu_p50_ns));
        out
    }
}

impl Report {
    pub fn launch_bound_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec!["site".into(), "recorded".into(), u.head("GPU p50", "ns"), u.head("host p50", "ns")];
        for l in &self.launch_bound {
            t.row(vec![l.site.clone(), l.recorded.to_string(), u.ns(l.gpu_p50_ns), u.ns(l.host_p50_ns)]);
        }
        t
    }
}
