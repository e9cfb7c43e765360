//! `librocm_smi64` loaded with libloading, its functions looked up once, each call made safe:
//! a status other than success is an error naming the call, with ROCm SMI's own words for it.
//! The calls ROCm SMI needs to be ROCm SMI at all (init, count, PCI id, VRAM) are required; a
//! library without any of the others (older ROCm) leaves that reading out.

use crate::monitor::MonitorError;
use libloading::Library;
use std::ffi::{c_char, CStr, OsStr};
use std::path::PathBuf;

/// Names tried in order: the unversioned name (ROCm's packages put it on the loader's path), the
/// sonames of rocm_smi_lib 7 (ROCm 6), 6 and 5, then ROCm's default install directory.
const NAMES: [&str; 5] = [
    "librocm_smi64.so",
    "librocm_smi64.so.7",
    "librocm_smi64.so.6",
    "librocm_smi64.so.5",
    "/opt/rocm/lib/librocm_smi64.so",
];

/// `rsmi_status_t` (a C enum: `unsigned int`, as `RSMI_STATUS_UNKNOWN_ERROR` is 0xFFFFFFFF).
type Status = u32;
const SUCCESS: Status = 0;
const NOT_SUPPORTED: Status = 2;
const PERMISSION: Status = 4;
const NOT_YET_IMPLEMENTED: Status = 9;

/// `RSMI_MEM_TYPE_VRAM` of `rsmi_memory_type_t`.
pub(super) const MEM_TYPE_VRAM: u32 = 0;
/// `RSMI_SW_COMP_DRIVER` of `rsmi_sw_component_t`.
pub(super) const SW_COMP_DRIVER: u32 = 0;
/// `RSMI_TEMP_TYPE_EDGE` and `RSMI_TEMP_TYPE_JUNCTION` of `rsmi_temperature_type_t`.
pub(super) const TEMP_TYPE_EDGE: u32 = 0;
pub(super) const TEMP_TYPE_JUNCTION: u32 = 1;
/// `RSMI_TEMP_CURRENT` of `rsmi_temperature_metric_t`.
const TEMP_CURRENT: u32 = 0;
/// `RSMI_CLK_TYPE_SYS` (the shader clock, `sclk`) and `RSMI_CLK_TYPE_MEM` of `rsmi_clk_type_t`.
pub(super) const CLK_TYPE_SYS: u32 = 0;
pub(super) const CLK_TYPE_MEM: u32 = 4;
/// `RSMI_MAX_NUM_FREQUENCIES`.
const MAX_NUM_FREQUENCIES: usize = 33;

/// `rsmi_frequencies_t` since rocm_smi_lib 7 (ROCm 6.0): a `has_deep_sleep` flag first (a C
/// `bool`, read as a byte).
#[repr(C)]
#[derive(Clone, Copy)]
struct Frequencies7 {
    has_deep_sleep: u8,
    num_supported: u32,
    current: u32,
    frequency: [u64; MAX_NUM_FREQUENCIES],
}

/// `rsmi_frequencies_t` before rocm_smi_lib 7 (ROCm 5).
#[repr(C)]
#[derive(Clone, Copy)]
struct Frequencies5 {
    num_supported: u32,
    current: u32,
    frequency: [u64; MAX_NUM_FREQUENCIES],
}

/// Room for either layout; the library's version says which one it wrote.
#[repr(C)]
union FrequencyBuffer {
    v7: Frequencies7,
    v5: Frequencies5,
}

/// `rsmi_version_t`.
#[repr(C)]
struct Version {
    major: u32,
    minor: u32,
    patch: u32,
    build: *const c_char,
}

/// A ROCm SMI call failed: `NotSupported` where the GPU or library lacks the reading (it is not
/// asked again), `Failed` otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CallError {
    NotSupported,
    Failed(MonitorError),
}

impl From<CallError> for MonitorError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Failed(e) => e,
            CallError::NotSupported => {
                MonitorError::RocmCall { call: "a required call", message: "not supported".into() }
            }
        }
    }
}

