//! CUPTI activity records, read from raw bytes.
//!
//! Nothing here calls CUPTI, so the same code reads live buffers and buffers captured on a GPU
//! machine (test fixtures, see [`super::dump`]). Fields are read at the offsets of cudarc's bindings for
//! CUDA 13.0 (`CUpti_ActivityKernel10`, `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemcpyPtoP4`,
//! `CUpti_ActivityMemset4`, `CUpti_ActivityAPI`, `CUpti_ActivityExternalCorrelation`,
//! `CUpti_ActivitySynchronization2`) as plain
//! little-endian integers, never by casting bytes to those structs: an unknown enum value in a
//! buffer must not be undefined behaviour.

use crate::record::MemoryKind;
use crate::site::Direction;
use cudarc::cupti::sys::{
    CUpti_ActivityAPI as Api, CUpti_ActivityExternalCorrelation as Ext, CUpti_ActivityKernel10 as Kernel,
    CUpti_ActivityKind as K, CUpti_ActivityMemcpy6 as Memcpy, CUpti_ActivityMemcpyPtoP4 as PeerMemcpy,
    CUpti_ActivityMemset4 as Memset, CUpti_ActivitySynchronization2 as Sync,
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
    Sync(RawSync),
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

/// `CUPTI_ACTIVITY_KIND_MEMCPY`, or `MEMCPY2` (a copy between two devices, or two contexts of
/// one device: CUPTI reports those only under that kind).
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
    /// CUPTI's activity flags: bit 0 (`CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC`) for an async API.
    pub flags: u8,
    /// For `MEMCPY2`: the devices copied from and to (`deviceId` is the one running the copy).
    pub peer: Option<PeerDevices>,
}

impl RawMemcpy {
    /// Whether the copy had completed when the API call that made it returned, by CUDA's rules
    /// ("API synchronization behavior"): a copy to host memory from a synchronous call, or to
    /// pageable memory from an async one; a synchronous copy from pinned memory; host to host.
    /// A synchronous copy from pageable memory returns once staged, and device-to-device
    /// copies never wait: those are not.
    pub fn ends_before_return(&self) -> bool {
        const PAGEABLE: u8 = 1;
        const PINNED: u8 = 2;
        let host = |k: u8| k == PAGEABLE || k == PINNED;
        let synchronous_api = self.flags & 1 == 0;
        match (host(self.src_kind), host(self.dst_kind)) {
            (true, true) => true,
            (false, true) => synchronous_api || self.dst_kind == PAGEABLE,
            (true, false) => synchronous_api && self.src_kind == PINNED,
            (false, false) => false,
        }
    }
}

/// The two ends of a peer copy, by CUPTI device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerDevices {
    pub src_device: u32,
    pub dst_device: u32,
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

/// `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`: a synchronizing call (its interval on CUPTI's CPU
/// clock, like an API record's); once it returned, the work it waited for had ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSync {
    /// `CUpti_ActivitySynchronizationType`: 1 event synchronize, 2 stream wait event, 3 stream
    /// synchronize, 4 context synchronize.
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub context: u32,
    pub stream: u32,
    pub return_value: u32,
}

/// What a synchronizing call that returned proves to have ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronized {
    /// Every piece of work enqueued on this stream (CUPTI's stream id) before the call began.
    Stream(u32),
    /// Every piece of work enqueued in this context (CUPTI's context id) before the call began.
    Context(u32),
}

