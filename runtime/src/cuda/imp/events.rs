//! Timing without CUPTI: two CUDA events around the call on its stream, read back by the one
//! resolver (`crate::resolver`) with `cuEventQuery` (never a synchronize on the caller's work).
//!
//! Events give durations, not dates. Each context gets an anchor: an event recorded on a stream
//! of gpuspan's own, which is idle, so it completes at once; the host clock read before
//! recording and after it completed brackets its GPU time: the calibration. A call's events are
//! known as `cuEventElapsedTime(anchor, event)`, and each call brings two facts that hold
//! whatever the anchor says (decision 38): its start event cannot have completed before the
//! host recorded it, and its end event had completed when `cuEventQuery` first said so. The
//! shared placement (`crate::placement`) keeps them per context and places the call inside them
//! and the anchor's interval; the anchor is renewed every [`ANCHOR_RENEW`] (so the elapsed time
//! stays small enough for f32), or at once when the facts contradicted it, and each anchor
//! starts the facts afresh (a new origin). The duration is `cuEventElapsedTime(start, end)`:
//! stream time between the events, which includes any gap in which the stream waited: an upper
//! bound on the scope's own GPU work, so its records are brackets (to exit), never exact.

use crate::diagnostics::{losses, note_once, Losses};
use crate::placement::{Bounds, ClockMap, Facts};
use crate::record::{GpuTiming, Interval, Record, TimingSource};
use crate::resolver::{PendingWork, Progress};
use crate::{clock, collector};
use cudarc::driver::result::{self, event, stream as cstream};
use cudarc::driver::sys::{CUevent, CUevent_flags, CUstream};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an anchor is used: its interval is widened by 20 ppm of its age when calls are
/// placed (`crate::placement`), 20 µs after a second; and an f32 millisecond count of a second
/// is exact to about 0.1 µs. Making one costs a few event round trips on a calling thread.
const ANCHOR_RENEW: Duration = Duration::from_secs(1);
/// The resolution of `cuEventElapsedTime` ("around 0.5 microseconds", CUDA's documentation).
const EVENT_RESOLUTION_NS: u64 = 500;

#[derive(Debug)]
struct Anchor {
    event: usize,
    host_ns: u64,
    error_ns: u64,
    made: Instant,
}

#[derive(Debug)]
struct ContextState {
    ctx: Arc<CudaContext>,
    own_stream: usize,
    anchor: Arc<Anchor>,
    pool: Vec<usize>,
    clock: Placing,
}

/// A context's calls placed on the host clock: facts about the offset of one anchor's clock.
#[derive(Debug, Default)]
struct Placing {
    bounds: Bounds,
    /// The anchor event the facts are about.
    anchor: usize,
    /// The facts contradicted the anchor: a new one is made before the next call.
    renew: bool,
}

impl Placing {
    /// The host interval and stated error of a call whose start event came `from_anchor_ns`
    /// after `anchor` and whose end `duration_ns` after that; recorded by the host at
    /// `recorded_ns`, seen completed at `seen_ns`.
    fn place(
        &mut self,
        anchor: &Anchor,
        recorded_ns: u64,
        seen_ns: u64,
        from_anchor_ns: i64,
        duration_ns: u64,
    ) -> (Interval, u64) {
        if self.anchor != anchor.event {
            // Another anchor, another origin: facts about the last one say nothing about this.
            self.bounds.forget();
            self.anchor = anchor.event;
        }
        // f32 milliseconds since the anchor: one unit in the last place; and the events' own
        // resolution.
        let ulp_ns = ((from_anchor_ns.unsigned_abs() as f64) * 2f64.powi(-23)).ceil() as i128;
        let gpu = (i128::from(from_anchor_ns), i128::from(from_anchor_ns) + i128::from(duration_ns));
        let calibration =
            ClockMap { offset_ns: i128::from(anchor.host_ns), error_ns: anchor.error_ns, taken_at_ns: anchor.host_ns };
        let p = self.bounds.place(
            Facts::of(gpu, recorded_ns, seen_ns),
            ulp_ns + i128::from(EVENT_RESOLUTION_NS),
            calibration,
        );
        self.renew |= p.calibration_contradicted;
        let start = u64::try_from(gpu.0 + p.offset_ns).unwrap_or(0);
        (Interval { start_ns: start, end_ns: start + duration_ns }, p.error_ns)
    }
}

