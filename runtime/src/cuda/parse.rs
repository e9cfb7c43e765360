//! CUPTI activity records, read from raw bytes.
//!
//! Nothing here calls CUPTI, so the same code reads live buffers and buffers captured on a GPU
//! machine (test fixtures, see [`dump`]). Fields are read at the offsets of cudarc's bindings for
//! CUDA 13.0 (`CUpti_ActivityKernel10`, `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemset4`,
//! `CUpti_ActivityAPI`, `CUpti_ActivityExternalCorrelation`) as plain little-endian integers,
//! never by casting bytes to those structs: an unknown enum value in a buffer must not be
//! undefined behaviour.

use crate::record::MemoryKind;
use crate::site::Direction;
use cudarc::cupti::sys::{
    CUpti_ActivityAPI as Api, CUpti_ActivityExternalCorrelation as Ext, CUpti_ActivityKernel10 as Kernel,
    CUpti_ActivityKind as K, CUpti_ActivityMemcpy6 as Memcpy, CUpti_ActivityMemset4 as Memset,
    CUpti_driver_api_trace_cbid_enum as D, CUpti_runtime_api_trace_cbid_enum as R,
};
use std::mem::{offset_of, size_of};

/// A record that is shorter than the struct its kind promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "CUPTI activity record of kind {kind} has {have} bytes but CUDA 13.0's layout needs {need}: \
     use a libcupti from CUDA 13.0 or newer"
)]
pub struct Truncated {
    pub kind: u32,
    pub need: usize,
    pub have: usize,
}

/// One parsed activity record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Raw {
    Kernel(RawKernel),
    Memcpy(RawMemcpy),
    Memset(RawMemset),
    Api(RawApi),
    External(RawExternal),
    /// A kind gpuspan does not read.
    Other {
        kind: u32,
    },
}

/// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL` / `KERNEL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawKernel {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u16,
    pub static_shared: i32,
    pub dynamic_shared: i32,
    pub correlation_id: u32,
    /// Address of the kernel's (mangled) name, owned by CUPTI and shared by all its records.
    pub name_ptr: u64,
}

/// `CUPTI_ACTIVITY_KIND_MEMCPY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMemcpy {
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation_id: u32,
}

/// `CUPTI_ACTIVITY_KIND_MEMSET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMemset {
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub memory_kind: u16,
}

/// Which API a [`RawApi`] record is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiDomain {
    Driver,
    Runtime,
}

/// `CUPTI_ACTIVITY_KIND_DRIVER` / `RUNTIME`: one API call on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawApi {
    pub domain: ApiDomain,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

/// `CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION`: an API call made while an external id was pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawExternal {
    pub external_kind: u32,
    pub external_id: u64,
    pub correlation_id: u32,
}