impl RawSync {
    /// What the call waited for, if it returned successfully and waited for work gpuspan can
    /// name (an event synchronize waits for work up to the event's record, which CUPTI does
    /// not say; a stream waiting for an event does not block the host).
    pub fn synchronized(&self) -> Option<Synchronized> {
        const STREAM: u32 = 3;
        const CONTEXT: u32 = 4;
        match self.sync_type {
            _ if self.return_value != 0 || self.end < self.start => None,
            STREAM => Some(Synchronized::Stream(self.stream)),
            CONTEXT => Some(Synchronized::Context(self.context)),
            _ => None,
        }
    }
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

/// A copy record's common fields, from CUPTI's plain (`MEMCPY`) or peer (`MEMCPY2`) layout:
/// the two structs name them alike at different offsets.
macro_rules! memcpy {
    ($t:ty, $b:expr, $peer:expr) => {
        RawMemcpy {
            copy_kind: u8_at($b, offset_of!($t, copyKind)),
            src_kind: u8_at($b, offset_of!($t, srcKind)),
            dst_kind: u8_at($b, offset_of!($t, dstKind)),
            bytes: u64_at($b, offset_of!($t, bytes)),
            start: u64_at($b, offset_of!($t, start)),
            end: u64_at($b, offset_of!($t, end)),
            device: u32_at($b, offset_of!($t, deviceId)),
            context: u32_at($b, offset_of!($t, contextId)),
            stream: u32_at($b, offset_of!($t, streamId)),
            correlation_id: u32_at($b, offset_of!($t, correlationId)),
            flags: u8_at($b, offset_of!($t, flags)),
            peer: $peer,
        }
    };
}

/// Parses the record that starts at `b[0]`; `b` may extend past it.
pub fn parse(b: &[u8]) -> Result<Raw, Truncated> {
    let Some(kind) = kind_of(b) else { return Err(Truncated { kind: 0, need: 4, have: b.len() }) };
    const KERNEL: u32 = K::CUPTI_ACTIVITY_KIND_KERNEL as u32;
    const CONCURRENT_KERNEL: u32 = K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32;
    const MEMCPY: u32 = K::CUPTI_ACTIVITY_KIND_MEMCPY as u32;
    const MEMCPY2: u32 = K::CUPTI_ACTIVITY_KIND_MEMCPY2 as u32;
    const MEMSET: u32 = K::CUPTI_ACTIVITY_KIND_MEMSET as u32;
    const DRIVER: u32 = K::CUPTI_ACTIVITY_KIND_DRIVER as u32;
    const RUNTIME: u32 = K::CUPTI_ACTIVITY_KIND_RUNTIME as u32;
    const EXTERNAL: u32 = K::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION as u32;
    const SYNCHRONIZATION: u32 = K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION as u32;
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
            Raw::Memcpy(memcpy!(Memcpy, b, None))
        }
        MEMCPY2 => {
            need::<PeerMemcpy>(kind, b)?;
            let peer = PeerDevices {
                src_device: u32_at(b, offset_of!(PeerMemcpy, srcDeviceId)),
                dst_device: u32_at(b, offset_of!(PeerMemcpy, dstDeviceId)),
            };
            Raw::Memcpy(memcpy!(PeerMemcpy, b, Some(peer)))
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
        SYNCHRONIZATION => {
            need::<Sync>(kind, b)?;
            Raw::Sync(RawSync {
                sync_type: u32_at(b, offset_of!(Sync, type_)),
                start: u64_at(b, offset_of!(Sync, start)),
                end: u64_at(b, offset_of!(Sync, end)),
                correlation_id: u32_at(b, offset_of!(Sync, correlationId)),
                context: u32_at(b, offset_of!(Sync, contextId)),
                stream: u32_at(b, offset_of!(Sync, streamId)),
                return_value: u32_at(b, offset_of!(Sync, returnValue)),
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
            Raw::Sync(s) => Some(s.correlation_id),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// CUDA's rules for when a copy has completed as its call returns (kinds: 1 pageable,
    /// 2 pinned, 3 device; flag bit 0: an async API).
    #[test]
    fn copies_that_end_before_their_call_returns() {
        let copy = |src_kind: u8, dst_kind: u8, flags: u8| RawMemcpy {
            copy_kind: 0,
            src_kind,
            dst_kind,
            flags,
            bytes: 4,
            start: 1,
            end: 2,
            device: 0,
            context: 0,
            stream: 0,
            correlation_id: 0,
            peer: None,
        };
        let (pageable, pinned, device, sync, asynchronous) = (1, 2, 3, 0, 1);
        assert!(copy(device, pageable, sync).ends_before_return());
        assert!(copy(device, pinned, sync).ends_before_return());
        assert!(copy(device, pageable, asynchronous).ends_before_return(), "async to pageable waits");
        assert!(!copy(device, pinned, asynchronous).ends_before_return());
        assert!(copy(pinned, device, sync).ends_before_return());
        assert!(!copy(pageable, device, sync).ends_before_return(), "returns once staged");
        assert!(!copy(pinned, device, asynchronous).ends_before_return());
        assert!(!copy(device, device, sync).ends_before_return());
        assert!(copy(pageable, pinned, asynchronous).ends_before_return(), "host to host");
    }

    #[test]
    fn layouts_are_cuda_13_0() {
        // The offsets every parser above depends on; a cudarc upgrade that moves them fails here.
        assert_eq!(offset_of!(Kernel, start), 16);
        assert_eq!(offset_of!(Memcpy, bytes), 8);
        assert_eq!(offset_of!(Api, correlationId), 32);
        assert_eq!(offset_of!(Ext, externalId), 8);
        assert_eq!(offset_of!(PeerMemcpy, deviceId), 32);
        assert_eq!(offset_of!(PeerMemcpy, srcDeviceId), 44);
        assert_eq!(offset_of!(PeerMemcpy, dstDeviceId), 52);
        assert_eq!(offset_of!(PeerMemcpy, correlationId), 60);
        assert_eq!((offset_of!(Sync, start), offset_of!(Sync, streamId), offset_of!(Sync, returnValue)), (8, 32, 48));
    }

    /// A peer copy arrives as `MEMCPY2`, with the two devices beside the one running it. Built
    /// field by field at the struct's offsets, as CUPTI writes it.
    #[test]
    fn a_peer_copy_record_reads_with_both_devices() {
        let mut b = vec![0u8; size_of::<PeerMemcpy>()];
        let mut put = |off: usize, bytes: &[u8]| b[off..off + bytes.len()].copy_from_slice(bytes);
        put(0, &(K::CUPTI_ACTIVITY_KIND_MEMCPY2 as u32).to_le_bytes());
        put(offset_of!(PeerMemcpy, copyKind), &[10]); // PTOP
        put(offset_of!(PeerMemcpy, srcKind), &[3]);
        put(offset_of!(PeerMemcpy, dstKind), &[3]);
        put(offset_of!(PeerMemcpy, bytes), &(64u64 << 20).to_le_bytes());
        put(offset_of!(PeerMemcpy, start), &1_000u64.to_le_bytes());
        put(offset_of!(PeerMemcpy, end), &2_000u64.to_le_bytes());
        put(offset_of!(PeerMemcpy, deviceId), &1u32.to_le_bytes());
        put(offset_of!(PeerMemcpy, streamId), &7u32.to_le_bytes());
        put(offset_of!(PeerMemcpy, srcDeviceId), &0u32.to_le_bytes());
        put(offset_of!(PeerMemcpy, dstDeviceId), &1u32.to_le_bytes());
        put(offset_of!(PeerMemcpy, correlationId), &42u32.to_le_bytes());
        let Raw::Memcpy(m) = parse(&b).expect("complete record") else { panic!("not a copy") };
        assert_eq!((m.bytes, m.start, m.end, m.device, m.stream, m.correlation_id), (64 << 20, 1_000, 2_000, 1, 7, 42));
        assert_eq!(m.peer, Some(PeerDevices { src_device: 0, dst_device: 1 }));
        assert_eq!(copy_direction(m.copy_kind), Some(Direction::GpuToGpu));
        assert_eq!(copy_name(m.copy_kind), "memcpy PtoP");
        assert!(parse(&b[..b.len() - 1]).is_err(), "a short MEMCPY2 record is refused");
    }
}
