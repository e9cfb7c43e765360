//! Test support for the ported tracing-attributes tests: `block_on_future` and `PollN`, as
//! tracing's own (unpublished) `tracing-test` crate provides them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that is pending `finish_at - 1` times (waking itself), then ready with a value.
#[derive(Debug)]
pub struct PollN<T, E> {
    and_return: Option<Result<T, E>>,
    finish_at: usize,
    polls: usize,
}

impl<T: Unpin, E: Unpin> Future for PollN<T, E> {
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.polls += 1;
        if this.polls == this.finish_at {
            Poll::Ready(this.and_return.take().expect("polled after ready"))
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl PollN<(), ()> {
    /// Ready with `Ok(())` at the `finish_at`-th poll.
    pub fn new_ok(finish_at: usize) -> Self {
        Self { and_return: Some(Ok(())), finish_at, polls: 0 }
    }

    /// Ready with `Err(())` at the `finish_at`-th poll.
    pub fn new_err(finish_at: usize) -> Self {
        Self { and_return: Some(Err(())), finish_at, polls: 0 }
    }
}

/// Polls `future` on this thread until it is ready.
pub fn block_on_future<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            break v;
        }
    }
}