fn u8_at(b: &[u8], off: usize) -> u8 {
    b[off]
}
fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
fn i32_at(b: &[u8], off: usize) -> i32 {
    u32_at(b, off) as i32
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

fn need<T>(kind: u32, b: &[u8]) -> Result<(), Truncated> {
    if b.len() < size_of::<T>() {
        return Err(Truncated { kind, need: size_of::<T>(), have: b.len() });
    }
    Ok(())
}

/// The kind of the record starting at `b[0]`.
pub fn kind_of(b: &[u8]) -> Option<u32> {
    (b.len() >= 4).then(|| u32_at(b, 0))
}

/// Parses the record that starts at `b[0]`; `b` may extend past it.
pub fn parse(b: &[u8]) -> Result<Raw, Truncated> {
    let Some(kind) = kind_of(b) else { return Err(Truncated { kind: 0, need: 4, have: b.len() }) };
    const KERNEL: u32 = K::CUPTI_ACTIVITY_KIND_KERNEL as u32;
    const CONCURRENT_KERNEL: u32 = K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32;
    const MEMCPY: u32 = K::CUPTI_ACTIVITY_KIND_MEMCPY as u32;
    const MEMSET: u32 = K::CUPTI_ACTIVITY_KIND_MEMSET as u32;
    const DRIVER: u32 = K::CUPTI_ACTIVITY_KIND_DRIVER as u32;
    const RUNTIME: u32 = K::CUPTI_ACTIVITY_KIND_RUNTIME as u32;
    const EXTERNAL: u32 = K::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION as u32;
    Ok(match kind {
        KERNEL | CONCURRENT_KERNEL => {
            need::<Kernel>(kind, b)?;
            Raw::Kernel(RawKernel {
                start: u64_at(b, offset_of!(Kernel, start)),
                end: u64_at(b, offset_of!(Kernel, end)),
                device: u32_at(b, offset_of!(Kernel, deviceId)),
                context: u32_at(b, offset_of!(Kernel, contextId)),
                stream: u32_at(b, offset_of!(Kernel, streamId)),
                grid: [
                    i32_at(b, offset_of!(Kernel, gridX)),
                    i32_at(b, offset_of!(Kernel, gridY)),
                    i32_at(b, offset_of!(Kernel, gridZ)),
                ],
                block: [
                    i32_at(b, offset_of!(Kernel, blockX)),
                    i32_at(b, offset_of!(Kernel, blockY)),
                    i32_at(b, offset_of!(Kernel, blockZ)),
                ],
                registers_per_thread: u16_at(b, offset_of!(Kernel, registersPerThread)),
                static_shared: i32_at(b, offset_of!(Kernel, staticSharedMemory)),
                dynamic_shared: i32_at(b, offset_of!(Kernel, dynamicSharedMemory)),
                correlation_id: u32_at(b, offset_of!(Kernel, correlationId)),
                name_ptr: u64_at(b, offset_of!(Kernel, name)),
            })
        }
        MEMCPY => {
            need::<Memcpy>(kind, b)?;
            Raw::Memcpy(RawMemcpy {
                copy_kind: u8_at(b, offset_of!(Memcpy, copyKind)),
                src_kind: u8_at(b, offset_of!(Memcpy, srcKind)),
                dst_kind: u8_at(b, offset_of!(Memcpy, dstKind)),
                bytes: u64_at(b, offset_of!(Memcpy, bytes)),
                start: u64_at(b, offset_of!(Memcpy, start)),
                end: u64_at(b, offset_of!(Memcpy, end)),
                device: u32_at(b, offset_of!(Memcpy, deviceId)),
                context: u32_at(b, offset_of!(Memcpy, contextId)),
                stream: u32_at(b, offset_of!(Memcpy, streamId)),
                correlation_id: u32_at(b, offset_of!(Memcpy, correlationId)),
            })
        }
        MEMSET => {
            need::<Memset>(kind, b)?;
            Raw::Memset(RawMemset {
                bytes: u64_at(b, offset_of!(Memset, bytes)),
                start: u64_at(b, offset_of!(Memset, start)),
                end: u64_at(b, offset_of!(Memset, end)),
                device: u32_at(b, offset_of!(Memset, deviceId)),
                context: u32_at(b, offset_of!(Memset, contextId)),
                stream: u32_at(b, offset_of!(Memset, streamId)),
                correlation_id: u32_at(b, offset_of!(Memset, correlationId)),
                memory_kind: u16_at(b, offset_of!(Memset, memoryKind)),
            })
        }
        DRIVER | RUNTIME => {
            need::<Api>(kind, b)?;
            Raw::Api(RawApi {
                domain: if kind == DRIVER { ApiDomain::Driver } else { ApiDomain::Runtime },
                cbid: u32_at(b, offset_of!(Api, cbid)),
                start: u64_at(b, offset_of!(Api, start)),
                end: u64_at(b, offset_of!(Api, end)),
                thread_id: u32_at(b, offset_of!(Api, threadId)),
                correlation_id: u32_at(b, offset_of!(Api, correlationId)),
                return_value: u32_at(b, offset_of!(Api, returnValue)),
            })
        }
        EXTERNAL => {
            need::<Ext>(kind, b)?;
            Raw::External(RawExternal {
                external_kind: u32_at(b, offset_of!(Ext, externalKind)),
                external_id: u64_at(b, offset_of!(Ext, externalId)),
                correlation_id: u32_at(b, offset_of!(Ext, correlationId)),
            })
        }
        other => Raw::Other { kind: other },
    })
}

impl Raw {
    /// The CUPTI correlation id tying the record to the API call that caused it.
    pub fn correlation_id(&self) -> Option<u32> {
        match self {
            Raw::Kernel(k) => Some(k.correlation_id),
            Raw::Memcpy(m) => Some(m.correlation_id),
            Raw::Memset(m) => Some(m.correlation_id),
            Raw::Api(a) => Some(a.correlation_id),
            Raw::External(e) => Some(e.correlation_id),
            Raw::Other { .. } => None,
        }
    }
}

/// CUPTI's `CUpti_ActivityMemoryKind` as gpuspan names it.
pub fn memory_kind(code: u32) -> MemoryKind {
    match code {
        1 => MemoryKind::Pageable,
        2 => MemoryKind::Pinned,
        3 | 6 => MemoryKind::Device,
        4 => MemoryKind::Array,
        5 | 7 => MemoryKind::Managed,
        _ => MemoryKind::Unknown,
    }
}

/// CUPTI's `CUpti_ActivityMemcpyKind` as a transfer direction (host↔host has none).
pub fn copy_direction(code: u8) -> Option<Direction> {
    match code {
        1 | 3 => Some(Direction::CpuToGpu),      // HtoD, HtoA
        2 | 4 => Some(Direction::GpuToCpu),      // DtoH, AtoH
        5..=8 | 10 => Some(Direction::GpuToGpu), // AtoA, AtoD, DtoA, DtoD, PtoP
        _ => None,
    }
}

/// The label CUPTI's tools use for a copy kind, used as the activity's name.
pub fn copy_name(code: u8) -> &'static str {
    match code {
        1 => "memcpy HtoD",
        2 => "memcpy DtoH",
        3 => "memcpy HtoA",
        4 => "memcpy AtoH",
        5 => "memcpy AtoA",
        6 => "memcpy AtoD",
        7 => "memcpy DtoA",
        8 => "memcpy DtoD",
        9 => "memcpy HtoH",
        10 => "memcpy PtoP",
        _ => "memcpy",
    }
}

