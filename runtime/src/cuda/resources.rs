//! What a `#[gpu_kernel]` CUDA site accepts as its stream: a `CudaStream` or an
//! `Arc<CudaStream>`, behind any number of references, as a parameter or as `stream = <expr>`.

use cudarc::driver::CudaStream;
use std::sync::Arc;

/// A value that names the CUDA stream a call works on (used by the CUDA-event fallback).
///
/// The message is what a user sees for `stream = <expr>` of the wrong type, at the expression.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a CUDA stream",
    label = "`stream = ...` needs a `cudarc::driver::CudaStream` or an `Arc<CudaStream>`, or a reference to one"
)]
pub trait AsStream {
    /// The stream.
    fn as_cuda_stream(&self) -> &CudaStream;
}

impl AsStream for CudaStream {
    fn as_cuda_stream(&self) -> &CudaStream {
        self
    }
}

impl AsStream for Arc<CudaStream> {
    fn as_cuda_stream(&self) -> &CudaStream {
        self
    }
}

impl<T: AsStream + ?Sized> AsStream for &T {
    fn as_cuda_stream(&self) -> &CudaStream {
        (**self).as_cuda_stream()
    }
}

impl<T: AsStream + ?Sized> AsStream for &mut T {
    fn as_cuda_stream(&self) -> &CudaStream {
        (**self).as_cuda_stream()
    }
}

/// Called by the generated code on the stream parameter or `stream = <expr>`.
#[inline]
pub fn as_stream<T: AsStream + ?Sized>(t: &T) -> &CudaStream {
    t.as_cuda_stream()
}
