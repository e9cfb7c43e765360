//! What a resolved measurement is: one record per call of an annotated function, with the
//! GPU's own timing when a GPU source exists, and the activities (kernels, copies) inside it.
//!
//! Lent to `gpuspan-testing` (through `__testing`), for `Capture`: a program sees records as
//! spans, timeline events and aggregates. The data types are `#[non_exhaustive]` (a backend may learn more);
//! tests build them with their constructors and set the public fields. The enums and
//! `Interval` are the capture format's vocabulary, declared once in `gpuspan-capture` and
//! re-exported here (decision 69); what only the runtime holds (site references, device labels,
//! attributes, read-back phases) is declared here.

mod attributes;
// The attributes and bit sets only the instrumented build uses.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub(crate) use imp::{attributed_of_bits, Bits, DURING_SPANS, OPEN_SPAN};

pub use attributes::Value;

use crate::site::Site;
use std::borrow::Cow;
use std::sync::Arc;

pub use gpuspan_capture::{ActivityKind, Interval};
pub use gpuspan_capture::{Attributed, TimingSource};
#[allow(unused_imports)] // named by the backends that see kernels and copies, which may all be compiled out
pub use gpuspan_capture::{KernelGeometry, MemoryKind};

/// The device a measurement ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceLabel {
    /// The backend's index: the CUDA ordinal, or the order of `gpuspan::wgpu::register` calls.
    pub id: u32,
    /// The device's name as its backend reports it (`gpu.device.name`).
    pub name: Arc<str>,
}

impl DeviceLabel {
    /// A device with this index and name.
    pub fn new(id: u32, name: impl Into<Arc<str>>) -> Self {
        DeviceLabel { id, name: name.into() }
    }
}

/// GPU-side timing of a call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GpuTiming {
    /// From the first GPU work's start to the last one's end, mapped onto the host clock.
    pub interval: Interval,
    /// Time the GPU spent on the call's work (≤ the interval when work had gaps).
    pub busy_ns: u64,
    /// What measured it.
    pub source: TimingSource,
    /// Bound on the error of mapping the GPU clock onto the host clock (0 when none is needed),
    /// as the mapping stated it: the causality check never changes it, so a record whose
    /// `clock_corrected_ns` exceeds it was placed beyond its bound.
    pub clock_error_ns: u64,
    /// Measured by timestamps submitted before and after the call's own submissions: an upper
    /// bound of the GPU's busy time that also holds submission latency and the gaps between the
    /// call's submissions while the GPU was idle.
    pub bracketed: bool,
    /// A bracket that closed at the function's exit rather than with its last submission,
    /// because gpuspan saw none of the call's submissions (they were in a callee, a closure or
    /// a macro): it also holds the host work after the last submission, such as a read-back's
    /// map, poll and copy-out. `false` for a bracket that closed with the last submission.
    pub bracket_at_exit: bool,
    /// The device, where the backend knows it.
    pub device: Option<DeviceLabel>,
}

impl GpuTiming {
    /// Timing over `interval` by `source`, busy for all of it, with no clock error, no bracket
    /// and no device: set the fields that differ.
    pub fn new(interval: Interval, source: TimingSource) -> Self {
        GpuTiming {
            interval,
            busy_ns: interval.duration_ns(),
            source,
            clock_error_ns: 0,
            bracketed: false,
            bracket_at_exit: false,
            device: None,
        }
    }
}

/// One piece of GPU work (a kernel, a copy) attributed to a call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Activity {
    /// The kernel's (demangled) name, or the copy's kind (`memcpy HtoD`).
    pub name: Cow<'static, str>,
    /// When the GPU ran it, on the host clock.
    pub interval: Interval,
    /// What it was.
    pub kind: ActivityKind,
    /// The stream it ran on (`gpu.cuda.stream_id`).
    pub stream: Option<u64>,
    /// The device it ran on, where it differs from the call's or the call has none.
    pub device: Option<DeviceLabel>,
    /// For a copy between two devices (or two contexts of one device): the device copied from
    /// (`gpu_transfer.src_device.id`). `device` is the one that ran the copy.
    pub src_device: Option<DeviceLabel>,
    /// For such a copy: the device copied to (`gpu_transfer.dst_device.id`).
    pub dst_device: Option<DeviceLabel>,
}

/// The name of a copy between two GPUs that CUPTI reported as two halves (a "DtoH" on the
/// source, an "HtoD" on the destination, device memory at every end): the driver staged it
/// through host memory, and the halves' times are not the transfer's (docs/multi-gpu.md).
pub const STAGED_PEER_COPY: &str = "memcpy PtoP (staged through host)";

impl Activity {
    /// A copy between GPUs made of CUPTI's two halves ([`STAGED_PEER_COPY`]): no bandwidth is
    /// derived from its time.
    pub fn is_staged_peer_copy(&self) -> bool {
        self.name == STAGED_PEER_COPY
    }

    /// `name` over `interval`, on no particular stream or device.
    pub fn new(name: impl Into<Cow<'static, str>>, interval: Interval, kind: ActivityKind) -> Self {
        Activity { name: name.into(), interval, kind, stream: None, device: None, src_device: None, dst_device: None }
    }
}

