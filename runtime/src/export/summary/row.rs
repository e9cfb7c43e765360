//! One row of the summary: a site's aggregates when the summary was taken, and its labels. Apart
//! from `summary.rs`, which reads the process's collector, so that the leaves' summary sections
//! (`hooks.rs`) name a type that imports nothing above the collector.

use crate::record::TimingSource;
use crate::site::{Site, SiteKind};

/// Aggregates of one site at the time the summary was taken.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SiteSummary {
    /// The annotated function.
    pub site: &'static Site,
    /// Calls finished.
    pub calls: u64,
    /// Calls that returned `Err` or panicked.
    pub errors: u64,
    /// Sum of the calls' durations (GPU time where measured, else host time).
    pub total_ns: u64,
    /// Shortest call.
    pub min_ns: u64,
    /// Median call (from a histogram: within a few percent).
    pub p50_ns: u64,
    /// 99th percentile call (from the same histogram).
    pub p99_ns: u64,
    /// Longest call.
    pub max_ns: u64,
    /// Sum of the calls' host-side durations.
    pub host_total_ns: u64,
    /// Bytes moved, summed over the calls of a transfer.
    pub bytes: u64,
    /// Where the calls' times came from (more than one when a fallback was needed).
    pub sources: Vec<TimingSource>,
    /// How the calls' GPU work was found to be theirs, where that was a question (CUPTI):
    /// launched on a thread inside the call (`thread`), or on one outside every scope while the
    /// selected span was entered elsewhere (`time`).
    pub attributed: Option<crate::record::Attributed>,
    /// Some calls were timed by bracketing the queue: their GPU time is an upper bound.
    pub bracketed: bool,
    /// Some of those brackets closed at the function's exit, not with the call's last
    /// submission: they also hold the host work after it (a read-back's wait and copy-out).
    pub bracket_at_exit: bool,
    /// `track_memory` sites: the largest growth of device memory / process RSS over one call.
    pub device_delta_max_bytes: Option<i64>,
    /// The largest growth of the process's resident set over one call.
    pub rss_delta_max_bytes: Option<i64>,
}

impl SiteSummary {
    /// Bytes per second over the summed duration, for transfers that moved bytes. None for a
    /// read-back with host-timed calls: their host time is mostly waiting for the GPU. None for
    /// a bracketed site: its durations are upper bounds (decision 26).
    pub fn bandwidth_bytes_per_s(&self) -> Option<f64> {
        // Only a transfer's own time makes a rate of its bytes: a kernel site's bytes are
        // copies beside its kernels (`gpuspan report` applies the same rule).
        if self.site.desc.kind != SiteKind::Transfer {
            return None;
        }
        let read_back = self.site.desc.direction == Some(crate::site::Direction::GpuToCpu);
        if self.bracketed || (read_back && self.sources.contains(&TimingSource::Host)) {
            return None;
        }
        (self.bytes > 0 && self.total_ns > 0).then(|| self.bytes as f64 * 1e9 / self.total_ns as f64)
    }

    /// The site's backend as declared, except for a bare site (no GPU resource in its
    /// signature) some of whose calls were GPU-timed: `cuda (bare)` where CUDA timing found its
    /// work, `wgpu (bare)` where `gpuspan::wgpu::attach` timed it. `gpuspan report` labels a
    /// site by the same rule.
    /// A selected span's is the backend(s) that timed its records (`host` where none did): with
    /// both compiled in, a span takes whichever its program used (decision 55).
    pub fn backend_label(&self) -> &'static str {
        let cuda = self.sources.iter().any(|s| matches!(s, TimingSource::Cupti | TimingSource::CudaEvent));
        let wgpu = self.sources.iter().any(|s| matches!(s, TimingSource::GpuTimestamp | TimingSource::GpuPasses));
        if self.site.is_span() {
            return match (cuda, wgpu) {
                (true, true) => "wgpu+cuda",
                (true, false) => "cuda",
                (false, true) => "wgpu",
                (false, false) => "host",
            };
        }
        match (self.site.desc.backend, cuda, wgpu) {
            (crate::site::Backend::Host, true, _) => "cuda (bare)",
            (crate::site::Backend::Host, false, true) => "wgpu (bare)",
            (declared, ..) => declared.as_str(),
        }
    }
}
