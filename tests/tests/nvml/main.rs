//! Device monitoring (feature `nvml`): without NVML, ROCm SMI through a fake library, and the
//! NVIDIA GPU half scripts/gpu-monitor runs.

mod monitor;
mod monitor_gpu;
mod monitor_rocm;
