//! GPU memory of instrumented wgpu devices: the runtime's account of the buffers and textures
//! made through each (capture format 9), in logical sizes, as the run's summary states it.

use super::{Finding, Report, Units};
use crate::analysis::Index;
use crate::table::Table;
use gpuspan_capture::{Capture, Held};
use serde::Serialize;

/// One instrumented device's memory: the peak with what held it, and what was live at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryRow {
    pub device: String,
    pub peak_bytes: u64,
    /// When the peak was first reached, from the capture's start.
    pub peak_at_ns: u64,
    /// The largest holders at the peak, largest first: (label or owner, bytes).
    pub peak_by_label: Vec<(String, u64)>,
    pub peak_by_owner: Vec<(String, u64)>,
    /// Live when the run ended.
    pub end_bytes: u64,
    pub end_objects: u64,
    pub end_by_label: Vec<(String, u64)>,
    pub end_by_owner: Vec<(String, u64)>,
    /// Textures wgpu gives no size for (planar formats): not counted.
    pub not_sized: u64,
    /// Changes drawn on the timeline, and those after the runtime's bound (counted, not drawn).
    pub samples: u64,
    pub samples_dropped: u64,
}

fn pairs(held: &[Held]) -> Vec<(String, u64)> {
    held.iter().map(|h| (h.name.clone(), h.bytes)).collect()
}

pub(super) fn rows(capture: &Capture, index: &Index<'_>) -> Vec<MemoryRow> {
    capture
        .memory
        .iter()
        .map(|m| MemoryRow {
            device: index.device_label(Some(m.device)),
            peak_bytes: m.peak_bytes,
            peak_at_ns: m.peak_ns.saturating_sub(capture.header.start_ns),
            peak_by_label: pairs(&m.peak_by_label),
            peak_by_owner: pairs(&m.peak_by_owner),
            end_bytes: m.live_bytes,
            end_objects: m.live_objects,
            end_by_label: pairs(&m.live_by_label),
            end_by_owner: pairs(&m.live_by_owner),
            not_sized: m.not_sized,
            samples: m.samples.len() as u64,
            samples_dropped: m.samples_dropped,
        })
        .collect()
}

/// What the figures leave out: textures not sized, changes not drawn.
pub(super) fn findings(rows: &[MemoryRow]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for r in rows {
        if r.not_sized > 0 {
            findings.push(Finding {
                kind: "memory_not_sized".into(),
                message: format!(
                    "{}: {} textures of a planar format are not in the GPU memory figures (wgpu gives no size for them)",
                    r.device, r.not_sized
                ),
            });
        }
        if r.samples_dropped > 0 {
            findings.push(Finding {
                kind: "memory_samples_dropped".into(),
                message: format!(
                    "{}: {} GPU memory changes after the first {} are counted in the figures but not drawn on the timeline",
                    r.device, r.samples_dropped, r.samples
                ),
            });
        }
    }
    findings
}

/// `label 1.0 MiB, ...` for people, `label=1048576; ...` for scripts.
fn listed(u: Units, entries: &[(String, u64)]) -> String {
    if entries.is_empty() {
        return "-".into();
    }
    let sep = if u.raw { "; " } else { ", " };
    let each =
        entries.iter().map(|(name, b)| if u.raw { format!("{name}={b}") } else { format!("{name} {}", u.bytes(*b)) });
    each.collect::<Vec<_>>().join(sep)
}

impl Report {
    pub fn memory_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "device".into(),
            u.head("peak", "bytes"),
            u.head("peak at", "ns"),
            "peak held by (labels)".into(),
            "peak held by (owners)".into(),
            u.head("end", "bytes"),
            "end objects".into(),
            "end by label".into(),
            "end by owner".into(),
        ];
        for r in &self.memory {
            t.row(vec![
                r.device.clone(),
                u.bytes(r.peak_bytes),
                u.ns(r.peak_at_ns),
                listed(u, &r.peak_by_label),
                listed(u, &r.peak_by_owner),
                u.bytes(r.end_bytes),
                r.end_objects.to_string(),
                listed(u, &r.end_by_label),
                listed(u, &r.end_by_owner),
            ]);
        }
        t
    }
}
