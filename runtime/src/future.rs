//! Async functions: the scope lives in a future wrapper that enters the host span around each
//! poll (never across an `.await`). On completion it hands the scope back with the output, so
//! the generated code, which knows the output's concrete type, can tell whether it is an `Err`.

use crate::scope::Scope;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// The future an instrumented `async fn` awaits. Dropping it before completion
    /// (cancellation) ends the scope as well.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless awaited"]
    pub struct ScopedFuture<F> {
        scope: Option<Scope>,
        #[pin]
        inner: F,
    }
}

impl<F: Future> ScopedFuture<F> {
    /// Runs `inner` inside `scope`, entering its host span around each poll.
    pub fn new(mut scope: Scope, inner: F) -> Self {
        scope.detach_span();
        ScopedFuture { scope: Some(scope), inner }
    }
}

impl<F: Future> Future for ScopedFuture<F> {
    type Output = (F::Output, Scope);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let entered = this.scope.as_ref().and_then(Scope::span).map(|s| s.clone().entered());
        if let Some(s) = this.scope.as_mut() {
            s.resume();
        }
        let out = this.inner.poll(cx);
        if let Some(s) = this.scope.as_mut() {
            s.suspend();
        }
        drop(entered);
        match out {
            Poll::Ready(value) => match this.scope.take() {
                Some(scope) => Poll::Ready((value, scope)),
                None => panic!("ScopedFuture polled after completion"),
            },
            Poll::Pending => Poll::Pending,
        }
    }
}