/// The loaded library, initialized; `rsmi_shut_down` when dropped.
pub(crate) struct Rocm {
    // The function pointers below point into it: it lives as long as they do.
    _library: Library,
    /// `rsmi_init` succeeded (only then is `rsmi_shut_down` called).
    initialized: bool,
    /// rocm_smi_lib's major version (`rsmi_version_get`), which says how `rsmi_frequencies_t` is
    /// laid out; `None` where the library does not say.
    major_version: Option<u32>,
    shut_down: unsafe extern "C" fn() -> Status,
    num_monitor_devices: unsafe extern "C" fn(*mut u32) -> Status,
    dev_pci_id_get: unsafe extern "C" fn(u32, *mut u64) -> Status,
    dev_memory_total_get: unsafe extern "C" fn(u32, u32, *mut u64) -> Status,
    dev_memory_usage_get: unsafe extern "C" fn(u32, u32, *mut u64) -> Status,
    status_string: Option<unsafe extern "C" fn(Status, *mut *const c_char) -> Status>,
    version_str_get: Option<unsafe extern "C" fn(u32, *mut c_char, u32) -> Status>,
    dev_name_get: Option<unsafe extern "C" fn(u32, *mut c_char, usize) -> Status>,
    dev_unique_id_get: Option<unsafe extern "C" fn(u32, *mut u64) -> Status>,
    dev_id_get: Option<unsafe extern "C" fn(u32, *mut u16) -> Status>,
    dev_vendor_id_get: Option<unsafe extern "C" fn(u32, *mut u16) -> Status>,
    dev_busy_percent_get: Option<unsafe extern "C" fn(u32, *mut u32) -> Status>,
    dev_memory_busy_percent_get: Option<unsafe extern "C" fn(u32, *mut u32) -> Status>,
    dev_temp_metric_get: Option<unsafe extern "C" fn(u32, u32, u32, *mut i64) -> Status>,
    dev_current_socket_power_get: Option<unsafe extern "C" fn(u32, *mut u64) -> Status>,
    dev_power_ave_get: Option<unsafe extern "C" fn(u32, u32, *mut u64) -> Status>,
    dev_power_cap_get: Option<unsafe extern "C" fn(u32, u32, *mut u64) -> Status>,
    dev_gpu_clk_freq_get: Option<unsafe extern "C" fn(u32, u32, *mut FrequencyBuffer) -> Status>,
}

impl std::fmt::Debug for Rocm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rocm").field("major_version", &self.major_version).finish_non_exhaustive()
    }
}

/// Loads and initializes ROCm SMI: from `custom` (`GPUSPAN_ROCM_SMI_LIBRARY`), else the first of
/// [`NAMES`] the loader finds.
pub(crate) fn load(custom: Option<&OsStr>) -> Result<Rocm, MonitorError> {
    let candidates: Vec<PathBuf> = match custom {
        Some(path) => vec![PathBuf::from(path)],
        None => NAMES.iter().map(PathBuf::from).collect(),
    };
    let mut missing = Vec::new();
    for path in candidates {
        // SAFETY: loading runs the library's initializers; ROCm SMI's (or a file the user named
        // as ROCm SMI) are trusted as any shared library the program links is.
        match unsafe { Library::new(&path) } {
            Ok(library) => return Rocm::init(library, &path),
            // The loader's own words (libloading's error says only "dlopen failed"; its source
            // names the file and the reason).
            Err(e) => missing.push(
                std::error::Error::source(&e)
                    .map_or_else(|| format!("{}: {e}", path.display()), |reason| reason.to_string()),
            ),
        }
    }
    Err(MonitorError::LibraryMissing { tried: missing.join("; ") })
}

/// Looks `name` up in `library` as a function of type `T`.
///
/// # Safety
/// `T` must be the function pointer type of the C declaration of `name` in rocm_smi.h.
unsafe fn symbol<T: Copy>(library: &Library, name: &str) -> Option<T> {
    // SAFETY: per the caller; the pointer is used only while `library` is loaded (`Rocm` keeps it).
    unsafe { library.get::<T>(name.as_bytes()).ok().map(|s| *s) }
}

