//! Tables of CUDA driver and runtime callback ids: which calls enqueue GPU work (a scope whose
//! call enqueued work waits for its activity records), and which frequent calls enqueue none and
//! are not worth recording at all.

use super::records::ApiDomain;
use cudarc::cupti::sys::{CUpti_driver_api_trace_cbid_enum as D, CUpti_runtime_api_trace_cbid_enum as R};

/// What GPU work an API call enqueues, so a scope can tell whether its records are all in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A kernel launch.
    Kernel,
    /// A memcpy.
    Copy,
    /// A memset.
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

/// Driver and runtime calls made at every launch that enqueue no GPU work: their API records
/// (and so their external-correlation records) are not collected, which keeps the per-call cost
/// and the buffer traffic down.
pub(super) const QUIET_DRIVER: &[D] = &[
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetId,
    D::CUPTI_DRIVER_TRACE_CBID_cuCtxGetFlags,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags,
    D::CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetId,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    D::CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
    D::CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    D::CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    D::CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    D::CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,
    D::CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
    D::CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
    D::CUPTI_DRIVER_TRACE_CBID_cuGetErrorName,
    D::CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
];
pub(super) const QUIET_RUNTIME: &[R] = &[
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050,
    R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetId_v12000,
];

#[cfg(test)]
mod tests {
    use super::*;

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
}
