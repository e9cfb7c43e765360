//! Finding libcupti and checking that it has every entry point gpuspan calls, before cudarc
//! (which panics on a missing symbol) calls any; and CUPTI's results as messages.

use super::super::CudaError;
use cudarc::cupti::sys::{self as sys, CUptiResult};
use std::ffi::{c_char, CStr};

/// Every CUPTI entry point gpuspan calls. cudarc panics on a missing symbol, so their presence
/// is checked before the first call.
const SYMBOLS: &[&str] = &[
    "cuptiGetVersion",
    "cuptiGetResultString",
    "cuptiActivityRegisterCallbacks",
    "cuptiActivityEnable",
    "cuptiActivityEnableDriverApi",
    "cuptiActivityEnableRuntimeApi",
    "cuptiActivityFlushAll",
    "cuptiActivityFlushPeriod",
    "cuptiActivityGetNextRecord",
    "cuptiActivityGetNumDroppedRecords",
    "cuptiActivityPushExternalCorrelationId",
    "cuptiActivityPopExternalCorrelationId",
    "cuptiGetTimestamp",
    "cuptiSetThreadIdType",
];

pub(super) fn message(r: CUptiResult) -> String {
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: cuptiGetResultString writes a pointer to a static string or leaves it null.
    let ok = unsafe { sys::cuptiGetResultString(r, &mut s) } == CUptiResult::CUPTI_SUCCESS;
    if ok && !s.is_null() {
        // SAFETY: CUPTI returns a NUL-terminated static string.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    }
}

pub(super) fn check(call: &'static str, r: CUptiResult) -> Result<(), CudaError> {
    if r == CUptiResult::CUPTI_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Cupti { call, message: message(r) })
    }
}

/// Finds libcupti the way cudarc will and checks every symbol gpuspan calls.
pub(super) fn check_library() -> Result<(), CudaError> {
    let candidates = cudarc::get_lib_name_candidates("cupti");
    // SAFETY: loading libcupti runs no initialisation with preconditions on our side.
    let Some((path, lib)) =
        candidates.iter().find_map(|c| unsafe { libloading::Library::new(c) }.ok().map(|l| (c.clone(), l)))
    else {
        return Err(CudaError::NoCupti);
    };
    for symbol in SYMBOLS {
        // SAFETY: only the symbol's presence is checked; it is never called through this handle.
        if unsafe { lib.get::<*const ()>(symbol.as_bytes()) }.is_err() {
            return Err(CudaError::CuptiTooOld { path, symbol });
        }
    }
    Ok(())
}