/// What GPU work an API call enqueues, so a scope can tell whether its records are all in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Kernel,
    Copy,
    Set,
    /// A graph launch: any number of kernels, copies and sets, at least one.
    Graph,
}

/// The GPU work a driver or runtime call enqueues, or `None` for calls that enqueue none of the
/// kinds gpuspan records. Lists every launch, memcpy, memset and graph launch entry point of
/// CUDA 13.0 (synchronous, async, `_ptds`/`_ptsz` variants).
pub fn work_of(domain: ApiDomain, cbid: u32) -> Option<Work> {
    let table: &[(u32, Work)] = match domain {
        ApiDomain::Driver => DRIVER_WORK,
        ApiDomain::Runtime => RUNTIME_WORK,
    };
    table.iter().find(|(c, _)| *c == cbid).map(|(_, w)| *w)
}

macro_rules! work_table {
    ($name:ident, $enum:ident, { $($work:ident: [$($cb:ident),* $(,)?]),* $(,)? }) => {
        const $name: &[(u32, Work)] = &[$($(($enum::$cb as u32, Work::$work),)*)*];
    };
}

work_table!(DRIVER_WORK, D, {
    Kernel: [
        CUPTI_DRIVER_TRACE_CBID_cuLaunch, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    ],
    Copy: [
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD, CUPTI_DRIVER_TRACE_CBID_cu64MemcpyHtoD,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH, CUPTI_DRIVER_TRACE_CBID_cu64MemcpyDtoH,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD, CUPTI_DRIVER_TRACE_CBID_cu64MemcpyDtoD,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA, CUPTI_DRIVER_TRACE_CBID_cu64MemcpyDtoA,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD, CUPTI_DRIVER_TRACE_CBID_cu64MemcpyAtoD,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA, CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D,
        CUPTI_DRIVER_TRACE_CBID_cu64Memcpy3D, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync,
        CUPTI_DRIVER_TRACE_CBID_cu64MemcpyHtoDAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync,
        CUPTI_DRIVER_TRACE_CBID_cu64MemcpyDtoHAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync,
        CUPTI_DRIVER_TRACE_CBID_cu64MemcpyDtoDAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync, CUPTI_DRIVER_TRACE_CBID_cu64Memcpy3DAsync,
        CUPTI_DRIVER_TRACE_CBID_cu64Memcpy2D, CUPTI_DRIVER_TRACE_CBID_cu64Memcpy2DUnaligned,
        CUPTI_DRIVER_TRACE_CBID_cu64Memcpy2DAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz,
    ],
    Set: [
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD8,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD16, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD16,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD32, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD32,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD2D8,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD2D16,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD2D32,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD8Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD16Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD32Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD2D8Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD2D16Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async, CUPTI_DRIVER_TRACE_CBID_cu64MemsetD2D32Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz,
    ],
    Graph: [CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz],
});

