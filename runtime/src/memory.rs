//! Memory around a call, for sites annotated with `track_memory`: how much device memory was in
//! use and how large the process's resident set was, just before and just after the call.
//!
//! Opt-in because a device reading is an NVML or ROCm SMI call (tens of µs: docs/monitor.md), taken
//! outside the call's host interval so it does not inflate the timing.

/// One reading. A field is `None` where it cannot be read: RSS off Linux, device memory without
/// the `nvml` feature, without a device library (NVML, ROCm SMI) or before `gpuspan::init()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryMark {
    /// The process's resident set (`VmRSS`), Linux only.
    pub process_rss_bytes: Option<u64>,
    /// Summed over every GPU NVML and ROCm SMI see.
    pub device_used_bytes: Option<u64>,
}

/// Reads the RSS now, beside `device_used_bytes`, which the caller read from the reader a leaf
/// registered (the device monitor: a library call per GPU): handed in, as a layer is handed
/// its context, so that this file names neither the collector nor the leaves.
#[cfg(feature = "enabled")]
pub(crate) fn mark(device_used_bytes: Option<u64>) -> MemoryMark {
    MemoryMark { process_rss_bytes: rss_bytes(), device_used_bytes }
}

/// `VmRSS` from /proc/self/status (kB there), so no page size has to be assumed.
#[cfg(feature = "enabled")]
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(all(test, feature = "enabled"))]
mod tests {
    #[test]
    fn rss_is_read_on_linux_and_grows_with_a_touched_allocation() {
        if !cfg!(target_os = "linux") {
            return;
        }
        // The process's RSS: the other tests' threads allocate and free meanwhile, so the
        // allocation is large against what they could give back between the two readings (a
        // 64 MiB one against a 32 MiB margin failed once on a loaded 2-core box).
        let before = super::mark(None).process_rss_bytes.expect("VmRSS on Linux");
        let v = vec![1u8; 512 << 20];
        let after = super::mark(None).process_rss_bytes.expect("VmRSS on Linux");
        std::hint::black_box(&v);
        assert!(after >= before + (384 << 20), "{before} -> {after}");
    }
}
