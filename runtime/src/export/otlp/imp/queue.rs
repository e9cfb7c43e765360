//! The span export queue: bounded, drained by one thread gpuspan owns, and exact about what
//! happened to every span (exported, dropped because the queue was full, failed, or still
//! pending when shutdown ran out of time).
//!
//! The SDK's batch processor does the same job but keeps its drop count private and cannot
//! bound an export that hangs; this one counts into [`losses`] and gives up at a deadline.
//!
//! A record's spans (host, GPU, activities) are admitted together or not at all: the spans sink
//! reserves room for all of them first (a thread-local grant, since the SDK ends a span on the
//! thread that ends it), so a full queue never exports a child without its parent.

use super::transport::Io;
use crate::diagnostics::{losses, Losses};
use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What became of the spans given to the queue. `enqueued = exported + failed + abandoned +
/// pending`; `dropped` spans never entered.
#[derive(Debug, Default)]
pub(super) struct SpanCounts {
    pub enqueued: AtomicU64,
    pub exported: AtomicU64,
    /// Not admitted: the queue was full.
    pub dropped: AtomicU64,
    /// The collector did not take them (unreachable, refused, timed out).
    pub failed: AtomicU64,
    /// Still queued or in flight when shutdown's deadline passed.
    pub abandoned: AtomicU64,
    /// Enqueued and not yet resolved either way.
    pending: AtomicU64,
}

impl SpanCounts {
    /// Settles `n` pending spans, unless shutdown already wrote them off as abandoned.
    fn settle(&self, n: u64, ok: bool) {
        if self.pending.fetch_update(Relaxed, Relaxed, |p| p.checked_sub(n)).is_err() {
            return;
        }
        if ok {
            self.exported.fetch_add(n, Relaxed);
        } else {
            self.failed.fetch_add(n, Relaxed);
            Losses::add(&losses().otlp_spans_failed, n);
        }
    }

    fn drop_full(&self, n: u64) {
        self.dropped.fetch_add(n, Relaxed);
        Losses::add(&losses().otlp_spans_dropped, n);
    }
}

#[derive(Debug, Default)]
struct State {
    spans: VecDeque<SpanData>,
    /// Room promised to record groups being built.
    reserved: usize,
    /// Something was turned away since the last export: send now rather than on schedule.
    full: bool,
    flush_requested: u64,
    flush_done: u64,
    shutdown: bool,
    exited: bool,
}

/// The part shared by the SDK-facing processor, the spans sink and the export thread.
#[derive(Debug)]
pub(super) struct Queue {
    state: Mutex<State>,
    /// Wakes the export thread.
    work: Condvar,
    /// Tells waiters that a flush finished or the thread exited.
    progress: Condvar,
    capacity: usize,
    batch: usize,
    pub counts: SpanCounts,
    warned_full: AtomicBool,
}

