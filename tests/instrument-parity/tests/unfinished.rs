//! Not from tracing-attributes: what issue 26 asked of async functions beyond tracing's suite.
//! Like `tracing::Instrument`, the span is entered for the drop of an unfinished future, so that
//! the destructors of its locals report inside it; the instrumented future stays `Send`.

use gpuspan::gpu_kernel as instrument;
use std::future::Future;
use std::task::{Context, Waker};
use tracing::subscriber::with_default;
use tracing_mock::{expect, subscriber};

struct Loud;

impl Drop for Loud {
    fn drop(&mut self) {
        tracing::info!(dropped = true);
    }
}

#[instrument]
async fn holds_a_local() {
    let _loud = Loud;
    std::future::pending::<()>().await;
}

// The shape under test is the hand-written one.
#[allow(clippy::manual_async_fn)]
#[instrument]
fn returns_a_future_holding_a_local() -> impl Future<Output = ()> + Send {
    async {
        let _loud = Loud;
        std::future::pending::<()>().await;
    }
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

fn dropped_after_one_poll(name: &'static str, make: impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = ()>>>) {
    let span = expect::span().named(name);
    let (subscriber, handle) = subscriber::mock()
        .new_span(span.clone())
        .enter(span.clone())
        .exit(span.clone())
        .enter(span.clone())
        .event(
            expect::event()
                .with_fields(expect::field("dropped").with_value(&true))
                .with_ancestry(expect::has_contextual_parent(name)),
        )
        .exit(span.clone())
        .drop_span(span)
        .only()
        .run_with_handle();
    with_default(subscriber, || {
        let mut fut = make();
        assert!(fut.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        drop(fut);
    });
    handle.assert_finished();
}

#[test]
fn an_async_fn_dropped_unfinished_drops_its_locals_in_its_span() {
    dropped_after_one_poll("holds_a_local", || Box::pin(assert_send(holds_a_local())));
}

#[test]
fn a_returned_future_dropped_unfinished_drops_its_locals_in_its_span() {
    dropped_after_one_poll("returns_a_future_holding_a_local", || {
        Box::pin(assert_send(returns_a_future_holding_a_local()))
    });
}