/// Started event timing of one call.
#[derive(Debug)]
pub(crate) struct EventScope {
    ctx: Arc<CudaContext>,
    stream: usize,
    start: usize,
    anchor: Arc<Anchor>,
    /// The host instant just before the start event was recorded: it completes later.
    recorded_ns: u64,
    /// A stream handed over by `cuda::attach` was made in the call's body and is dropped at its
    /// end, before the end event is recorded on it: kept alive until then.
    keep: Option<Arc<CudaStream>>,
}

#[derive(Debug)]
struct Waiting {
    scope: EventScope,
    end: usize,
    record: Record,
}

/// Calls whose end event was recorded, and how long the resolver waits before querying them
/// again (see [`Events::poll`]).
#[derive(Debug)]
struct Queue {
    calls: Vec<Waiting>,
    backoff: Duration,
    /// Handed to the resolver (at the first call).
    registered: bool,
}

/// The events fallback's state: each context's own stream and clock anchor, and the calls
/// waiting for their end event. Held by `cuda`'s one static (`Cuda`).
#[derive(Debug)]
pub(super) struct EventState {
    contexts: Mutex<Vec<ContextState>>,
    waiting: Mutex<Queue>,
}

impl EventState {
    pub(super) const fn new() -> EventState {
        EventState {
            contexts: Mutex::new(Vec::new()),
            waiting: Mutex::new(Queue { calls: Vec::new(), backoff: FIRST_QUERY, registered: false }),
        }
    }
}

#[inline(always)]
fn state() -> &'static EventState {
    &super::CUDA.events
}

/// The first query of new work comes this soon; while none finishes the wait doubles up to
/// [`LAST_QUERY`].
const FIRST_QUERY: Duration = Duration::from_millis(1);
const LAST_QUERY: Duration = Duration::from_millis(16);

fn ev(e: usize) -> CUevent {
    e as CUevent
}

/// Records an anchor on gpuspan's own idle stream and brackets it with the host clock.
fn make_anchor(own_stream: usize) -> Result<Anchor, result::DriverError> {
    let e = event::create(CUevent_flags::CU_EVENT_DEFAULT)?;
    let mut best: Option<(u64, u64)> = None;
    for _ in 0..3 {
        let t0 = clock::now_ns();
        // SAFETY: `e` and the stream are live and belong to the current context.
        unsafe {
            event::record(e, own_stream as CUstream)?;
            event::synchronize(e)?;
        }
        let t1 = clock::now_ns();
        if best.is_none_or(|(a, b)| t1 - t0 < b - a) {
            best = Some((t0, t1));
        }
    }
    let (t0, t1) = best.unwrap_or((0, 0));
    Ok(Anchor { event: e as usize, host_ns: t0 + (t1 - t0) / 2, error_ns: (t1 - t0) / 2, made: Instant::now() })
}

fn state_for<'a>(
    all: &'a mut Vec<ContextState>,
    ctx: &Arc<CudaContext>,
) -> Result<&'a mut ContextState, result::DriverError> {
    let i = match all.iter().position(|s| s.ctx.cu_ctx() == ctx.cu_ctx()) {
        Some(i) => i,
        None => {
            let own = cstream::create(cstream::StreamKind::NonBlocking)? as usize;
            let anchor = Arc::new(make_anchor(own)?);
            all.push(ContextState {
                ctx: ctx.clone(),
                own_stream: own,
                clock: Placing { anchor: anchor.event, ..Placing::default() },
                anchor,
                pool: Vec::new(),
            });
            all.len() - 1
        }
    };
    let s = &mut all[i];
    if s.clock.renew || s.anchor.made.elapsed() >= ANCHOR_RENEW {
        s.anchor = Arc::new(make_anchor(s.own_stream)?);
        s.clock.renew = false;
    }
    Ok(s)
}

fn take_event(s: &mut ContextState) -> Result<usize, result::DriverError> {
    match s.pool.pop() {
        Some(e) => Ok(e),
        None => Ok(event::create(CUevent_flags::CU_EVENT_DEFAULT)? as usize),
    }
}

/// Records the start event of a call on `stream`.
pub(crate) fn start(stream: &CudaStream) -> Result<EventScope, result::DriverError> {
    let ctx = stream.context();
    ctx.bind_to_thread()?;
    let mut all =
        state().contexts.lock().map_err(|_| result::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_UNKNOWN))?;
    let s = state_for(&mut all, ctx)?;
    let start = take_event(s)?;
    let recorded_ns = clock::now_ns();
    // SAFETY: the event and the caller's stream are live in the bound context.
    unsafe { event::record(ev(start), stream.cu_stream())? };
    Ok(EventScope {
        ctx: ctx.clone(),
        stream: stream.cu_stream() as usize,
        start,
        anchor: s.anchor.clone(),
        recorded_ns,
        keep: None,
    })
}

