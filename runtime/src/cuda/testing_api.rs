//! What `gpuspan-testing` lends out of the CUDA backend (through `crate::__testing`): CUPTI
//! replay, the attribution's counts, whether CUDA timing started. Not a program's API; without
//! the `enabled` feature each function says what it returns then.

pub use imp::*;

/// Replaying captured CUPTI buffers (`GPUSPAN_CUPTI_DUMP`) through the decoder and the
/// attribution, as gpuspan's fixture tests do.
pub mod replay {
    pub use crate::cuda::counts::Counts;
    // Without `enabled` only the counts' type, for `cupti_counts`: the decoder and the
    // attribution are the instrumented build's.
    #[cfg(feature = "enabled")]
    pub use crate::cuda::imp::replay::*;
}

/// The instrumented build's answers.
#[cfg(feature = "enabled")]
mod imp {
    use super::replay::Counts;
    use crate::cuda::{cupti, imp, Timing};

    /// The timing source, if it was chosen already (`None` before the first CUDA call): tests
    /// use it to see that nothing started CUDA behind their back.
    pub fn timing() -> Option<Timing> {
        imp::chosen()
    }

    /// What CUPTI attribution has done so far (`None` unless CUPTI times this process).
    pub fn cupti_counts() -> Option<Counts> {
        cupti::counts()
    }

    /// How often a thread's CUDA scopes got more than a segment (256 scopes) ahead of the
    /// resolver: segments its queue allocated past the first (none is ever lost; decision 42).
    pub fn cupti_queue_grown() -> u64 {
        cupti::queue_grown()
    }

    /// Whether CUDA scopes read `CLOCK_REALTIME` for their windows, having found it to be
    /// CUPTI's clock (decision 43), rather than `cuptiGetTimestamp`.
    pub fn cupti_windows_read_realtime() -> bool {
        cupti::reads_realtime()
    }

    /// Makes bare scopes mark CUPTI windows without CUPTI or a device, so that the instructions
    /// of that path can be counted on a machine without a GPU (`scripts/count-window`): each
    /// scope reads `CLOCK_REALTIME` at both ends and queues its end as under CUPTI. Each call
    /// also drops what the queues hold (nothing resolves it), returning how many; `None`, doing
    /// nothing, once CUDA timing was chosen.
    pub fn simulate_cupti_windows() -> Option<usize> {
        imp::simulate_cupti_windows()
    }

    /// CUPTI's clock minus gpuspan's host clock and the error of that measurement, in ns; CUPTI
    /// timestamps are mapped onto the host clock with it (`None` unless CUPTI times this
    /// process).
    pub fn cupti_clock_offset() -> Option<(i64, u64)> {
        (imp::chosen()? == Timing::Cupti).then(cupti::clock::offset)
    }

    /// Adds a line to the CUPTI dump being written (`GPUSPAN_CUPTI_DUMP=<path>`), to mark what a
    /// capturing program was doing. Does nothing otherwise.
    pub fn dump_note(text: impl Into<String>) {
        cupti::note(text.into());
    }
}

/// Without instrumentation CUDA is never timed: nothing started, nothing counted.
#[cfg(not(feature = "enabled"))]
mod imp {
    use super::replay::Counts;
    use crate::cuda::Timing;

    /// Always `None`: nothing times CUDA.
    pub fn timing() -> Option<Timing> {
        None
    }

    /// Always `None`.
    pub fn cupti_counts() -> Option<Counts> {
        None
    }

    /// Always 0.
    pub fn cupti_queue_grown() -> u64 {
        0
    }

    /// Always `false`.
    pub fn cupti_windows_read_realtime() -> bool {
        false
    }

    /// Always `None`: there are no windows to simulate.
    pub fn simulate_cupti_windows() -> Option<usize> {
        None
    }

    /// Always `None`.
    pub fn cupti_clock_offset() -> Option<(i64, u64)> {
        None
    }

    /// Does nothing.
    pub fn dump_note(text: impl Into<String>) {
        let _ = text.into();
    }
}
