//! The monitor's data: devices, samples, settings and errors. Plain Rust, no NVML, so that it
//! compiles without the `enabled` feature too, where the monitor's functions do nothing.

use std::time::Duration;

/// One GPU as its device library (NVML, ROCm SMI) describes it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GpuInfo {
    /// The monitor's index: NVML's (PCI bus order; CUDA's ordinals may differ, see
    /// docs/monitor.md), then ROCm SMI's GPUs numbered on from the highest.
    pub index: u32,
    /// Exactly as `nvidia-smi` (or ROCm SMI) prints it, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `NVIDIA` or `AMD` (`hw.vendor`).
    pub vendor: &'static str,
    /// `GPU-xxxxxxxx-...` (NVML), the unique id in hex (ROCm SMI): unique on the host, used as
    /// `hw.id`.
    pub uuid: String,
    /// NVML's form, `00000000:18:00.0` (ROCm SMI's addresses are written the same way).
    pub pci_bus_id: String,
    /// PCI device id in the high 16 bits, vendor id in the low 16 bits.
    pub pci_device_id: u32,
    /// Device memory in total.
    pub memory_total_bytes: u64,
    /// CUDA compute capability (major, minor); `None` for AMD GPUs.
    pub compute_capability: Option<(u32, u32)>,
    /// The driver's version, e.g. `580.159.04` (NVIDIA) or the amdgpu driver's.
    pub driver_version: String,
    /// The CUDA version the driver supports (major, minor).
    pub cuda_driver_version: Option<(u32, u32)>,
    /// The PCIe link to the host.
    pub pcie: PcieLink,
    /// The GPU's active NVLinks (empty on a GPU without NVLink, or where NVML does not say).
    pub nvlinks: Vec<NvLink>,
    /// The PCI bus ids of the other GPUs NVML says this one reaches over NVLink (directly or
    /// through NVSwitches); `None` where NVML could not say for some GPU.
    pub nvlink_peers: Option<Vec<String>>,
}

/// One active NVLink of a GPU: what is at its other end, and how fast it is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NvLink {
    /// The link's number on the GPU.
    pub link: u32,
    /// What the link leads to.
    pub remote: NvLinkRemote,
    /// Bytes per second the link carries in one direction (NVML's link speed), when NVML says.
    pub bytes_per_s: Option<f64>,
}

/// What is at the other end of an NVLink.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NvLinkRemote {
    /// A GPU NVML sees, by its PCI bus id in NVML's form.
    Gpu(String),
    /// A device that is not a GPU NVML sees: on HGX boards, an NVSwitch.
    Switch,
    /// NVML did not say.
    Unknown,
}

/// A PCIe link's generation and width: the most the device and slot allow, and what the link
/// runs at now (GPUs drop to a lower generation when idle to save power).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PcieLink {
    /// The highest generation the device and slot allow.
    pub max_generation: Option<u32>,
    /// The most lanes the device and slot allow.
    pub max_width: Option<u32>,
    /// The generation the link runs at now.
    pub current_generation: Option<u32>,
    /// The lanes the link uses now.
    pub current_width: Option<u32>,
}

impl PcieLink {
    /// Bytes per second the link can carry in one direction at its maximum generation and width:
    /// the figure transfer efficiency is measured against.
    pub fn peak_bytes_per_s(&self) -> Option<f64> {
        Some(lane_bytes_per_s(self.max_generation?)? * f64::from(self.max_width?))
    }

    /// The same at the generation and width the link runs at now.
    pub fn current_bytes_per_s(&self) -> Option<f64> {
        Some(lane_bytes_per_s(self.current_generation?)? * f64::from(self.current_width?))
    }
}

/// Usable bytes per second of one PCIe lane in one direction: the transfer rate times the line
/// code's efficiency (8b/10b for generations 1–2, 128b/130b for 3–5, 242/256 FLIT for 6–7).
/// Packet overhead is not subtracted, so large copies reach about 80–90 % of it.
pub(crate) fn lane_bytes_per_s(generation: u32) -> Option<f64> {
    let (transfers_per_s, code): (f64, f64) = match generation {
        1 => (2.5e9, 8.0 / 10.0),
        2 => (5e9, 8.0 / 10.0),
        3 => (8e9, 128.0 / 130.0),
        4 => (16e9, 128.0 / 130.0),
        5 => (32e9, 128.0 / 130.0),
        6 => (64e9, 242.0 / 256.0),
        7 => (128e9, 242.0 / 256.0),
        _ => return None,
    };
    Some(transfers_per_s * code / 8.0)
}

/// One round's reading of one GPU. A field is `None` where the device does not report it; the
/// power limit and link state are held from their last reading (at most a second old).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// When it was taken, on gpuspan's host clock (Unix-epoch ns, like every record).
    pub time_ns: u64,
    /// Percent of the last sample period (1/6 s to 1 s, by product) in which a kernel ran.
    pub gpu_utilization_pct: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub memory_utilization_pct: Option<u32>,
    /// Device memory in use.
    pub memory_used_bytes: Option<u64>,
    /// Device memory free.
    pub memory_free_bytes: Option<u64>,
    /// GPU die temperature, °C.
    pub temperature_c: Option<u32>,
    /// Power drawn, W.
    pub power_w: Option<f64>,
    /// The enforced power limit.
    pub power_limit_w: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub memory_clock_mhz: Option<u32>,
    /// Bytes per second the GPU sent over PCIe (to the host), averaged since the previous PCIe
    /// reading (GPM, counters) or over a 20 ms look (windowed).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Bytes per second the GPU received over PCIe (from the host), likewise.
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// The link's generation and width (read at most once a second).
    pub pcie_generation: Option<u32>,
    /// The link's width in lanes (read at most once a second).
    pub pcie_width: Option<u32>,
    /// NVML's clock throttle reason bits (spans and the summary show them by name).
    pub throttle_reasons: Option<u64>,
}