thread_local! {
    /// Spans of the record group being ended on this thread that already have room.
    static GRANTED: Cell<usize> = const { Cell::new(0) };
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves room for `n` spans that the calling thread is about to end; `false` (and the
    /// `n` spans counted as dropped) when they do not all fit.
    pub(super) fn reserve(&self, n: usize) -> bool {
        let mut st = self.lock();
        if st.shutdown || st.spans.len() + st.reserved + n > self.capacity {
            self.turned_away(st, n);
            return false;
        }
        st.reserved += n;
        GRANTED.with(|g| g.set(g.get() + n));
        true
    }

    /// Gives back what the calling thread reserved and did not use (spans the sampler did not
    /// record).
    pub(super) fn release_unused(&self) {
        let left = GRANTED.with(|g| g.replace(0));
        if left > 0 {
            let mut st = self.lock();
            st.reserved = st.reserved.saturating_sub(left);
        }
    }

    fn push(&self, span: SpanData) {
        let granted = GRANTED.with(|g| {
            let n = g.get();
            if n > 0 {
                g.set(n - 1);
            }
            n > 0
        });
        let mut st = self.lock();
        if granted {
            st.reserved = st.reserved.saturating_sub(1);
        }
        // After shutdown nothing is exported any more: a span arriving then is lost too.
        if st.shutdown || (!granted && st.spans.len() + st.reserved >= self.capacity) {
            self.turned_away(st, 1);
            return;
        }
        st.spans.push_back(span);
        self.counts.enqueued.fetch_add(1, Relaxed);
        self.counts.pending.fetch_add(1, Relaxed);
        if st.spans.len() >= self.batch {
            self.work.notify_one();
        }
    }

    /// Counts `n` spans that did not fit, and has the export thread send what is queued now.
    fn turned_away(&self, mut st: MutexGuard<'_, State>, n: usize) {
        st.full = true;
        drop(st);
        self.work.notify_one();
        self.counts.drop_full(n as u64);
        self.warn_full();
    }

    fn warn_full(&self) {
        if !self.warned_full.swap(true, Relaxed) {
            crate::diagnostics::note_once(format_args!(
                "the OTLP span queue is full ({} spans): dropping spans, counted in the summary. Raise OTEL_BSP_MAX_QUEUE_SIZE, \
                 or export fewer calls (GPUSPAN_THRESHOLD_US)",
                self.capacity
            ));
        }
    }

    /// Asks the export thread to send everything queued now, waiting until `deadline`.
    pub(super) fn flush(&self, deadline: Instant) -> bool {
        let mut st = self.lock();
        st.flush_requested += 1;
        let ticket = st.flush_requested;
        self.work.notify_one();
        while st.flush_done < ticket && !st.exited {
            let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else {
                return false;
            };
            st = self.progress.wait_timeout(st, left).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
        }
        st.flush_done >= ticket
    }

    /// Stops admitting spans and lets the thread export what is queued, waiting until
    /// `deadline`; what is still pending then is written off as abandoned.
    fn shutdown(&self, deadline: Instant) -> bool {
        let mut st = self.lock();
        st.shutdown = true;
        self.work.notify_one();
        while !st.exited {
            let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else {
                break;
            };
            st = self.progress.wait_timeout(st, left).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
        }
        let exited = st.exited;
        drop(st);
        let left = self.counts.pending.swap(0, Relaxed);
        if left > 0 {
            self.counts.abandoned.fetch_add(left, Relaxed);
            Losses::add(&losses().otlp_spans_failed, left);
        }
        exited
    }
}

/// The processor the tracer provider calls; owns the export thread.
#[derive(Debug)]
pub(super) struct QueueProcessor {
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
    resource: Arc<Mutex<Option<Resource>>>,
}

/// How the export thread reaches the collector.
pub(super) struct Worker<E> {
    pub exporter: E,
    pub io: Arc<Io>,
    pub timeout: Duration,
    pub delay: Duration,
    /// Where failures are reported; secrets removed from error text.
    pub describe_failure: Box<dyn Fn(&str) -> String + Send>,
}

impl QueueProcessor {
    pub(super) fn start<E: SpanExporter + 'static>(
        capacity: usize,
        batch: usize,
        worker: Worker<E>,
    ) -> std::io::Result<Self> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            progress: Condvar::new(),
            capacity,
            batch: batch.min(capacity).max(1),
            counts: SpanCounts::default(),
            warned_full: AtomicBool::new(false),
        });
        let resource = Arc::new(Mutex::new(None));
        let (q, r) = (queue.clone(), resource.clone());
        let thread =
            std::thread::Builder::new().name("gpuspan-otlp-spans".into()).spawn(move || run(&q, &r, worker))?;
        Ok(QueueProcessor { queue, thread: Mutex::new(Some(thread)), resource })
    }

    pub(super) fn queue(&self) -> Arc<Queue> {
        self.queue.clone()
    }
}

/// Batches sent at once when the queue holds a backlog: while the collector takes one, the next
/// is converted and encoded (decision 32).
const IN_FLIGHT: usize = 4;

/// The export thread: waits for a full batch, a flush, shutdown or the schedule delay, then
/// sends everything queued in batches, up to [`IN_FLIGHT`] of them at once.
fn run<E: SpanExporter>(q: &Queue, resource: &Mutex<Option<Resource>>, mut w: Worker<E>) {
    // Whatever the exporter does must not produce telemetry of its own.
    let _quiet = Context::enter_telemetry_suppressed_scope();
    super::layer::mark_export_thread();
    let mut failing = false;
    let mut last = Instant::now();
    loop {
        let (batches, flush_ticket, shutdown) = {
            let mut st = q.lock();
            loop {
                if let Some(r) = resource.lock().ok().and_then(|mut r| r.take()) {
                    w.exporter.set_resource(&r);
                }
                let due = last.elapsed() >= w.delay;
                if st.shutdown
                    || st.flush_requested > st.flush_done
                    || st.spans.len() >= q.batch
                    || (!st.spans.is_empty() && (due || st.full))
                {
                    break;
                }
                if due {
                    last = Instant::now();
                }
                let wait = w.delay.saturating_sub(last.elapsed()).max(Duration::from_millis(1));
                st = q.work.wait_timeout(st, wait).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
            }
            let mut batches: Vec<Vec<SpanData>> = Vec::new();
            while !st.spans.is_empty() && batches.len() < IN_FLIGHT {
                let n = st.spans.len().min(q.batch);
                // Only whole batches go out together; a short one goes out alone, at its time.
                if n < q.batch && !batches.is_empty() {
                    break;
                }
                batches.push(st.spans.drain(..n).collect());
            }
            st.full = false;
            let more = !st.spans.is_empty();
            // A flush or shutdown is complete once the queue has been emptied.
            let ticket = (!more).then_some(st.flush_requested);
            (batches, ticket, st.shutdown && !more)
        };
        last = Instant::now();
        if !batches.is_empty() {
            let sizes: Vec<u64> = batches.iter().map(|b| b.len() as u64).collect();
            for (n, result) in sizes.into_iter().zip(export_all(&w, batches)) {
                match result {
                    Ok(()) => {
                        if failing {
                            crate::diagnostics::note_once(
                                "OTLP span export recovered; spans lost meanwhile are counted in the summary",
                            );
                        }
                        failing = false;
                        q.counts.settle(n, true);
                    }
                    Err(e) => {
                        if !failing {
                            crate::diagnostics::note_once((w.describe_failure)(&e.to_string()));
                        }
                        failing = true;
                        q.counts.settle(n, false);
                    }
                }
            }
        }
        if let Some(ticket) = flush_ticket {
            let mut st = q.lock();
            st.flush_done = st.flush_done.max(ticket);
            q.progress.notify_all();
        }
        if shutdown {
            let _ = w.exporter.shutdown();
            q.lock().exited = true;
            q.progress.notify_all();
            return;
        }
    }
}

