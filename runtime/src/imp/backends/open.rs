//! The constructors of [`Scope`] that name a backend: a CUDA site's scope, and a bare site's once
//! CUDA is timed. Part of the seam (with `backends.rs`, the one place that names backends), and
//! above the scope: `scope.rs` calls [`Scope::open_bare`] without naming a backend, and the
//! backends' own modules never open a `Scope` (imports run one way, decision 66).

use crate::scope::Scope;
use crate::site::Site;
use tracing::Span;

/// The scopes of CUDA sites: the backend makes their GPU part (`cuda::scope_start`,
/// `cuda::scope_bare`).
#[cfg(feature = "cuda")]
impl Scope {
    /// Opens the scope of a CUDA site; `stream` is the site's stream, if it names one.
    #[inline]
    pub fn cuda(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        stream: Option<&cudarc::driver::CudaStream>,
    ) -> Scope {
        Scope::open_timed(site, span, bytes, |id| crate::cuda::scope_start(id, stream))
    }

    /// The scope of a bare site (no GPU resource in its signature) once CUDA is timed: under
    /// CUPTI the CUDA work it launches is attributed to it; a call that launched none stays
    /// host-timed.
    #[inline(never)]
    pub(crate) fn cuda_watched(site: &'static Site, span: Span, bytes: Option<u64>) -> Scope {
        Scope::open_timed(site, span, bytes, crate::cuda::scope_bare)
    }

    /// Opens a bare scope as the backend that watches bare scopes (`backends::watches_bare`)
    /// does.
    #[inline(always)]
    pub(crate) fn open_bare(site: &'static Site, span: Span, bytes: Option<u64>) -> Scope {
        Scope::cuda_watched(site, span, bytes)
    }
}

/// Without a backend that watches bare scopes, never called (`backends::watches_bare` is false).
#[cfg(not(feature = "cuda"))]
impl Scope {
    #[inline(always)]
    pub(crate) fn open_bare(site: &'static Site, span: Span, bytes: Option<u64>) -> Scope {
        Scope::open(site, span, bytes, |_| crate::backends::GpuScope::None)
    }
}
