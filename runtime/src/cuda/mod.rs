//! CUDA timing through cudarc, loaded at run time: the crate builds without a CUDA toolkit and an
//! instrumented program runs unchanged where there is no GPU.
//!
//! Which source times a CUDA site is decided once, at the first CUDA call (or [`start`]):
//!
//! | found | timing | `gpu.timing.source` |
//! |---|---|---|
//! | driver, device and libcupti ≥ 12.5 | CUPTI activity records, attributed by external correlation id | `cupti` |
//! | driver and device; no CUPTI, or `GPUSPAN_CUPTI=off` | two CUDA events on the site's stream | `cuda_event` |
//! | no driver or no device | the host clock | `host` |
//!
//! Each case is said once (stderr, or the `tracing` subscriber) and shown in the summary.
//! See `docs/cuda.md` for how attribution works and what was measured.

pub(crate) mod cupti;
pub(crate) mod events;
pub mod parse;
pub mod resolve;
pub mod resources;

use crate::diagnostics::note_once;
use crate::record::DeviceLabel;
use crate::scope::{Call, GpuScope, Scope};
use crate::site::Site;
use cudarc::driver::CudaStream;
use std::sync::OnceLock;
use tracing::Span;

pub use resources::AsStream;

/// What times CUDA sites in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
pub enum CudaError {
    #[error(
        "no CUDA driver found: CUDA sites are timed on the host (install the NVIDIA driver, or put the \
         directory of libcuda.so on LD_LIBRARY_PATH)"
    )]
    NoDriver,
    #[error("no CUDA device found ({0}): CUDA sites are timed on the host")]
    NoDevice(String),
    #[error(
        "CUPTI (libcupti) not found: CUDA sites are timed with CUDA events on their stream; for per-kernel \
         records put CUDA's library directory (e.g. /usr/local/cuda/targets/x86_64-linux/lib) on LD_LIBRARY_PATH"
    )]
    NoCupti,
    #[error(
        "{path} has no `{symbol}` (CUPTI older than CUDA 12.5): CUDA sites are timed with CUDA events; put a \
         CUDA 13 libcupti on LD_LIBRARY_PATH for per-kernel records"
    )]
    CuptiTooOld { path: String, symbol: &'static str },
    #[error(
        "CUPTI refused `{call}`: {message}; CUDA sites are timed with CUDA events (is another profiler such as \
         Nsight attached? CUPTI serves one at a time)"
    )]
    Cupti { call: &'static str, message: String },
    #[error("GPUSPAN_CUPTI=off: CUDA sites are timed with CUDA events on their stream")]
    CuptiOff,
    #[error("could not start gpuspan's CUPTI thread ({0}): CUDA sites are timed with CUDA events")]
    Thread(String),
}

static TIMING: OnceLock<Timing> = OnceLock::new();
static PROBE: OnceLock<Result<Vec<DeviceLabel>, CudaError>> = OnceLock::new();

/// Looks for a CUDA driver and devices without ever panicking (cudarc panics when libcuda is
/// missing, so its presence is checked first). The result is kept for the process.
pub fn probe() -> Result<&'static [DeviceLabel], &'static CudaError> {
    PROBE.get_or_init(probe_devices).as_deref()
}

fn probe_devices() -> Result<Vec<DeviceLabel>, CudaError> {
    use cudarc::driver::result;
    // SAFETY: only tries to dlopen libcuda.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaError::NoDriver);
    }
    let names = std::panic::catch_unwind(|| -> Result<Vec<String>, String> {
        result::init().map_err(|e| format!("{e:?}"))?;
        let n = result::device::get_count().map_err(|e| format!("{e:?}"))?;
        (0..n)
            .map(|i| {
                let d = result::device::get(i).map_err(|e| format!("{e:?}"))?;
                result::device::get_name(d).map_err(|e| format!("{e:?}"))
            })
            .collect()
    });
    match names {
        Ok(Ok(names)) if !names.is_empty() => Ok(resolve::device_labels(names)),
        Ok(Ok(_)) => Err(CudaError::NoDevice("the driver reports 0 devices".into())),
        Ok(Err(e)) => Err(CudaError::NoDevice(e)),
        Err(_) => Err(CudaError::NoDriver),
    }
}