/// Exports the batches concurrently (one request each) within one timeout; the result of each.
/// A batch that had not finished when the timeout or shutdown's deadline cut the rest off gets
/// that error.
fn export_all<E: SpanExporter>(w: &Worker<E>, batches: Vec<Vec<SpanData>>) -> Vec<OTelSdkResult> {
    let mut exports: Vec<_> = batches.into_iter().map(|b| Box::pin(w.exporter.export(b))).collect();
    let mut results: Vec<Option<OTelSdkResult>> = exports.iter().map(|_| None).collect();
    let all = std::future::poll_fn(|cx| {
        let mut pending = false;
        for (export, result) in exports.iter_mut().zip(results.iter_mut()) {
            if result.is_none() {
                match export.as_mut().poll(cx) {
                    std::task::Poll::Ready(r) => *result = Some(r),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    });
    let outcome = w.io.run(w.timeout, async move {
        all.await;
        Ok(())
    });
    drop(exports);
    // Every export finished unless the whole was cut off: the first that had not gets that
    // error as it was, the others its text.
    let cut = outcome.as_ref().err().map_or_else(|| "did not finish".to_owned(), ToString::to_string);
    let mut outcome = Some(outcome.and(Err(OTelSdkError::InternalFailure(cut.clone()))));
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| outcome.take().unwrap_or_else(|| Err(OTelSdkError::InternalFailure(cut.clone())))))
        .collect()
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.queue.push(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let timeout = Duration::from_secs(5);
        if self.queue.flush(Instant::now() + timeout) {
            Ok(())
        } else {
            Err(OTelSdkError::Timeout(timeout))
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        if self.queue.shutdown(Instant::now() + timeout) {
            if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
                let _ = t.join();
            }
            Ok(())
        } else {
            // The thread is stuck in an export: leave it; the process is ending.
            Err(OTelSdkError::Timeout(timeout))
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        if let Ok(mut r) = self.resource.lock() {
            *r = Some(resource.clone());
        }
        self.queue.work.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::{export_all, Io, Worker};
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status};
    use opentelemetry::InstrumentationScope;
    use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
    use std::time::{Duration, SystemTime};

    /// Answers an export only once `together` exports are waiting at once; refuses batches of 3.
    #[derive(Debug)]
    struct Together(tokio::sync::Barrier);

    impl SpanExporter for Together {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.wait().await;
            if batch.len() == 3 {
                Err(OTelSdkError::InternalFailure("refused".into()))
            } else {
                Ok(())
            }
        }
    }

    fn batch(n: usize) -> Vec<SpanData> {
        let span = SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "s".into(),
            start_time: SystemTime::UNIX_EPOCH,
            end_time: SystemTime::UNIX_EPOCH,
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder("test").build(),
        };
        vec![span; n]
    }

    fn worker(together: usize, timeout: Duration) -> Worker<Together> {
        Worker {
            exporter: Together(tokio::sync::Barrier::new(together)),
            io: Io::new().expect("the export runtime starts"),
            timeout,
            delay: Duration::from_secs(5),
            describe_failure: Box::new(str::to_owned),
        }
    }

    #[test]
    fn batches_in_flight_together_are_settled_each_on_its_own() {
        // Two exports that can only finish together: sent one after the other, both would time out.
        let w = worker(2, Duration::from_secs(20));
        let results = export_all(&w, vec![batch(4), batch(3)]);
        assert!(matches!(results.as_slice(), [Ok(()), Err(OTelSdkError::InternalFailure(why))] if why == "refused"));
    }

    #[test]
    fn exports_cut_off_by_the_timeout_all_fail() {
        let w = worker(3, Duration::from_millis(200));
        let results = export_all(&w, vec![batch(4), batch(4)]);
        assert_eq!(results.len(), 2);
        assert!(matches!(results[0], Err(OTelSdkError::Timeout(_))), "{results:?}");
        assert!(
            matches!(&results[1], Err(OTelSdkError::InternalFailure(why)) if why.contains("timed out")),
            "{results:?}"
        );
    }
}
