//! CUPTI's clock against gpuspan's host clock: both count Unix-epoch nanoseconds, from different
//! sources, so the offset between them is measured and applied to every record.

use cudarc::cupti::sys::{self as sys, CUptiResult};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// CUPTI's CPU clock minus gpuspan's host clock, and the bound on that measurement.
static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
static CLOCK_ERROR: AtomicU64 = AtomicU64::new(0);

/// Compares CUPTI's clock (which its records use) with gpuspan's host clock: both count
/// Unix-epoch nanoseconds, but from different clocks that drift apart (wall clock versus
/// monotonic), so the offset is measured at start and every second after.
pub(super) fn measure() {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..5 {
        let mut c = 0u64;
        let h0 = crate::clock::now_ns();
        // SAFETY: plain out-parameter.
        let ok = unsafe { sys::cuptiGetTimestamp(&mut c) } == CUptiResult::CUPTI_SUCCESS;
        let h1 = crate::clock::now_ns();
        if !ok {
            return;
        }
        let width = h1 - h0;
        let offset = c as i64 - (h0 + width / 2) as i64;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, offset));
        }
    }
    if let Some((width, offset)) = best {
        CLOCK_OFFSET.store(offset, Ordering::Relaxed);
        CLOCK_ERROR.store(width.div_ceil(2), Ordering::Relaxed);
    }
}

/// The last measured CUPTI-minus-host clock offset and its error bound, in ns.
pub(crate) fn offset() -> (i64, u64) {
    (CLOCK_OFFSET.load(Ordering::Relaxed), CLOCK_ERROR.load(Ordering::Relaxed))
}