/// [`start`] on a stream the call does not outlive (`cuda::attach`): it is kept until the end
/// event is recorded.
pub(crate) fn start_kept(stream: &Arc<CudaStream>) -> Result<EventScope, result::DriverError> {
    let mut e = start(stream)?;
    e.keep = Some(stream.clone());
    Ok(e)
}

/// Records the end event and leaves the call to the resolver.
pub(crate) fn finish(mut scope: EventScope, record: Record) {
    let keep = scope.keep.take();
    let end = (|| {
        scope.ctx.bind_to_thread()?;
        let e = {
            let mut all = state()
                .contexts
                .lock()
                .map_err(|_| result::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_UNKNOWN))?;
            take_event(state_for(&mut all, &scope.ctx)?)?
        };
        // SAFETY: as in `start`; the caller's stream outlives the call that was passed it.
        unsafe { event::record(ev(e), scope.stream as CUstream)? };
        Ok::<usize, result::DriverError>(e)
    })();
    // The end event is recorded (or failed): an attached stream may go now.
    drop(keep);
    match end {
        Ok(end) => {
            let first = match state().waiting.lock() {
                Ok(mut w) => {
                    w.calls.push(Waiting { scope, end, record });
                    w.backoff = FIRST_QUERY;
                    !std::mem::replace(&mut w.registered, true)
                }
                Err(_) => false,
            };
            if first {
                crate::hooks::leaves().sections.add(clock_lines);
                crate::resolver::register(&Events);
            } else {
                crate::resolver::wake();
            }
        }
        Err(e) => {
            note_once(format_args!("recording a CUDA event failed ({e:?}): a call is timed on the host only"));
            collector::submit(record);
        }
    }
}

fn elapsed_ns(a: usize, b: usize) -> Result<i64, result::DriverError> {
    // SAFETY: both events were recorded in the current context and have completed.
    let ms = unsafe { event::elapsed(ev(a), ev(b))? };
    Ok((f64::from(ms) * 1e6).round() as i64)
}