impl Rocm {
    fn init(library: Library, path: &std::path::Path) -> Result<Rocm, MonitorError> {
        let required = |name: &'static str| MonitorError::RocmCall {
            call: name,
            message: format!("{} does not export it, so it is not ROCm SMI", path.display()),
        };
        // SAFETY (every `symbol` call below): each type is the C declaration of the symbol in
        // rocm_smi.h, with its enums as `u32` and `rsmi_frequencies_t` as `FrequencyBuffer`.
        let init: unsafe extern "C" fn(u64) -> Status =
            unsafe { symbol(&library, "rsmi_init") }.ok_or_else(|| required("rsmi_init"))?;
        let version_get: Option<unsafe extern "C" fn(*mut Version) -> Status> =
            unsafe { symbol(&library, "rsmi_version_get") };
        let mut rocm = Rocm {
            initialized: false,
            major_version: None,
            shut_down: unsafe { symbol(&library, "rsmi_shut_down") }.ok_or_else(|| required("rsmi_shut_down"))?,
            num_monitor_devices: unsafe { symbol(&library, "rsmi_num_monitor_devices") }
                .ok_or_else(|| required("rsmi_num_monitor_devices"))?,
            dev_pci_id_get: unsafe { symbol(&library, "rsmi_dev_pci_id_get") }
                .ok_or_else(|| required("rsmi_dev_pci_id_get"))?,
            dev_memory_total_get: unsafe { symbol(&library, "rsmi_dev_memory_total_get") }
                .ok_or_else(|| required("rsmi_dev_memory_total_get"))?,
            dev_memory_usage_get: unsafe { symbol(&library, "rsmi_dev_memory_usage_get") }
                .ok_or_else(|| required("rsmi_dev_memory_usage_get"))?,
            status_string: unsafe { symbol(&library, "rsmi_status_string") },
            version_str_get: unsafe { symbol(&library, "rsmi_version_str_get") },
            dev_name_get: unsafe { symbol(&library, "rsmi_dev_name_get") },
            dev_unique_id_get: unsafe { symbol(&library, "rsmi_dev_unique_id_get") },
            dev_id_get: unsafe { symbol(&library, "rsmi_dev_id_get") },
            dev_vendor_id_get: unsafe { symbol(&library, "rsmi_dev_vendor_id_get") },
            dev_busy_percent_get: unsafe { symbol(&library, "rsmi_dev_busy_percent_get") },
            dev_memory_busy_percent_get: unsafe { symbol(&library, "rsmi_dev_memory_busy_percent_get") },
            dev_temp_metric_get: unsafe { symbol(&library, "rsmi_dev_temp_metric_get") },
            dev_current_socket_power_get: unsafe { symbol(&library, "rsmi_dev_current_socket_power_get") },
            dev_power_ave_get: unsafe { symbol(&library, "rsmi_dev_power_ave_get") },
            dev_power_cap_get: unsafe { symbol(&library, "rsmi_dev_power_cap_get") },
            dev_gpu_clk_freq_get: unsafe { symbol(&library, "rsmi_dev_gpu_clk_freq_get") },
            _library: library,
        };
        // SAFETY: `init` is `rsmi_init(uint64_t init_flags)`; 0 asks for AMD GPUs only.
        let status = unsafe { init(0) };
        if status != SUCCESS {
            return Err(MonitorError::RocmCall { call: "rsmi_init", message: rocm.describe_status(status) });
        }
        rocm.initialized = true;
        if let Some(version_get) = version_get {
            let mut v = Version { major: 0, minor: 0, patch: 0, build: std::ptr::null() };
            // SAFETY: `version_get` is `rsmi_version_get(rsmi_version_t *)`; `v` is one.
            if unsafe { version_get(&mut v) } == SUCCESS {
                rocm.major_version = Some(v.major);
            }
        }
        Ok(rocm)
    }

    /// ROCm SMI's description of `status` (`rsmi_status_string`), with its number.
    fn describe_status(&self, status: Status) -> String {
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: `status_string` is `rsmi_status_string(rsmi_status_t, const char **)`; on
        // success `text` points to a static NUL-terminated string of the library's.
        let said = self.status_string.is_some_and(|f| unsafe { f(status, &mut text) } == SUCCESS && !text.is_null());
        if said {
            // SAFETY: checked non-null above; the string is the library's, NUL-terminated.
            let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
            format!("{} (status {status})", text.trim())
        } else {
            format!("status {status}")
        }
    }

    /// Turns a status into a result: success, a reading the GPU lacks, or an error naming `call`.
    fn check(&self, call: &'static str, status: Status) -> Result<(), CallError> {
        match status {
            SUCCESS => Ok(()),
            NOT_SUPPORTED | NOT_YET_IMPLEMENTED | PERMISSION => Err(CallError::NotSupported),
            other => Err(CallError::Failed(MonitorError::RocmCall { call, message: self.describe_status(other) })),
        }
    }

    /// Calls `f` with a pointer to a zeroed `T` (a plain integer) and returns it on success;
    /// a function the library lacks is `NotSupported`.
    fn get<F: Copy, T: Copy + Default>(
        &self,
        call: &'static str,
        f: Option<F>,
        run: impl FnOnce(F, *mut T) -> Status,
    ) -> Result<T, CallError> {
        let f = f.ok_or(CallError::NotSupported)?;
        let mut out = T::default();
        self.check(call, run(f, &mut out))?;
        Ok(out)
    }

    pub(super) fn device_count(&self) -> Result<u32, MonitorError> {
        let mut n = 0u32;
        // SAFETY: `rsmi_num_monitor_devices(uint32_t *)`.
        let status = unsafe { (self.num_monitor_devices)(&mut n) };
        self.check("rsmi_num_monitor_devices", status).map_err(MonitorError::from)?;
        Ok(n)
    }

    pub(super) fn pci_id(&self, dv: u32) -> Result<u64, MonitorError> {
        let mut id = 0u64;
        // SAFETY: `rsmi_dev_pci_id_get(uint32_t, uint64_t *)`.
        let status = unsafe { (self.dev_pci_id_get)(dv, &mut id) };
        self.check("rsmi_dev_pci_id_get", status).map_err(MonitorError::from)?;
        Ok(id)
    }

    pub(super) fn memory_total(&self, dv: u32, kind: u32) -> Result<u64, MonitorError> {
        let mut bytes = 0u64;
        // SAFETY: `rsmi_dev_memory_total_get(uint32_t, rsmi_memory_type_t, uint64_t *)`.
        let status = unsafe { (self.dev_memory_total_get)(dv, kind, &mut bytes) };
        self.check("rsmi_dev_memory_total_get", status).map_err(MonitorError::from)?;
        Ok(bytes)
    }

    /// Bytes of `kind` memory in use.
    pub(super) fn memory_usage(&self, dv: u32, kind: u32) -> Result<u64, CallError> {
        let mut bytes = 0u64;
        // SAFETY: `rsmi_dev_memory_usage_get(uint32_t, rsmi_memory_type_t, uint64_t *)`.
        let status = unsafe { (self.dev_memory_usage_get)(dv, kind, &mut bytes) };
        self.check("rsmi_dev_memory_usage_get", status)?;
        Ok(bytes)
    }

    /// A string the library writes into a buffer of `len` bytes (`char *buf, len`).
    fn string(
        &self,
        call: &'static str,
        status_of: impl FnOnce(*mut c_char, usize) -> Status,
    ) -> Result<String, CallError> {
        let mut buf = [0 as c_char; 256];
        let status = status_of(buf.as_mut_ptr(), buf.len() - 1); // the last byte stays NUL
        self.check(call, status)?;
        // SAFETY: the buffer is NUL-terminated: its last byte was never given to the library.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().trim().to_owned())
    }

    pub(super) fn name(&self, dv: u32) -> Result<String, CallError> {
        let f = self.dev_name_get.ok_or(CallError::NotSupported)?;
        // SAFETY: `rsmi_dev_name_get(uint32_t, char *, size_t)`, the buffer `len` bytes long.
        self.string("rsmi_dev_name_get", |buf, len| unsafe { f(dv, buf, len) })
    }

    pub(super) fn version_str(&self, component: u32) -> Result<String, CallError> {
        let f = self.version_str_get.ok_or(CallError::NotSupported)?;
        // SAFETY: `rsmi_version_str_get(rsmi_sw_component_t, char *, uint32_t)`, `len` bytes.
        self.string("rsmi_version_str_get", |buf, len| unsafe { f(component, buf, len as u32) })
    }

    pub(super) fn unique_id(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: `rsmi_dev_unique_id_get(uint32_t, uint64_t *)`.
        self.get("rsmi_dev_unique_id_get", self.dev_unique_id_get, |f, out| unsafe { f(dv, out) })
    }

    pub(super) fn device_id(&self, dv: u32) -> Result<u16, CallError> {
        // SAFETY: `rsmi_dev_id_get(uint32_t, uint16_t *)`.
        self.get("rsmi_dev_id_get", self.dev_id_get, |f, out| unsafe { f(dv, out) })
    }

    pub(super) fn vendor_id(&self, dv: u32) -> Result<u16, CallError> {
        // SAFETY: `rsmi_dev_vendor_id_get(uint32_t, uint16_t *)`.
        self.get("rsmi_dev_vendor_id_get", self.dev_vendor_id_get, |f, out| unsafe { f(dv, out) })
    }

    /// Percent of time the GPU was busy.
    pub(super) fn busy_percent(&self, dv: u32) -> Result<u32, CallError> {
        // SAFETY: `rsmi_dev_busy_percent_get(uint32_t, uint32_t *)`.
        self.get("rsmi_dev_busy_percent_get", self.dev_busy_percent_get, |f, out| unsafe { f(dv, out) })
    }

    /// Percent of time device memory was busy.
    pub(super) fn memory_busy_percent(&self, dv: u32) -> Result<u32, CallError> {
        // SAFETY: `rsmi_dev_memory_busy_percent_get(uint32_t, uint32_t *)`.
        self.get("rsmi_dev_memory_busy_percent_get", self.dev_memory_busy_percent_get, |f, out| unsafe { f(dv, out) })
    }

    /// The current temperature of `sensor`, in millidegrees Celsius.
    pub(super) fn temperature_mc(&self, dv: u32, sensor: u32) -> Result<i64, CallError> {
        // SAFETY: `rsmi_dev_temp_metric_get(uint32_t, uint32_t, rsmi_temperature_metric_t, int64_t *)`.
        self.get("rsmi_dev_temp_metric_get", self.dev_temp_metric_get, |f, out| unsafe {
            f(dv, sensor, TEMP_CURRENT, out)
        })
    }

    /// Socket (instant) power in microwatts: newer GPUs report only this.
    pub(super) fn socket_power_uw(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: `rsmi_dev_current_socket_power_get(uint32_t, uint64_t *)`.
        self.get("rsmi_dev_current_socket_power_get", self.dev_current_socket_power_get, |f, out| unsafe { f(dv, out) })
    }

    /// Average power of sensor 0 in microwatts: what older GPUs report.
    pub(super) fn average_power_uw(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: `rsmi_dev_power_ave_get(uint32_t, uint32_t sensor_ind, uint64_t *)`.
        self.get("rsmi_dev_power_ave_get", self.dev_power_ave_get, |f, out| unsafe { f(dv, 0, out) })
    }

    /// The power cap of sensor 0 in microwatts.
    pub(super) fn power_cap_uw(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: `rsmi_dev_power_cap_get(uint32_t, uint32_t sensor_ind, uint64_t *)`.
        self.get("rsmi_dev_power_cap_get", self.dev_power_cap_get, |f, out| unsafe { f(dv, 0, out) })
    }

    /// The current frequency of clock `kind`, in Hz. `NotSupported` where the library's version
    /// (hence its `rsmi_frequencies_t` layout) is unknown; an answer whose current index is out
    /// of its table (ROCm SMI's -1: no current level found) is no answer.
    pub(super) fn clock_hz(&self, dv: u32, kind: u32) -> Result<Option<u64>, CallError> {
        let f = self.dev_gpu_clk_freq_get.ok_or(CallError::NotSupported)?;
        let major = self.major_version.ok_or(CallError::NotSupported)?;
        let mut buf = FrequencyBuffer {
            v7: Frequencies7 { has_deep_sleep: 0, num_supported: 0, current: 0, frequency: [0; MAX_NUM_FREQUENCIES] },
        };
        // SAFETY: `rsmi_dev_gpu_clk_freq_get(uint32_t, rsmi_clk_type_t, rsmi_frequencies_t *)`;
        // the buffer holds either version's struct.
        let status = unsafe { f(dv, kind, &mut buf) };
        self.check("rsmi_dev_gpu_clk_freq_get", status)?;
        // SAFETY: every field of both layouts is a plain integer, and the buffer was fully
        // initialized: any bytes are a valid value of either.
        let (n, current, table) = unsafe {
            if major >= 7 {
                (buf.v7.num_supported, buf.v7.current, buf.v7.frequency)
            } else {
                (buf.v5.num_supported, buf.v5.current, buf.v5.frequency)
            }
        };
        let valid = (n as usize) <= MAX_NUM_FREQUENCIES && current < n;
        Ok(valid.then(|| table[current as usize]))
    }
}

impl Drop for Rocm {
    fn drop(&mut self) {
        if self.initialized {
            // SAFETY: `rsmi_shut_down(void)`, once for the successful `rsmi_init`.
            unsafe { (self.shut_down)() };
        }
    }
}