work_table!(RUNTIME_WORK, R, {
    Kernel: [
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    ],
    Copy: [
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000,
    ],
    Set: [
        CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000,
    ],
    Graph: [CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000],
});

/// A file of captured CUPTI traffic: what `GPUSPAN_CUPTI_DUMP=<path>` writes on a GPU machine,
/// and what the fixtures under `tests/fixtures/cuda/` are. It holds the buffers exactly as CUPTI
/// returned them, the record boundaries CUPTI reported, the kernel names behind the name
/// pointers, and the scope and buffer events needed to replay attribution.
pub mod dump {
    /// First bytes of every dump file.
    pub const MAGIC: &[u8] = b"GPUSPAN-CUPTI-DUMP 1\n";

    /// One entry of a dump, in the order it happened.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Frame {
        /// CUPTI asked for buffer number `seq` (numbered from 1).
        Requested { seq: u64 },
        /// CUPTI returned buffer `seq`; `offsets` are where its records start.
        Buffer { seq: u64, host_ns: u64, offsets: Vec<u32>, bytes: Vec<u8> },
        /// The kernel name behind a name pointer found in a record.
        Name { ptr: u64, name: String },
        /// An annotated scope of site `site` ended with `fence` buffers requested so far.
        Ended { scope_id: u64, fence: u64, host_ns: u64, site: String },
        /// A CUPTI flush of all buffers returned.
        Flushed { host_ns: u64, forced: bool },
        /// A free-form line from the capturing program (what it was doing).
        Note { host_ns: u64, text: String },
    }

    fn put_u64(out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
        put_u64(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    impl Frame {
        /// Appends the frame's encoding to `out`.
        pub fn encode(&self, out: &mut Vec<u8>) {
            match self {
                Frame::Requested { seq } => {
                    out.push(b'R');
                    put_u64(out, *seq);
                }
                Frame::Buffer { seq, host_ns, offsets, bytes } => {
                    out.push(b'B');
                    put_u64(out, *seq);
                    put_u64(out, *host_ns);
                    put_u64(out, offsets.len() as u64);
                    for o in offsets {
                        out.extend_from_slice(&o.to_le_bytes());
                    }
                    put_bytes(out, bytes);
                }
                Frame::Name { ptr, name } => {
                    out.push(b'N');
                    put_u64(out, *ptr);
                    put_bytes(out, name.as_bytes());
                }
                Frame::Ended { scope_id, fence, host_ns, site } => {
                    out.push(b'E');
                    put_u64(out, *scope_id);
                    put_u64(out, *fence);
                    put_u64(out, *host_ns);
                    put_bytes(out, site.as_bytes());
                }
                Frame::Flushed { host_ns, forced } => {
                    out.push(b'F');
                    put_u64(out, *host_ns);
                    out.push(u8::from(*forced));
                }
                Frame::Note { host_ns, text } => {
                    out.push(b'T');
                    put_u64(out, *host_ns);
                    put_bytes(out, text.as_bytes());
                }
            }
        }
    }

    /// A dump that cannot be read. Reading is replay's business (tests), writing the live one's.
    #[cfg(any(test, feature = "testing"))]
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum DumpError {
        #[error("not a gpuspan CUPTI dump (it must start with {MAGIC:?}); write one with GPUSPAN_CUPTI_DUMP=<path>")]
        Magic,
        #[error("the dump is cut off at byte {0}: the capturing program probably stopped while writing it")]
        Truncated(usize),
        #[error("unknown frame tag {tag:#04x} at byte {at}: the dump comes from a newer gpuspan")]
        Tag { tag: u8, at: usize },
    }

    #[cfg(any(test, feature = "testing"))]
    struct Reader<'a> {
        b: &'a [u8],
        at: usize,
    }

    #[cfg(any(test, feature = "testing"))]
    impl Reader<'_> {
        fn take(&mut self, n: usize) -> Result<&[u8], DumpError> {
            let end = self.at.checked_add(n).filter(|e| *e <= self.b.len()).ok_or(DumpError::Truncated(self.at))?;
            let s = &self.b[self.at..end];
            self.at = end;
            Ok(s)
        }
        fn u64(&mut self) -> Result<u64, DumpError> {
            Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
        }
        fn u8(&mut self) -> Result<u8, DumpError> {
            Ok(self.take(1)?[0])
        }
        fn bytes(&mut self) -> Result<Vec<u8>, DumpError> {
            let n = self.u64()? as usize;
            Ok(self.take(n)?.to_vec())
        }
    }

    /// Reads every frame of a dump.
    #[cfg(any(test, feature = "testing"))]
    pub fn read(b: &[u8]) -> Result<Vec<Frame>, DumpError> {
        if !b.starts_with(MAGIC) {
            return Err(DumpError::Magic);
        }
        let mut r = Reader { b, at: MAGIC.len() };
        let mut frames = Vec::new();
        while r.at < b.len() {
            let at = r.at;
            let frame = match r.u8()? {
                b'R' => Frame::Requested { seq: r.u64()? },
                b'B' => {
                    let seq = r.u64()?;
                    let host_ns = r.u64()?;
                    let n = r.u64()? as usize;
                    let offsets = (0..n)
                        .map(|_| Ok(u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"))))
                        .collect::<Result<Vec<_>, DumpError>>()?;
                    Frame::Buffer { seq, host_ns, offsets, bytes: r.bytes()? }
                }
                b'N' => Frame::Name { ptr: r.u64()?, name: String::from_utf8_lossy(&r.bytes()?).into_owned() },
                b'E' => Frame::Ended {
                    scope_id: r.u64()?,
                    fence: r.u64()?,
                    host_ns: r.u64()?,
                    site: String::from_utf8_lossy(&r.bytes()?).into_owned(),
                },
                b'F' => Frame::Flushed { host_ns: r.u64()?, forced: r.u8()? != 0 },
                b'T' => Frame::Note { host_ns: r.u64()?, text: String::from_utf8_lossy(&r.bytes()?).into_owned() },
                tag => return Err(DumpError::Tag { tag, at }),
            };
            frames.push(frame);
        }
        Ok(frames)
    }

    /// The records of a buffer frame, each as the bytes from its offset to the next one.
    pub fn records<'a>(offsets: &'a [u32], bytes: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        offsets.iter().enumerate().map(move |(i, &o)| {
            let end = offsets.get(i + 1).map_or(bytes.len(), |&n| n as usize);
            &bytes[(o as usize).min(bytes.len())..end.min(bytes.len())]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_cuda_13_0() {
        // The offsets every parser above depends on; a cudarc upgrade that moves them fails here.
        assert_eq!(offset_of!(Kernel, start), 16);
        assert_eq!(offset_of!(Memcpy, bytes), 8);
        assert_eq!(offset_of!(Api, correlationId), 32);
        assert_eq!(offset_of!(Ext, externalId), 8);
    }

    #[test]
    fn tables_hold_the_common_entry_points() {
        assert_eq!(work_of(ApiDomain::Driver, D::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32), Some(Work::Kernel));
        assert_eq!(
            work_of(ApiDomain::Driver, D::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 as u32),
            Some(Work::Copy)
        );
        assert_eq!(
            work_of(ApiDomain::Runtime, R::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020 as u32),
            Some(Work::Set)
        );
        assert_eq!(work_of(ApiDomain::Driver, D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent as u32), None);
    }

    #[test]
    fn dump_round_trips() {
        let frames = vec![
            dump::Frame::Requested { seq: 1 },
            dump::Frame::Buffer { seq: 1, host_ns: 5, offsets: vec![0, 8], bytes: vec![1; 16] },
            dump::Frame::Name { ptr: 0xdead, name: "_Z4spinv".into() },
            dump::Frame::Ended { scope_id: 7, fence: 1, host_ns: 9, site: "spin".into() },
            dump::Frame::Flushed { host_ns: 10, forced: true },
            dump::Frame::Note { host_ns: 11, text: "hello".into() },
        ];
        let mut out = dump::MAGIC.to_vec();
        frames.iter().for_each(|f| f.encode(&mut out));
        assert_eq!(dump::read(&out).unwrap(), frames);
        assert!(matches!(dump::read(&out[..out.len() - 1]), Err(dump::DumpError::Truncated(_))));
    }
}