/// Why device monitoring is not available. Every message says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorError {
    /// Neither libnvidia-ml nor librocm_smi64 could be loaded.
    #[error(
        "no GPU device library could be loaded ({tried}), so there are no device metrics; on a machine with an \
         NVIDIA GPU, install its driver or add the directory holding libnvidia-ml.so.1 to LD_LIBRARY_PATH (or set \
         GPUSPAN_NVML_LIBRARY to its path); with an AMD GPU, install ROCm or add the directory holding \
         librocm_smi64.so to LD_LIBRARY_PATH (or set GPUSPAN_ROCM_SMI_LIBRARY to its path)"
    )]
    LibraryMissing {
        /// Where it was looked for, and what the loader said.
        tried: String,
    },
    /// NVML is there, the driver is not.
    #[error(
        "NVML is installed but the NVIDIA driver is not loaded, so there are no device metrics; load the driver \
         (`nvidia-smi` should list the GPUs)"
    )]
    DriverNotLoaded,
    /// NVML may not talk to the driver.
    #[error(
        "NVML may not talk to the NVIDIA driver (permission denied), so there are no device metrics; run as a \
         user that can open /dev/nvidia*"
    )]
    NoPermission,
    /// An NVML call failed.
    #[error("NVML {call} failed ({message}), so there are no device metrics; check that `nvidia-smi` works here")]
    Call {
        /// The NVML function.
        call: &'static str,
        /// What NVML said.
        message: String,
    },
    /// No device library sees a GPU.
    #[error(
        "no device library sees a GPU, so there are no device metrics; `nvidia-smi -L` (NVIDIA) or `rocm-smi` \
         (AMD) lists what the driver sees"
    )]
    NoDevices,
    /// A ROCm SMI call failed (AMD GPUs).
    #[error(
        "ROCm SMI {call} failed ({message}), so there are no AMD device metrics; check that `rocm-smi` works here"
    )]
    RocmCall {
        /// The ROCm SMI function.
        call: &'static str,
        /// What ROCm SMI said.
        message: String,
    },
    /// A sampler runs already.
    #[error("the device monitor is already running; call gpuspan::monitor::stop() before starting another")]
    AlreadyRunning,
    /// The sampler thread could not be started.
    #[error("could not start the device sampler thread ({0}); the process may be out of threads or memory")]
    Thread(String),
}

/// How the sampler runs. [`MonitorConfig::from_env`] reads:
///
/// | variable | effect |
/// |---|---|
/// | `GPUSPAN_MONITOR=off` | [`crate::init`] starts no sampler |
/// | `GPUSPAN_MONITOR_INTERVAL_MS=n` | rounds on a grid of `n` ms (default 100, at least 10) |
/// | `GPUSPAN_MONITOR_HISTORY=n` | keep the last `n` samples per device (default 3000) |
/// | `GPUSPAN_MONITOR_CPU_PERCENT=p` | CPU budget of the sampler in % of one core (default 0.1) |
/// | `GPUSPAN_NVML_LIBRARY=path` | load NVML from this path instead of the loader's search |
/// | `GPUSPAN_ROCM_SMI_LIBRARY=path` | load ROCm SMI from this path instead of the loader's search |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorConfig {
    pub(crate) interval: Duration,
    pub(crate) history: usize,
    /// Parts per million of one core.
    pub(crate) cpu_budget_ppm: u32,
}

/// Default sampling interval: the grid rounds sit on, fine enough to see a kernel's effect on
/// clocks and power where rounds are cheap enough to take that often (see [`MonitorConfig::cpu_budget_percent`]).
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);
/// Default history: five minutes at the default interval, about 300 KiB per device.
pub(crate) const DEFAULT_HISTORY: usize = 3000;
/// Shortest interval accepted: NVML's own utilization counters update no faster than this.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig { interval: DEFAULT_INTERVAL, history: DEFAULT_HISTORY, cpu_budget_ppm: 1000 }
    }
}

impl MonitorConfig {
    /// Rounds on a grid of `interval` (at least 10 ms: NVML's own utilization counters update no
    /// faster), as often as the budget allows.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(MIN_INTERVAL);
        self
    }

    /// Keep the last `samples` samples per device (at least 1).
    pub fn history(mut self, samples: usize) -> Self {
        self.history = samples.max(1);
        self
    }

    /// The sampler's CPU budget, in percent of one core (default 0.1, at least 0.001). Rounds
    /// dearer than the budget allows on every grid point wait for the next point it allows
    /// (the summary says how often they ran); with a budget of 100 every
    /// grid point gets a round whatever it costs.
    pub fn cpu_budget_percent(mut self, percent: f64) -> Self {
        self.cpu_budget_ppm = (percent * 1e4).clamp(10.0, 1e6) as u32;
        self
    }

    /// The CPU budget as a fraction of one core.
    pub fn cpu_budget(&self) -> f64 {
        f64::from(self.cpu_budget_ppm) / 1e6
    }

    /// The grid rounds sit on.
    pub fn sampling_interval(&self) -> Duration {
        self.interval
    }

    /// Samples kept per device.
    pub fn history_len(&self) -> usize {
        self.history
    }
}
