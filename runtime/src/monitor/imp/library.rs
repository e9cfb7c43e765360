//! Loading the device libraries at run time, once per process, without ever panicking: NVML for
//! NVIDIA GPUs, ROCm SMI for AMD ones (`super::rocm`). A machine without a vendor's driver gets
//! an error that says what to do, not a crash or a link failure.

use super::rocm::Rocm;
use super::vendor::DeviceLibrary;
use super::MonitorError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::ffi::OsStr;
use std::sync::OnceLock;

/// Names tried in order. Driver installs and container runtimes provide the versioned name; the
/// unversioned one (nvml-wrapper's default) often exists only with development packages.
const NAMES: &[&str] = if cfg!(windows) { &["nvml.dll"] } else { &["libnvidia-ml.so.1", "libnvidia-ml.so"] };

/// Every device library, each loaded or why not.
pub(super) struct Libraries {
    nvml: Result<Nvml, MonitorError>,
    rocm: Result<Rocm, MonitorError>,
}

impl Libraries {
    /// Each library by name, NVML first (the order devices are numbered in).
    pub(super) fn each(&self) -> [(&'static str, Result<&dyn DeviceLibrary, &MonitorError>); 2] {
        [
            ("NVML", self.nvml.as_ref().map(|l| l as &dyn DeviceLibrary)),
            ("ROCm SMI", self.rocm.as_ref().map(|l| l as &dyn DeviceLibrary)),
        ]
    }
}

/// Kept for the life of the process: the libraries are cheap to keep, expensive to load, and the
/// sampler, discovery and adapter matching all use the same instances.
// process-wide because a loaded library is: one handle to NVML and one to ROCm SMI for the process.
static LIBRARIES: OnceLock<Libraries> = OnceLock::new();

/// The process's device libraries, both loaded on first use (`GPUSPAN_NVML_LIBRARY` and
/// `GPUSPAN_ROCM_SMI_LIBRARY` name the files to load).
pub(super) fn libraries() -> &'static Libraries {
    LIBRARIES.get_or_init(|| Libraries {
        nvml: load(crate::env::nvml_library().as_deref()),
        rocm: super::rocm::load(crate::env::rocm_smi_library().as_deref()),
    })
}

fn load(custom: Option<&OsStr>) -> Result<Nvml, MonitorError> {
    let candidates: Vec<&OsStr> = match custom {
        Some(path) => vec![path],
        None => NAMES.iter().map(OsStr::new).collect(),
    };
    let mut missing = Vec::new();
    for path in candidates {
        match Nvml::builder().lib_path(path).init() {
            Ok(nvml) => return Ok(nvml),
            // libloading's message names the file.
            Err(NvmlError::LibloadingError(e)) => missing.push(e.to_string()),
            Err(e) => return Err(init_error(e)),
        }
    }
    Err(MonitorError::LibraryMissing { tried: missing.join("; ") })
}

/// The library loaded but could not start.
fn init_error(e: NvmlError) -> MonitorError {
    match e {
        NvmlError::DriverNotLoaded => MonitorError::DriverNotLoaded,
        NvmlError::NoPermission => MonitorError::NoPermission,
        other => call_error("nvmlInit", other),
    }
}

/// A failed NVML call as an error.
pub(super) fn call_error(call: &'static str, e: NvmlError) -> MonitorError {
    MonitorError::Call { call, message: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_that_names_the_path() {
        let e = load(Some(OsStr::new("/nonexistent/libnvidia-ml.so.1"))).expect_err("no such file");
        match &e {
            MonitorError::LibraryMissing { tried } => assert!(tried.contains("/nonexistent/libnvidia-ml.so.1"), "{e}"),
            other => panic!("expected LibraryMissing, got {other:?}"),
        }
    }
}
