//! The receiver of a `.submit(..)` call in a queue-bracketed body (`macros/src/submit.rs`),
//! reached through `__private`: low, so that the wgpu backend's `SubmitQueue` impl names it
//! without importing the expansion's facade (imports run one way, decision 66).

/// The receiver of a `.submit(..)` call in a queue-bracketed body: `SubmitQueue` when it is a
/// wgpu queue (the submission then carries the bracket's end, `wgpu/backend/bracket.rs`), else
/// [`SubmitOther`], which leaves the call as written.
#[derive(Debug)]
pub struct SubmitProbe<'a, T: ?Sized>(pub &'a T);

/// The fallback arm: any receiver that is not a wgpu queue, including type parameters.
pub trait SubmitOther {
    /// Nothing to add to this submission.
    fn gpuspan_submit(&self) -> PlainSubmit;
}

impl<T: ?Sized> SubmitOther for &SubmitProbe<'_, T> {
    #[inline(always)]
    fn gpuspan_submit(&self) -> PlainSubmit {
        PlainSubmit
    }
}

/// A submission gpuspan adds nothing to.
#[derive(Debug)]
pub struct PlainSubmit;

impl PlainSubmit {
    /// The argument, unchanged. `ends` is the scope (sync bodies) or its `BracketHandle`
    /// (async bodies).
    #[inline(always)]
    pub fn with_end<A, E: ?Sized>(self, arg: A, _ends: &mut E) -> A {
        arg
    }
}
