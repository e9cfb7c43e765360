//! The transfers table (copies and sets the GPU reported, and transfer sites' own time where
//! none was), and the finding it makes: copies from or to pageable host memory.

use super::{Finding, Report, Units};
use crate::analysis::Index;
use crate::link;
use crate::table::{self, Table};
use gpuspan_capture::{Activity, ActivityKind, MemoryKind, Record};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferRow {
    pub transfer: String,
    pub direction: Option<String>,
    pub src_kind: Option<String>,
    pub dst_kind: Option<String>,
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    pub bandwidth_bytes_per_s: Option<f64>,
    /// Bandwidth over the link's peak (0 to 1), for copies between host and device the GPU
    /// reported on a device whose PCIe peak the capture holds (format 3, a device monitor).
    pub link_efficiency: Option<f64>,
    /// The peak it is measured against (time-weighted where the copies ran on several devices).
    pub link_peak_bytes_per_s: Option<f64>,
    /// Some times are queue brackets (upper bounds): the bandwidth is a lower bound.
    pub bracketed: bool,
}

type TransferKey = (String, Option<String>, Option<String>, Option<String>);

#[derive(Debug, Default)]
struct TransferAcc {
    count: u64,
    bytes: u64,
    ns: u64,
    bracketed: bool,
    /// The host↔device copies among them, per device.
    link: link::Sums,
}

fn add_transfer(acc: &mut BTreeMap<TransferKey, TransferAcc>, key: TransferKey, x: TransferAcc) {
    let e = acc.entry(key).or_default();
    e.count += x.count;
    e.bytes += x.bytes;
    e.ns += x.ns;
    e.bracketed |= x.bracketed;
    e.link.merge(&x.link);
}

/// The transfers, fed one record at a time.
#[derive(Debug, Default)]
pub(super) struct Transfers {
    transfers: BTreeMap<TransferKey, TransferAcc>,
    /// Transfer sites without reported copies, by site id (named at the end).
    transfer_sites: BTreeMap<u32, TransferAcc>,
    /// (direction, pageable?) -> (count, bytes, ns)
    copies: BTreeMap<(String, bool), (u64, u64, u64)>,
}

impl Transfers {
    /// A reported activity of `r`: counted when it is a copy or a set (then `true`). A copy
    /// between host and device goes to `links` too.
    pub(super) fn activity(&mut self, r: &Record, a: &Activity, links: &mut link::Builder) -> bool {
        let ns = a.interval.duration_ns();
        match &a.kind {
            ActivityKind::Kernel(_) => false,
            ActivityKind::Copy { bytes, direction, src, dst } => {
                let key = (
                    a.name.clone(),
                    direction.map(|d| d.as_str().to_owned()),
                    Some(src.as_str().to_owned()),
                    Some(dst.as_str().to_owned()),
                );
                // Into the row directly: its per-device sums allocate once, not per copy.
                let e = self.transfers.entry(key).or_default();
                e.count += 1;
                e.bytes += bytes;
                e.ns += ns;
                if let Some(device) = links.copy(r, a) {
                    e.link.add(device, *bytes, ns);
                }
                let pageable = *src == MemoryKind::Pageable || *dst == MemoryKind::Pageable;
                let pinned = *src == MemoryKind::Pinned || *dst == MemoryKind::Pinned;
                if pageable || pinned {
                    let d = direction.map_or("copy", |d| d.as_str()).to_owned();
                    let e = self.copies.entry((d, pageable)).or_insert((0, 0, 0));
                    e.0 += 1;
                    e.1 += bytes;
                    e.2 += ns;
                }
                true
            }
            ActivityKind::Set { bytes } => {
                add_transfer(
                    &mut self.transfers,
                    (a.name.clone(), Some("memset".into()), None, None),
                    TransferAcc { count: 1, bytes: *bytes, ns, ..TransferAcc::default() },
                );
                true
            }
        }
    }

