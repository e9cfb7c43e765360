//! What times CUDA sites, and why a better source is not used: plain data, the same file in the
//! build without the `enabled` feature so that matches on them compile either way.

/// What times CUDA sites in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timing {
    /// CUPTI activity records: every kernel, copy and set inside the call, with GPU timestamps.
    Cupti,
    /// CUDA events around the call on its stream.
    CudaEvent,
    /// No usable CUDA device: the host clock.
    Host,
}

/// Why a better timing source is not used. Each message says what to do about it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// libcuda could not be loaded.
    #[error(
        "no CUDA driver found: CUDA sites are timed on the host (install the NVIDIA driver, or put the \
         directory of libcuda.so on LD_LIBRARY_PATH)"
    )]
    NoDriver,
    /// The driver loaded but reports no usable device (what it said).
    #[error("no CUDA device found ({0}): CUDA sites are timed on the host")]
    NoDevice(String),
    /// libcupti could not be loaded.
    #[error(
        "CUPTI (libcupti) not found: CUDA sites are timed with CUDA events on their stream; for per-kernel \
         records put CUDA's library directory (e.g. /usr/local/cuda/targets/x86_64-linux/lib) on LD_LIBRARY_PATH"
    )]
    NoCupti,
    /// The libcupti found lacks an entry point gpuspan calls.
    #[error(
        "{path} has no `{symbol}` (CUPTI older than CUDA 12.5): CUDA sites are timed with CUDA events; put a \
         CUDA 13 libcupti on LD_LIBRARY_PATH for per-kernel records"
    )]
    CuptiTooOld {
        /// The library loaded.
        path: String,
        /// The first missing entry point.
        symbol: &'static str,
    },
    /// A CUPTI call failed while setting up.
    #[error(
        "CUPTI refused `{call}`: {message}; CUDA sites are timed with CUDA events (is another profiler such as \
         Nsight attached? CUPTI serves one at a time)"
    )]
    Cupti {
        /// The CUPTI function.
        call: &'static str,
        /// CUPTI's description of the result.
        message: String,
    },
    /// `GPUSPAN_CUPTI=off` asked for CUDA events.
    #[error("GPUSPAN_CUPTI=off: CUDA sites are timed with CUDA events on their stream")]
    CuptiOff,
    /// The thread that resolves CUPTI records could not be started.
    #[error("could not start gpuspan's CUPTI thread ({0}): CUDA sites are timed with CUDA events")]
    Thread(String),
}
