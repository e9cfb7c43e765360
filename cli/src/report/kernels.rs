//! The kernels table: the kernels the GPU reported (CUPTI), and kernel sites' own GPU time
//! where no kernel was reported (wgpu).

use super::{Report, Units};
use crate::analysis::Index;
use crate::stats::Samples;
use crate::table::Table;
use gpuspan_capture::{Activity, ActivityKind, KernelGeometry};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    pub kernel: String,
    /// `activity`: kernels the GPU reported (CUPTI); `scope`: a kernel site's GPU time (wgpu).
    pub from: String,
    pub count: u64,
    pub total_ns: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    /// The most frequent launch geometry, and how many others were seen.
    pub geometry: Option<String>,
}

#[derive(Debug, Default)]
struct KernelAcc {
    durations: Samples,
    geometry: BTreeMap<String, u64>,
}

/// The kernels and kernel sites' GPU time, fed one record at a time.
#[derive(Debug, Default)]
pub(super) struct Kernels {
    kernels: HashMap<String, KernelAcc>,
    /// Kernel sites' own GPU time, by site id (named at the end: no string per record).
    scopes: BTreeMap<u32, Samples>,
}

impl Kernels {
    /// A reported activity: counted when it is a kernel.
    pub(super) fn activity(&mut self, a: &Activity) {
        if let ActivityKind::Kernel(KernelGeometry { grid, block, .. }) = &a.kind {
            let e = match self.kernels.get_mut(&a.name) {
                Some(e) => e,
                None => self.kernels.entry(a.name.clone()).or_default(),
            };
            e.durations.push(a.interval.duration_ns());
            *e.geometry.entry(format!("grid {grid:?} block {block:?}")).or_default() += 1;
        }
    }

    /// A kernel site's exact GPU time, for a call whose kernels were not reported.
    pub(super) fn scope(&mut self, site: u32, busy_ns: u64) {
        self.scopes.entry(site).or_default().push(busy_ns);
    }

    pub(super) fn rows(&mut self, index: &Index<'_>, approximate: &mut bool) -> Vec<KernelRow> {
        let mut acc: BTreeMap<(String, &'static str), KernelAcc> =
            std::mem::take(&mut self.kernels).into_iter().map(|(k, a)| ((k, "activity"), a)).collect();
        for (id, d) in std::mem::take(&mut self.scopes) {
            let e = acc.entry((index.site_name(id), "scope")).or_default();
            e.durations.merge(&d);
        }
        let mut rows: Vec<KernelRow> =
            acc.into_iter()
                .map(|((kernel, from), mut a)| {
                    *approximate |= a.durations.approximate();
                    let geometry =
                        a.geometry.iter().max_by_key(|(g, n)| (**n, std::cmp::Reverse((*g).clone()))).map(|(g, _)| {
                            match a.geometry.len() - 1 {
                                0 => g.clone(),
                                more => format!("{g} (+{more} other)"),
                            }
                        });
                    KernelRow {
                        kernel,
                        from: from.to_owned(),
                        count: a.durations.len(),
                        total_ns: a.durations.total(),
                        p50_ns: a.durations.quantile(0.5),
                        p99_ns: a.durations.quantile(0.99),
                        geometry,
                    }
                })
                .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.kernel.cmp(&b.kernel)));
        rows
    }
}

impl Report {
    pub fn kernels_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "kernel".into(),
            "from".into(),
            "count".into(),
            u.head("total", "ns"),
            u.head("p50", "ns"),
            u.head("p99", "ns"),
            "geometry".into(),
        ];
        for k in &self.kernels {
            t.row(vec![
                k.kernel.clone(),
                k.from.clone(),
                k.count.to_string(),
                u.ns(k.total_ns),
                u.opt_ns(k.p50_ns),
                u.opt_ns(k.p99_ns),
                k.geometry.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        t
    }
}