/// Labels of the devices found, by ordinal (empty without a driver).
pub(crate) fn devices() -> &'static [DeviceLabel] {
    probe().unwrap_or(&[])
}

/// Chooses the timing source now instead of at the first CUDA call. Call it before launching
/// work that no annotated function wraps if that work should be recorded too (as `unattributed`).
pub fn start() -> Timing {
    *TIMING.get_or_init(|| {
        let devices = match probe() {
            Ok(d) => d.to_vec(),
            Err(e) => {
                note_once(e);
                return Timing::Host;
            }
        };
        let off = std::env::var("GPUSPAN_CUPTI")
            .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "off" | "0" | "false" | "no"));
        if off {
            note_once(CudaError::CuptiOff);
            return Timing::CudaEvent;
        }
        match cupti::start(devices) {
            Ok(_) => Timing::Cupti,
            Err(e) => {
                note_once(e);
                Timing::CudaEvent
            }
        }
    })
}

/// What CUPTI attribution has done so far (`None` unless CUPTI times this process).
pub fn cupti_counts() -> Option<resolve::Counts> {
    cupti::counts()
}

/// CUPTI's clock minus gpuspan's host clock and the error of that measurement, in ns; CUPTI
/// timestamps are mapped onto the host clock with it (`None` unless CUPTI times this process).
pub fn cupti_clock_offset() -> Option<(i64, u64)> {
    (*TIMING.get()? == Timing::Cupti).then(cupti::clock)
}

/// Adds a line to the CUPTI dump being written (`GPUSPAN_CUPTI_DUMP=<path>`), to mark what a
/// capturing program was doing. Does nothing otherwise.
pub fn dump_note(text: impl Into<String>) {
    cupti::note(text.into());
}

/// The CUDA part of an open scope.
#[derive(Debug)]
pub(crate) enum CudaScope {
    /// The scope id is pushed as CUPTI external correlation id (popped at the end if `pushed`).
    Cupti {
        pushed: bool,
    },
    Events(events::EventScope),
    Host,
}

impl CudaScope {
    #[inline]
    fn start(site: &'static Site, scope_id: u64, stream: Option<&CudaStream>) -> CudaScope {
        match start() {
            Timing::Cupti => CudaScope::Cupti { pushed: cupti::push(scope_id) },
            Timing::CudaEvent => match stream {
                Some(s) => match events::start(s) {
                    Ok(e) => CudaScope::Events(e),
                    Err(e) => {
                        note_once(format_args!("recording a CUDA event failed ({e:?}): a call is timed on the host"));
                        CudaScope::Host
                    }
                },
                None => {
                    note_once(format_args!(
                        "`{}` has no CUDA stream parameter: without CUPTI it is timed on the host; add \
                         `stream = <expr>` to time it with CUDA events",
                        site.desc.name
                    ));
                    CudaScope::Host
                }
            },
            Timing::Host => CudaScope::Host,
        }
    }

    /// An async scope stops running on this thread (after a poll): CUPTI's correlation stack
    /// is per thread, so the id comes off it until the next poll.
    pub(crate) fn suspend(&mut self, scope_id: u64) {
        if let CudaScope::Cupti { pushed } = self {
            if *pushed {
                cupti::pop(scope_id);
                *pushed = false;
            }
        }
    }

    /// An async scope runs again, perhaps on another thread (before a poll).
    pub(crate) fn resume(&mut self, scope_id: u64) {
        if let CudaScope::Cupti { pushed } = self {
            if !*pushed {
                *pushed = cupti::push(scope_id);
            }
        }
    }

    /// The scope ended: its record waits for the GPU's timing.
    pub(crate) fn finish(self, call: Call) {
        match self {
            CudaScope::Cupti { pushed } => {
                if pushed {
                    cupti::pop(call.scope_id);
                }
                cupti::ended(call);
            }
            CudaScope::Events(e) => events::finish(e, call.into_record()),
            CudaScope::Host => crate::pipeline::submit(call.into_record()),
        }
    }
}

impl Scope {
    /// Opens the scope of a CUDA site; `stream` is the site's stream, if it names one.
    #[inline]
    pub fn cuda(site: &'static Site, span: Span, bytes: Option<u64>, stream: Option<&CudaStream>) -> Scope {
        Scope::open(site, span, bytes, |id| GpuScope::Cuda(CudaScope::start(site, id, stream)))
    }
}