/// Resolves every waiting call whose end event completed; returns how many still wait.
fn resolve_ready() -> usize {
    let Ok(mut queue) = state().waiting.lock() else { return 0 };
    let waiting = &mut queue.calls;
    if waiting.is_empty() {
        return 0;
    }
    let mut done = Vec::new();
    let mut i = 0;
    while i < waiting.len() {
        let w = &waiting[i];
        let ready = w.scope.ctx.bind_to_thread().and_then(|_| {
            // SAFETY: a live event of the bound context.
            match unsafe { event::query(ev(w.end)) } {
                Ok(()) => Ok(true),
                Err(result::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
                Err(e) => Err(e),
            }
        });
        match ready {
            Ok(false) => i += 1,
            Ok(true) | Err(_) => {
                // Its end event had completed by now: a fact for placing it.
                let seen_ns = clock::now_ns();
                let w = waiting.swap_remove(i);
                done.push((ready.is_ok().then_some(seen_ns), w));
            }
        }
    }
    let left = waiting.len();
    drop(queue);
    for (seen, w) in done {
        let timing = seen.and_then(|seen_ns| {
            let d = elapsed_ns(w.scope.start, w.end).ok()?.max(0) as u64;
            let from_anchor = elapsed_ns(w.scope.anchor.event, w.scope.start).ok()?;
            let (interval, error) = {
                let mut all = state().contexts.lock().ok()?;
                let s = all.iter_mut().find(|s| s.ctx.cu_ctx() == w.scope.ctx.cu_ctx())?;
                s.clock.place(&w.scope.anchor, w.scope.recorded_ns, seen_ns, from_anchor, d)
            };
            Some(GpuTiming {
                interval,
                busy_ns: d,
                source: TimingSource::CudaEvent,
                clock_error_ns: error,
                // Stream time from the start event (at scope start or `attach`) to the end
                // event (at exit): the scope's work and whatever the stream waited on between,
                // host work included. An upper bound, labelled and treated as a bracket to exit
                // everywhere (`≤`, no bandwidth, not busy time), as wgpu's queue brackets are.
                bracketed: true,
                bracket_at_exit: true,
                device: super::devices().get(w.scope.ctx.ordinal()).cloned(),
            })
        });
        let mut record = w.record;
        record.gpu = timing;
        if record.gpu.is_none() {
            Losses::add(&losses().unresolved_scopes, 1);
            note_once("reading back CUDA events failed: some calls are timed on the host only");
        }
        if let Ok(mut all) = state().contexts.lock() {
            if let Ok(s) = state_for(&mut all, &w.scope.ctx) {
                s.pool.push(w.scope.start);
                s.pool.push(w.end);
            }
        }
        collector::submit(record);
    }
    left
}

/// The trust report's lines: per context, how well its events' offset is known.
fn clock_lines(_: &[crate::export::summary::row::SiteSummary]) -> Vec<String> {
    let Ok(all) = state().contexts.lock() else { return Vec::new() };
    all.iter()
        .filter(|s| s.clock.bounds.placed > 0)
        .map(|s| {
            let ordinal = s.ctx.ordinal();
            let name = super::devices().get(ordinal).map_or_else(|| "unnamed".to_owned(), |d| d.name.to_string());
            s.clock.bounds.line(ordinal as u32, &format!("{name} (CUDA events)"))
        })
        .collect()
}

/// The calls timed by CUDA events.
struct Events;

impl PendingWork for Events {
    fn name(&self) -> &'static str {
        "cuda events"
    }

    /// An event says it completed only when asked (`cuEventQuery`): there is no signal to wait
    /// for, so the resolver comes back on a timer while calls wait, sooner for new work and
    /// less often the longer it runs, so a long kernel costs few queries.
    fn poll(&self, now: Instant) -> Progress {
        let pending = resolve_ready();
        let wait = match state().waiting.lock() {
            Ok(mut q) => {
                let wait = q.backoff;
                q.backoff = if pending > 0 { (wait * 2).min(LAST_QUERY) } else { FIRST_QUERY };
                wait
            }
            Err(_) => FIRST_QUERY,
        };
        Progress { pending, next_wake: (pending > 0).then(|| now + wait) }
    }

    /// Queries until every call is resolved or the deadline passes.
    fn flush(&self, deadline: Instant) -> bool {
        loop {
            if resolve_ready() == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000_000_000;

    fn anchor(event: usize, host_ns: u64, error_ns: u64) -> Anchor {
        Anchor { event, host_ns, error_ns, made: Instant::now() }
    }

    /// The anchor's event completed at host T. A call recorded 100 µs later whose start event
    /// ran 5 µs after that, for 80 µs, seen done 2 ms later.
    fn call(p: &mut Placing, a: &Anchor, at: u64) -> (Interval, u64, u64) {
        let recorded = at;
        let gpu_start = at + 5_000;
        let (interval, error) = p.place(a, recorded, gpu_start + 2_080_000, (gpu_start - T) as i64, 80_000);
        (interval, error, gpu_start)
    }

    #[test]
    fn a_true_anchor_places_calls_within_its_error() {
        let mut p = Placing::default();
        let a = anchor(1, T, 1_500);
        let (interval, error, truth) = call(&mut p, &a, T + 100_000);
        assert_eq!(interval.duration_ns(), 80_000);
        assert!(interval.start_ns.abs_diff(truth) <= error, "{interval:?} ±{error} vs {truth}");
        assert!(error <= 3_000, "the anchor's bracket, drift since, and the events' resolution: {error}");
        assert!(!p.renew);
    }

    /// An anchor whose bracket says 30 µs too early (seen on the H100: events placed up to 37 µs
    /// before their call): the calls' facts contradict it, the anchor is to be renewed, and every
    /// call is placed after its event was recorded, with an error that covers its true start.
    #[test]
    fn a_wrong_anchor_is_caught_and_calls_are_placed_from_their_facts() {
        let mut p = Placing::default();
        let a = anchor(1, T - 30_000, 1_000);
        for i in 0..10 {
            let recorded = T + 100_000 + i * 1_000_000;
            let (interval, error, truth) = call(&mut p, &a, recorded);
            assert!(interval.start_ns >= recorded, "not before its record call: {interval:?} {recorded}");
            assert!(interval.start_ns.abs_diff(truth) <= error, "{interval:?} ±{error} vs {truth}");
        }
        assert!(p.renew);
        assert_eq!(p.bounds.contradicted, 10);
        // A new anchor is a new origin: the old facts are dropped, a true anchor holds again.
        p.renew = false;
        let b = anchor(2, T, 1_000);
        let (interval, error, truth) = call(&mut p, &b, T + 20_000_000);
        assert!(interval.start_ns.abs_diff(truth) <= error && error < 5_000, "{interval:?} ±{error}");
        assert!(!p.renew);
    }
}
