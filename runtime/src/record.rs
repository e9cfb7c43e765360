//! What a resolved measurement is: one record per call of an annotated function, with the
//! GPU's own timing when a GPU source exists, and the activities (kernels, copies) inside it.

use crate::site::{Direction, Site};
use std::borrow::Cow;
use std::sync::Arc;

/// Where a duration came from (`gpu.timing.source`). Every exported duration says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimingSource {
    /// GPU timestamp queries (wgpu).
    GpuTimestamp,
    /// CUPTI activity records.
    Cupti,
    /// CUDA events recorded on the scope's stream.
    CudaEvent,
    /// The host clock around the call: no GPU source was available.
    Host,
}

impl TimingSource {
    pub const ALL: [TimingSource; 4] = [Self::GpuTimestamp, Self::Cupti, Self::CudaEvent, Self::Host];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::GpuTimestamp => "gpu_timestamp",
            Self::Cupti => "cupti",
            Self::CudaEvent => "cuda_event",
            Self::Host => "host",
        }
    }

    pub(crate) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A closed interval on the host clock, in Unix-epoch nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Interval {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Interval {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The device a measurement ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLabel {
    pub id: u32,
    pub name: Arc<str>,
}

/// GPU-side timing of a call.
#[derive(Debug, Clone)]
pub struct GpuTiming {
    /// From the first GPU work's start to the last one's end, mapped onto the host clock.
    pub interval: Interval,
    /// Time the GPU spent on the call's work (≤ the interval when work had gaps).
    pub busy_ns: u64,
    pub source: TimingSource,
    /// Bound on the error of mapping the GPU clock onto the host clock (0 when none is needed).
    pub clock_error_ns: u64,
    /// Measured by timestamps submitted before and after the call's own submissions: an upper
    /// bound that also holds submission latency while the GPU was idle.
    pub bracketed: bool,
    pub device: Option<DeviceLabel>,
}

/// Kind of memory on either side of a copy (`gpu_transfer.src_kind` / `dst_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    Pageable,
    Pinned,
    Device,
    Managed,
    Array,
    Unknown,
}

impl MemoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pageable => "pageable",
            Self::Pinned => "pinned",
            Self::Device => "device",
            Self::Managed => "managed",
            Self::Array => "array",
            Self::Unknown => "unknown",
        }
    }
}

/// Launch geometry and resources of one kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelGeometry {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers_per_thread: u32,
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
}

/// What one piece of GPU work inside a call was.
#[derive(Debug, Clone)]
pub enum ActivityKind {
    Kernel(KernelGeometry),
    Copy { bytes: u64, direction: Option<Direction>, src: MemoryKind, dst: MemoryKind },
    Set { bytes: u64 },
}

/// One piece of GPU work (a kernel, a copy) attributed to a call.
#[derive(Debug, Clone)]
pub struct Activity {
    pub name: Cow<'static, str>,
    pub interval: Interval,
    pub kind: ActivityKind,
    pub stream: Option<u64>,
    pub device: Option<DeviceLabel>,
}

/// One call of an annotated function, resolved.
#[derive(Debug, Clone)]
pub struct Record {
    pub site: &'static Site,
    /// Unique within the process; also the CUPTI external correlation id.
    pub scope_id: u64,
    /// gpuspan's small index of the calling thread (timeline track).
    pub thread: u32,
    /// The call on the host: from entering the function to leaving it.
    pub host: Interval,
    /// The call returned `Err` or panicked.
    pub error: bool,
    /// Bytes moved, for transfers.
    pub bytes: Option<u64>,
    pub gpu: Option<GpuTiming>,
    /// How far the GPU interval and activities were moved forward because the clock mapping
    /// placed them before the call began (0: not moved). `gpu.clock_corrected_ns` in exports.
    pub clock_corrected_ns: u64,
    pub activities: Vec<Activity>,
    /// Memory before and after the call, for sites with `track_memory`.
    pub memory: Option<(crate::memory::MemoryMark, crate::memory::MemoryMark)>,
    /// The OpenTelemetry context of the application's innermost exported span when the call
    /// began: the parent of this record's spans (`None`: the process's parent, if any).
    #[cfg(feature = "otlp")]
    pub parent: Option<opentelemetry::Context>,
}

/// A value of a record attribute, for the exporters.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(Cow<'static, str>),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl Record {
    /// A record of a call with host timing only, no error, no bytes: backends and tests fill in
    /// the rest.
    pub fn new(site: &'static Site, scope_id: u64, thread: u32, host: Interval) -> Record {
        Record {
            site,
            scope_id,
            thread,
            host,
            error: false,
            bytes: None,
            gpu: None,
            clock_corrected_ns: 0,
            activities: Vec::new(),
            memory: None,
            #[cfg(feature = "otlp")]
            parent: None,
        }
    }

    /// The duration this call is judged by: GPU busy time where a GPU source exists, else the
    /// host duration.
    pub fn duration_ns(&self) -> u64 {
        self.gpu.as_ref().map_or_else(|| self.host.duration_ns(), |g| g.busy_ns)
    }

    pub fn source(&self) -> TimingSource {
        self.gpu.as_ref().map_or(TimingSource::Host, |g| g.source)
    }

    /// The backend that timed this call: the site's, except that a bare site's call whose CUDA
    /// work CUPTI attributed to it (or that `gpuspan::cuda::attach` gave a stream) is CUDA's.
    pub fn backend(&self) -> crate::site::Backend {
        use crate::site::Backend;
        match self.source() {
            TimingSource::Cupti | TimingSource::CudaEvent => Backend::Cuda,
            TimingSource::GpuTimestamp => Backend::Wgpu,
            TimingSource::Host => self.site.desc.backend,
        }
    }

    /// The interval to draw: the GPU's when there is one, else the host's.
    pub fn interval(&self) -> Interval {
        self.gpu.as_ref().map_or(self.host, |g| g.interval)
    }

    /// Bandwidth in bytes per second over the measured duration, for transfers.
    pub fn bandwidth_bytes_per_s(&self) -> Option<f64> {
        let bytes = self.bytes?;
        let d = self.duration_ns();
        (d > 0).then(|| bytes as f64 * 1e9 / d as f64)
    }

    /// The span attributes of this record, with the names of DESIGN.md.
    pub fn attributes(&self) -> Vec<(&'static str, Value)> {
        use Value::*;
        let desc = &self.site.desc;
        let us = |ns: u64| F64(ns as f64 / 1000.0);
        let mut a = vec![
            ("gpu.backend", Str(self.backend().as_str().into())),
            ("gpu.timing.source", Str(self.source().as_str().into())),
            ("code.function.name", Str(self.site.qualified_function().into())),
            ("code.file.path", Str(desc.file.into())),
            ("code.line.number", I64(desc.line.into())),
            ("gpu.host_duration_us", us(self.host.duration_ns())),
        ];
        match desc.kind {
            crate::SiteKind::Kernel => {
                a.push(("gpu.kernel", Str(desc.name.into())));
                a.push(("gpu.duration_us", us(self.duration_ns())));
            }
            crate::SiteKind::Transfer => {
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
            }
        }
        if let Some(g) = &self.gpu {
            a.push(("gpu.clock_error_us", us(g.clock_error_ns)));
            if g.bracketed {
                a.push(("gpu.timing.bracketed", Bool(true)));
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
        #[cfg(feature = "nvml")]
        a.extend(crate::monitor::record_attributes(self));
        a
    }
}
