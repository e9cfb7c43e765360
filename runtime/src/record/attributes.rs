//! The one attribute mapping: what every sink says about a call and about each piece of GPU
//! work inside it, with the names of DESIGN.md. The timeline's events and the OTLP spans carry
//! exactly these (the spans add `gpuspan.role`); `export/otlp/imp/spans.rs` has the test that holds
//! the two to it.

use super::{Activity, ActivityKind, Record};
use crate::site::{Site, SiteKind};
use std::borrow::Cow;

/// A value of a record attribute, for the exporters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// Text.
    Str(Cow<'static, str>),
    /// A whole number.
    I64(i64),
    /// A real number.
    F64(f64),
    /// A flag.
    Bool(bool),
    /// Whole numbers (a kernel's grid and block dimensions).
    I64Array(Vec<i64>),
}

impl Record {
    /// The attributes of this record: what its timeline events and its spans carry.
    pub fn attributes(&self) -> Vec<(&'static str, Value)> {
        use Value::*;
        let desc = &self.site.desc;
        let us = |ns: u64| F64(ns as f64 / 1000.0);
        let mut a = vec![
            ("gpu.backend", Str(self.backend().as_str().into())),
            ("gpu.timing.source", Str(self.source().as_str().into())),
        ];
        // A selected span is no function: where it was made is its file and line only.
        if let Some(function) = self.site.code_function() {
            a.push(("code.function.name", Str(function.into())));
        }
        a.extend([
            ("code.file.path", Str(desc.file.into())),
            ("code.line.number", I64(desc.line.into())),
            ("gpu.host_duration_us", us(self.host.duration_ns())),
        ]);
        if let Some(how) = self.attributed {
            a.push(("gpuspan.attributed", Str(how.as_str().into())));
        }
        if self.site.is_span() {
            a.push(("gpuspan.kind", Str("span".into())));
        }
        // A selected span's fields; the spans a `during several spans` record was made during.
        a.extend(self.fields.iter().cloned());
        match desc.kind {
            SiteKind::Transfer => {
                a.push(("gpu_transfer.name", Str(desc.name.into())));
                a.push(("gpu_transfer.duration_us", us(self.duration_ns())));
                if let Some(d) = desc.direction {
                    a.push(("gpu_transfer.direction", Str(d.as_str().into())));
                }
                if let Some(b) = self.bytes {
                    a.push(("gpu_transfer.bytes", I64(b as i64)));
                }
                if let Some(bw) = self.bandwidth_bytes_per_s() {
                    a.push(("gpu_transfer.bandwidth_bytes_per_s", F64(bw)));
                }
                if let Some(p) = &self.read_back {
                    a.push(("gpu_transfer.wait_us", us(p.wait.duration_ns())));
                    a.push(("gpu_transfer.copy_out_us", us(p.copy_out.duration_ns())));
                    if let (Some(b), d @ 1..) = (self.bytes, p.copy_out.duration_ns()) {
                        a.push(("gpu_transfer.copy_out_bandwidth_bytes_per_s", F64(b as f64 * 1e9 / d as f64)));
                    }
                }
            }
            // A kernel, or a selected span (a kernel site in the runtime).
            _ => {
                a.push(("gpu.kernel", Str(desc.name.into())));
                a.push(("gpu.duration_us", us(self.duration_ns())));
            }
        }
        if let Some(g) = &self.gpu {
            a.push(("gpu.clock_error_us", us(g.clock_error_ns)));
            if g.bracketed {
                a.push(("gpu.timing.bracketed", Bool(true)));
                let end = if g.bracket_at_exit { "exit" } else { "last_submit" };
                a.push(("gpu.timing.bracket_end", Str(end.into())));
            }
            if self.clock_corrected_ns > 0 {
                a.push(("gpu.clock_corrected_ns", I64(self.clock_corrected_ns as i64)));
            }
            if g.interval.duration_ns() > g.busy_ns {
                a.push(("gpu.span_us", us(g.interval.duration_ns())));
            }
            if let Some(d) = &g.device {
                a.push(("gpu.device.id", I64(d.id.into())));
                a.push(("gpu.device.name", Str(d.name.to_string().into())));
            }
        }
        if !self.activities.is_empty() {
            a.push(("gpu.activity_count", I64(self.activities.len() as i64)));
        }
        if let Some((before, after)) = &self.memory {
            let mut mem = |name: [&'static str; 3], b: Option<u64>, a2: Option<u64>| {
                if let (Some(b), Some(x)) = (b, a2) {
                    a.push((name[0], I64(b as i64)));
                    a.push((name[1], I64(x as i64)));
                    a.push((name[2], I64(x as i64 - b as i64)));
                }
            };
            mem(
                ["gpu.memory.used_before_bytes", "gpu.memory.used_after_bytes", "gpu.memory.used_delta_bytes"],
                before.device_used_bytes,
                after.device_used_bytes,
            );
            mem(
                ["process.memory.rss_before_bytes", "process.memory.rss_after_bytes", "process.memory.rss_delta_bytes"],
                before.process_rss_bytes,
                after.process_rss_bytes,
            );
        }
        if self.error {
            a.push(("error", Bool(true)));
        }
        // The sampling verdict, so that a reader sees why this call was kept.
        let threshold = threshold_ns(self.site);
        a.push(("gpu.threshold_us", us(threshold)));
        a.push(("gpu.is_slow", Bool(self.duration_ns() >= threshold)));
        a.extend(self.extra.iter().cloned());
        a
    }
}