/// The host's part of a read-back timed by `gpuspan::wgpu::read_buffer`; the GPU copy is the
/// record's GPU timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadBackPhases {
    /// Waiting for the mapping: for the copy and everything queued before it.
    pub wait: Interval,
    /// Copying out of the mapped buffer (the caller's closure).
    pub copy_out: Interval,
}

/// One call of an annotated function, resolved.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Record {
    /// The annotated function.
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
    /// The GPU's timing, where a GPU source measured the call.
    pub gpu: Option<GpuTiming>,
    /// How far the GPU interval and activities were moved forward because the clock mapping
    /// placed them before the call began (0: not moved). `gpu.clock_corrected_ns` in exports.
    pub clock_corrected_ns: u64,
    /// The kernels and copies inside the call (CUPTI).
    pub activities: Vec<Activity>,
    /// For a `read_buffer` read-back: the host's wait and copy-out.
    pub read_back: Option<ReadBackPhases>,
    /// Memory before and after the call, for sites with `track_memory`.
    pub memory: Option<(crate::memory::MemoryMark, crate::memory::MemoryMark)>,
    /// What the leaves (the device monitor) said about the call when it was submitted, so
    /// that every sink sees the same values.
    pub(crate) extra: Vec<(&'static str, Value)>,
    /// The trace context of the application's innermost exported span when the call began:
    /// the parent of this record's spans (`None`: the process's parent, if any). Nothing
    /// without an exporter that takes one (`crate::parent`).
    #[cfg(feature = "enabled")]
    pub(crate) parent: crate::parent::Parent,
    /// The innermost application `tracing` span the call was made in, with its enclosing ones;
    /// taken only while a capture file wants it (`crate::spans`).
    #[cfg(feature = "enabled")]
    pub(crate) spans: crate::spans::state::Chain,
    /// A selected application span's recorded fields (`span_scopes.rs`), as attributes.
    pub(crate) fields: Fields,
    /// How its GPU work was found to be its own, where that was a question (CUPTI's activities);
    /// `None` for a call timed by its own queries, bracket or the host.
    pub attributed: Option<Attributed>,
    /// Dropped by the backend if no GPU work came (a span's CUDA part when its wgpu part
    /// already timed it: `backends.rs`). Read only by a backend's attribution (CUPTI's), so
    /// unread in builds without it; the core names no backend (`backends.rs`'s test).
    #[allow(dead_code)]
    pub(crate) only_if_gpu: bool,
}

/// Attributes named by the program (a selected span's fields).
pub(crate) type Fields = Vec<(&'static str, Value)>;

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
            read_back: None,
            memory: None,
            extra: Vec::new(),
            #[cfg(feature = "enabled")]
            parent: Default::default(),
            #[cfg(feature = "enabled")]
            spans: None,
            fields: Vec::new(),
            attributed: None,
            only_if_gpu: false,
        }
    }

    /// The duration this call is judged by: GPU busy time where a GPU source exists, else the
    /// host duration.
    pub fn duration_ns(&self) -> u64 {
        self.gpu.as_ref().map_or_else(|| self.host.duration_ns(), |g| g.busy_ns)
    }

    /// Where [`Record::duration_ns`] came from.
    pub fn source(&self) -> TimingSource {
        self.gpu.as_ref().map_or(TimingSource::Host, |g| g.source)
    }

    /// The backend that timed this call: the site's, except that a bare site's call whose CUDA
    /// work CUPTI attributed to it (or that `gpuspan::cuda::attach` gave a stream) is CUDA's.
    pub fn backend(&self) -> crate::site::Backend {
        match self.source().backend() {
            Some(gpu) => gpu,
            // A selected span is no backend's by declaration: its backend is the one that timed it.
            None if self.site.is_span() => crate::site::Backend::Host,
            None => self.site.desc.backend,
        }
    }

    /// The interval to draw: the GPU's when there is one, else the host's.
    pub fn interval(&self) -> Interval {
        self.gpu.as_ref().map_or(self.host, |g| g.interval)
    }

    /// Bandwidth in bytes per second over the measured duration, for transfers. None for a
    /// read-back timed on the host: its host interval is mostly waiting for the GPU work queued
    /// before it, not moving bytes (`gpuspan::wgpu::read_buffer` times its phases apart). None
    /// for a queue bracket too: its duration is an upper bound, so bytes over it would pass a
    /// lower bound off as the rate (decision 26).
    pub fn bandwidth_bytes_per_s(&self) -> Option<f64> {
        if self.source() == TimingSource::Host && self.site.desc.direction == Some(crate::site::Direction::GpuToCpu) {
            return None;
        }
        if self.gpu.as_ref().is_some_and(|g| g.bracketed) {
            return None;
        }
        // A failed call moved nothing we can count; a staged peer copy's records do not time it.
        if self.error || self.activities.iter().any(Activity::is_staged_peer_copy) {
            return None;
        }
        let bytes = self.bytes?;
        let d = self.duration_ns();
        (d > 0).then(|| bytes as f64 * 1e9 / d as f64)
    }
}
