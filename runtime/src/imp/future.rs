//! Async functions: the scope lives in a future wrapper that enters the host span around each
//! poll (never across an `.await`) and around the drop of the future it wraps, as `tracing`'s
//! `Instrumented` does, so that the destructors of an unfinished future's locals run in the span.
//! On completion it hands the scope back with the output, so the generated code, which knows the
//! output's concrete type, can tell whether it is an `Err`.

use crate::scope::Scope;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};
use tracing::Span;

pin_project_lite::pin_project! {
    /// The future an instrumented `async fn` awaits. Dropping it before completion
    /// (cancellation) ends the scope as well.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless awaited"]
    pub struct ScopedFuture<F> {
        scope: Option<Scope>,
        // The host span (when a subscriber wants it), entered per poll and for the drop of
        // `inner`: a handle of its own, since the scope leaves with the output.
        span: Option<Span>,
        #[pin]
        inner: ManuallyDrop<F>,
    }

    impl<F> PinnedDrop for ScopedFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let _entered = this.span.as_ref().map(Span::enter);
            // SAFETY: `inner` is pinned in place and never used again: this is the one drop of
            // the wrapper, so it is dropped exactly once (the same as `Pin::set` to a unit value,
            // without the extra space an `Option` would take).
            unsafe { ManuallyDrop::drop(this.inner.get_unchecked_mut()) }
        }
    }
}

impl<F: Future> ScopedFuture<F> {
    /// Runs `inner` inside `scope`, entering its host span around each poll.
    pub fn new(mut scope: Scope, inner: F) -> Self {
        scope.detach_span();
        let span = scope.span().cloned();
        ScopedFuture { scope: Some(scope), span, inner: ManuallyDrop::new(inner) }
    }
}

impl<F: Future> Future for ScopedFuture<F> {
    type Output = (F::Output, Scope);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.as_ref().map(Span::enter);
        if let Some(s) = this.scope.as_mut() {
            s.resume();
        }
        // SAFETY: `inner` is structurally pinned and only dropped in place, by `PinnedDrop`.
        let inner = unsafe { this.inner.map_unchecked_mut(|f| &mut **f) };
        let out = inner.poll(cx);
        if let Some(s) = this.scope.as_mut() {
            s.suspend();
        }
        match out {
            Poll::Ready(value) => match this.scope.take() {
                Some(scope) => Poll::Ready((value, scope)),
                None => panic!("ScopedFuture polled after completion"),
            },
            Poll::Pending => Poll::Pending,
        }
    }
}