impl Activity {
    /// The attributes of this kernel, copy or set inside `record`: what its timeline event and
    /// its span carry.
    pub fn attributes(&self, record: &Record) -> Vec<(&'static str, Value)> {
        use Value::*;
        let us = |ns: u64| F64(ns as f64 / 1000.0);
        let mut a = vec![
            ("gpu.backend", Str(record.backend().as_str().into())),
            ("gpu.timing.source", Str(record.source().as_str().into())),
        ];
        let d = self.interval.duration_ns();
        match &self.kind {
            ActivityKind::Kernel(g) => {
                let dims = |d: [u32; 3]| I64Array(d.iter().map(|x| i64::from(*x)).collect());
                a.push(("gpu.kernel", Str(self.name.clone())));
                a.push(("gpu.duration_us", us(d)));
                a.push(("gpu.cuda.grid_dim", dims(g.grid)));
                a.push(("gpu.cuda.block_dim", dims(g.block)));
                a.push(("gpu.cuda.registers_per_thread", I64(g.registers_per_thread.into())));
                let shared = i64::from(g.static_shared_bytes) + i64::from(g.dynamic_shared_bytes);
                a.push(("gpu.cuda.shared_mem_bytes", I64(shared)));
            }
            ActivityKind::Copy { bytes, direction, src, dst } => {
                a.push(("gpu_transfer.bytes", I64(*bytes as i64)));
                a.push(("gpu_transfer.duration_us", us(d)));
                if d > 0 {
                    a.push(("gpu_transfer.bandwidth_bytes_per_s", F64(*bytes as f64 * 1e9 / d as f64)));
                }
                if let Some(dir) = direction {
                    a.push(("gpu_transfer.direction", Str(dir.as_str().into())));
                }
                a.push(("gpu_transfer.src_kind", Str(src.as_str().into())));
                a.push(("gpu_transfer.dst_kind", Str(dst.as_str().into())));
            }
            ActivityKind::Set { bytes } => {
                a.push(("gpu_transfer.bytes", I64(*bytes as i64)));
                a.push(("gpu_transfer.duration_us", us(d)));
            }
        }
        if let Some(s) = self.stream {
            a.push(("gpu.cuda.stream_id", I64(s as i64)));
        }
        let device = self.device.as_ref().or_else(|| record.gpu.as_ref().and_then(|g| g.device.as_ref()));
        if let Some(dev) = device {
            a.push(("gpu.device.id", I64(dev.id.into())));
            a.push(("gpu.device.name", Str(dev.name.to_string().into())));
        }
        if let Some(src) = &self.src_device {
            a.push(("gpu_transfer.src_device.id", I64(src.id.into())));
        }
        if let Some(dst) = &self.dst_device {
            a.push(("gpu_transfer.dst_device.id", I64(dst.id.into())));
        }
        a
    }
}

/// The threshold in force for `site`, in ns. Without the `enabled` feature there is no global
/// setting: the site's own, else the default.
fn threshold_ns(site: &Site) -> u64 {
    #[cfg(feature = "enabled")]
    {
        crate::sampling::threshold_ns(site)
    }
    #[cfg(not(feature = "enabled"))]
    {
        site.desc.threshold_us.unwrap_or(100).saturating_mul(1000)
    }
}