    /// A transfer site's call none of whose copies was reported: its own time.
    pub(super) fn site_call(&mut self, r: &Record) {
        let e = self.transfer_sites.entry(r.site).or_default();
        e.count += 1;
        e.bytes += r.bytes.unwrap_or(0);
        e.ns += r.duration_ns();
        e.bracketed |= r.gpu.as_ref().is_some_and(|g| g.bracketed());
    }

    /// The rows; `host_read_backs` get no bandwidth (mostly waiting), `links` gives the
    /// efficiencies.
    pub(super) fn rows(
        &mut self,
        index: &Index<'_>,
        host_read_backs: &BTreeSet<u32>,
        links: &link::Builder,
    ) -> Vec<TransferRow> {
        let mut acc = std::mem::take(&mut self.transfers);
        let mut waiting = BTreeSet::new();
        for (id, x) in std::mem::take(&mut self.transfer_sites) {
            let direction = index.site(id).and_then(|s| s.direction).map(|d| d.as_str().to_owned());
            let key = (index.site_name(id), direction, None, None);
            if host_read_backs.contains(&id) {
                waiting.insert(key.clone());
            }
            add_transfer(&mut acc, key, x);
        }
        let mut rows: Vec<TransferRow> = acc
            .into_iter()
            .map(|(key, x)| {
                let bandwidth_bytes_per_s = if waiting.contains(&key) { None } else { table::rate(x.bytes, x.ns) };
                let link = x.link.efficiency(links);
                let (transfer, direction, src_kind, dst_kind) = key;
                TransferRow {
                    transfer,
                    direction,
                    src_kind,
                    dst_kind,
                    count: x.count,
                    bytes: x.bytes,
                    total_ns: x.ns,
                    bandwidth_bytes_per_s,
                    link_efficiency: link.map(|l| l.0),
                    link_peak_bytes_per_s: link.map(|l| l.1),
                    bracketed: x.bracketed,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.transfer.cmp(&b.transfer)));
        rows
    }

    /// Pageable host memory in copies: the driver stages it through a pinned buffer, which is
    /// slower and makes "async" copies synchronous.
    pub(super) fn pageable_findings(&self) -> Vec<Finding> {
        let acc = &self.copies;
        let mut out = Vec::new();
        for ((direction, pageable), (count, bytes, ns)) in acc {
            if !pageable {
                continue;
            }
            let mut message =
                format!("{count} {direction} copies from or to pageable host memory moved {}", table::bytes(*bytes));
            if let Some(bw) = table::rate(*bytes, *ns) {
                let _ = write!(message, " at {}", table::bandwidth(bw));
            }
            if let Some((_, pinned_bytes, pinned_ns)) = acc.get(&(direction.clone(), false)) {
                if let Some(bw) = table::rate(*pinned_bytes, *pinned_ns) {
                    let _ = write!(message, "; pinned copies in this capture ran at {}", table::bandwidth(bw));
                }
            }
            message.push_str(
                ": pin the host buffer (cudaHostAlloc / cudaHostRegister) for full bandwidth and truly asynchronous copies",
            );
            out.push(Finding { kind: "pageable_copy".into(), message });
        }
        out
    }
}

impl Report {
    pub fn transfers_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "transfer".into(),
            "direction".into(),
            "memory".into(),
            "count".into(),
            u.head("bytes", "B"),
            u.head("total", "ns"),
            u.head("bandwidth", "B/s"),
            u.head("link efficiency", "fraction of peak"),
        ];
        for x in &self.transfers {
            let memory = match (&x.src_kind, &x.dst_kind) {
                (Some(s), Some(d)) => format!("{s} → {d}"),
                _ => "-".into(),
            };
            t.row(vec![
                x.transfer.clone(),
                x.direction.clone().unwrap_or_else(|| "-".into()),
                memory,
                x.count.to_string(),
                u.bytes(x.bytes),
                format!("{}{}", u.bound(x.bracketed, "≤ "), u.ns(x.total_ns)),
                format!("{}{}", u.bound(x.bracketed, "≥ "), u.rate(x.bandwidth_bytes_per_s)),
                u.efficiency(x.link_efficiency),
            ]);
        }
        t
    }
}
