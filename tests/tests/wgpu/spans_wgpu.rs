//! The spans a program already has, as measurement scopes (issue 25), on wgpu (lavapipe in CI):
//! a third party's renderer that makes its own encoders and submits on the registered queue,
//! called from `#[tracing::instrument]`ed functions, with no gpuspan annotation anywhere, under
//! a registry with `gpuspan::layer_with(..)`. Each selected span instance gets one GPU-timed
//! record (a queue bracket from its first entry to its close, labelled `exit`); unselected spans
//! get none; nested spans, a device thread entering the caller's span, rayon tasks entering the
//! caller's span and futures instrumented with a span and polled on tokio workers are covered.
#![cfg(feature = "wgpu-suite")]

use gpuspan::TimingSource;
use gpuspan_testing::record::Value;
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::gpu::Gpu;
use rusty_fork::rusty_fork_test;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tracing::Instrument;

use crate::labels_common;

/// A third party's GPU code: it owns its encoders and submits them itself.
mod renderer {
    use gpuspan_tests::gpu::Gpu;

    pub struct Renderer {
        pub gpu: Gpu,
    }

    impl Renderer {
        /// One compute dispatch in an encoder of its own, submitted at once.
        pub fn draw(&self) {
            let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
            self.gpu.record_pass(&mut encoder, None);
            self.gpu.queue.submit([encoder.finish()]);
        }
    }
}

/// The application: its functions are instrumented with `tracing`, nothing else.
mod app {
    use super::renderer::Renderer;

    #[tracing_attributes::instrument(skip_all, fields(frame = n))]
    pub fn frame(r: &Renderer, n: u64) {
        r.draw();
        r.draw();
    }

    #[tracing_attributes::instrument(skip_all)]
    pub fn outer(r: &Renderer) {
        r.draw();
        inner(r);
        r.draw();
    }

    #[tracing_attributes::instrument(skip_all)]
    pub fn inner(r: &Renderer) {
        r.draw();
    }

    /// Annotated as well, in a selected module: its span has the module's target (gpuspan's
    /// attribute is a drop-in for `#[instrument]`), yet it is timed once, as the annotated call.
    #[gpuspan::gpu_kernel(skip_all)]
    pub fn annotated(r: &Renderer) {
        r.draw();
    }

    /// One dispatch with raw pass timestamps beside it: the reference for the bracket's bound.
    #[tracing_attributes::instrument(skip_all)]
    pub fn reference_frame(r: &Renderer, timer: &gpuspan_tests::gpu::RawTimer) {
        let mut encoder = r.gpu.device.create_command_encoder(&Default::default());
        r.gpu.record_pass(&mut encoder, Some(&timer.query_set));
        timer.resolve(&mut encoder);
        r.gpu.queue.submit([encoder.finish()]);
    }
}

/// Spans the selection leaves out.
mod background {
    use super::renderer::Renderer;

    #[tracing_attributes::instrument(skip_all)]
    pub fn housekeeping(r: &Renderer) {
        r.draw();
    }
}

/// The targets of the selected modules' spans (`module_path!()`s: the test binary's name comes first).
const APP: &str = concat!(module_path!(), "::app");
const DEVICE: &str = concat!(module_path!(), "::device");
const SELECTION: &str = concat!(module_path!(), "::app=info,", module_path!(), "::device=info");

/// Every test's threads (spawned ones and tokio workers) need the subscriber: one global
/// default, with the layer and its own selection.
fn setup() -> Option<Arc<renderer::Renderer>> {
    static SUBSCRIBER: OnceLock<()> = OnceLock::new();
    SUBSCRIBER.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with(SELECTION));
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
    });
    let gpu = Gpu::for_test(1 << 14, 64)?;
    Some(Arc::new(renderer::Renderer { gpu }))
}

fn settle(r: &renderer::Renderer) {
    r.gpu.wait();
    assert!(gpuspan::flush(), "flush left GPU work pending");
}

fn attr(r: &Record, key: &str) -> Option<Value> {
    r.attributes().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// What every selected span's record must be: a span site, GPU-timed by a bracket that ended
/// when the span closed.
fn assert_span_record(r: &Record) {
    let name = r.site.desc.name;
    assert!(r.site.is_span(), "{name}: a span's site");
    let g = r.gpu.as_ref().unwrap_or_else(|| panic!("{name}: no GPU timing: {r:?}"));
    assert_eq!(g.source, TimingSource::GpuTimestamp, "{name}");
    assert!(g.bracketed && g.bracket_at_exit, "{name}: a bracket ended at the span's close: {g:?}");
    assert!(g.interval.duration_ns() > 0, "{name}: an empty GPU interval");
    assert_eq!(attr(r, "gpuspan.kind"), Some(Value::Str("span".into())), "{name}");
    assert_eq!(attr(r, "gpu.timing.source"), Some(Value::Str("gpu_timestamp".into())), "{name}");
    assert_eq!(attr(r, "gpu.timing.bracket_end"), Some(Value::Str("exit".into())), "{name}");
    assert!(attr(r, "gpu_transfer.bandwidth_bytes_per_s").is_none(), "{name}: a bound has no bandwidth");
}

rusty_fork_test! {
    #[test]
    fn each_selected_span_instance_is_one_gpu_timed_record_and_unselected_spans_none() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        for n in 0..3 {
            app::frame(&r, n);
        }
        background::housekeeping(&r);
        settle(&r);
        // In the order the spans ran: records arrive as their brackets resolve, not in that order.
        let mut frames = capture.of("frame");
        frames.sort_by_key(|r| r.host.start_ns);
        assert_eq!(frames.len(), 3, "one record per span instance: {frames:?}");
        for (n, f) in frames.iter().enumerate() {
            assert_span_record(f);
            assert_eq!(attr(f, "frame"), Some(Value::I64(n as i64)), "the span's field as an attribute");
            assert_eq!(f.site.desc.module_path, APP);
        }
        assert!(capture.of("housekeeping").is_empty(), "an unselected span is no scope");
        // The span's site is in the summary, under its name.
        let summary = gpuspan::summary();
        let row = summary.site("frame").expect("a summary row named after the span");
        assert!(row.calls >= 3, "{row:?}");
        assert!(summary.site("housekeeping").is_none());
    }
}

rusty_fork_test! {
    #[test]
    fn nested_selected_spans_each_get_a_record_the_outer_one_holding_the_inner_one() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        app::outer(&r);
        settle(&r);
        let (outer, inner) = (capture.of("outer"), capture.of("inner"));
        assert_eq!((outer.len(), inner.len()), (1, 1), "{outer:?} {inner:?}");
        assert_span_record(&outer[0]);
        assert_span_record(&inner[0]);
        let (o, i) = (outer[0].gpu.as_ref().unwrap().interval, inner[0].gpu.as_ref().unwrap().interval);
        assert!(o.start_ns <= i.start_ns && i.end_ns <= o.end_ns, "inclusive: outer {o:?} holds inner {i:?}");
        assert!(o.duration_ns() > i.duration_ns(), "the outer span did more: {o:?} {i:?}");
    }
}

rusty_fork_test! {
    /// What a user reads about nested selected spans (issue 39): one label (`span/wgpu`) in the
    /// summary, the timeline and `gpuspan report`; the summary says its span rows nest; no
    /// `code.function.name` (a span is no function); the report's findings speak of the span's
    /// close, not a function's exit; and the GPU cost per request of the outer span is its
    /// bracket, not its bracket plus the inner span's again.
    #[test]
    fn nested_spans_read_alike_and_are_not_summed_twice_in_any_output() {
        let Some(r) = setup() else { return };
        let (guard, out) = labels_common::Outputs::start("spans-labels");
        for _ in 0..2 {
            app::outer(&r);
        }
        settle(&r);
        let summary = gpuspan::summary();
        drop(guard);
        let labels = labels_common::agree(&summary, &out.capture, &out.timeline, &["outer", "inner"]);
        for l in &labels {
            assert_eq!((l.1.as_str(), l.2), ("wgpu", true), "{l:?}");
        }
        let table = summary.to_string();
        for name in ["outer", "inner"] {
            let line = table.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}:\n{table}"));
            assert!(line.contains("span/wgpu"), "{line}");
            assert!(!line.contains("no GPU resource in its signature"), "{line}");
        }
        assert!(table.contains("spans nest"), "the summary says the spans nest:\n{table}");

        let timeline: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&out.timeline).expect("timeline")).expect("JSON");
        let span_events: Vec<&serde_json::Value> = timeline["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["args"]["gpuspan.kind"] == "span")
            .collect();
        assert!(!span_events.is_empty(), "the spans in the timeline");
        for e in &span_events {
            assert!(e["cat"] == "span" || e["cat"] == "gpu.span", "the host or GPU event of a span: {e}");
            assert!(e["args"].get("code.function.name").is_none(), "a span is no function: {e}");
        }

        let capture = gpuspan_capture::Capture::open(&out.capture).expect("the capture reads");
        let report = gpuspan_cli::report::build(&capture);
        for s in report.sites.iter().filter(|s| s.site == "outer" || s.site == "inner") {
            assert_eq!((s.kind.as_str(), s.backend.as_str()), ("span", "wgpu"), "{s:?}");
        }
        for f in &report.findings {
            if f.message.starts_with("outer") || f.message.starts_with("inner") {
                assert!(!f.message.contains("function"), "a span is no function: {}", f.message);
            }
        }
        // Each `outer` instance's GPU cost is its own bracket, which holds `inner`'s.
        let outer_site = capture.sites.iter().find(|s| s.name == "outer").expect("outer's site").id;
        let outer_ns: u64 =
            capture.records.iter().filter(|r| r.site == outer_site).map(|r| r.gpu.as_ref().map_or(0, |g| g.busy_ns)).sum();
        let request = report.requests.iter().find(|q| q.span == "outer").expect("outer in the requests table");
        assert_eq!(request.requests, 2, "{request:?}");
        assert_eq!(request.total_ns, outer_ns, "the outer bracket alone, not plus the inner one: {request:?}");
        assert!(request.total_ns <= report.capture.duration_ns, "{request:?} in {:?}", report.capture);
    }
}

rusty_fork_test! {
    #[test]
    fn an_annotated_call_in_a_selected_module_is_timed_once_as_the_annotated_call() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        app::annotated(&r);
        settle(&r);
        let records = capture.of("annotated");
        assert_eq!(records.len(), 1, "one record, not one more for its span: {records:?}");
        assert!(!records[0].site.is_span(), "the annotation's site: {:?}", records[0].site.desc);
    }
}

/// The ML frameworks' shape: a device thread owns the GPU and runs closures sent with the
/// caller's `Span::current()`, entering it. The caller's code never touches the GPU.
mod device {
    use super::renderer::Renderer;
    use std::sync::mpsc;
    use std::sync::Arc;

    pub type Job = (tracing::Span, Box<dyn FnOnce(&Renderer) + Send>, mpsc::Sender<()>);

    pub fn spawn(r: Arc<Renderer>) -> (mpsc::Sender<Job>, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::spawn(move || {
            for (span, job, done) in rx {
                span.in_scope(|| job(&r));
                let _ = done.send(());
            }
        });
        (tx, handle)
    }

    /// The caller: a span of its own, its work launched by the device thread.
    #[tracing_attributes::instrument(skip_all, fields(request = id))]
    pub fn infer(device: &mpsc::Sender<Job>, id: u64) {
        for _ in 0..2 {
            let (done, wait) = mpsc::channel();
            let job: Box<dyn FnOnce(&Renderer) + Send> = Box::new(|r: &Renderer| r.draw());
            device.send((tracing::Span::current(), job, done)).expect("device thread");
            wait.recv().expect("job done");
        }
    }
}

rusty_fork_test! {
    #[test]
    fn a_device_thread_entering_the_callers_span_times_its_work_under_that_span() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        let (tx, handle) = device::spawn(r.clone());
        for id in 0..2 {
            device::infer(&tx, id);
        }
        drop(tx);
        handle.join().expect("device thread");
        settle(&r);
        let infer = capture.of("infer");
        assert_eq!(infer.len(), 2, "one record per call, not per job: {infer:?}");
        for (id, rec) in infer.iter().enumerate() {
            assert_span_record(rec);
            assert_eq!(attr(rec, "request"), Some(Value::I64(id as i64)));
        }
    }
}

/// cubecl's shape (issue 37): the device thread runs the closures it is sent and never enters
/// the caller's span (no span travels with the work), and the queue is lazy: what was enqueued
/// is submitted when the caller reads a result back, inside its span.
mod lazy {
    use super::renderer::Renderer;
    use std::sync::mpsc;
    use std::sync::Arc;

    pub enum Msg {
        Enqueue(Box<dyn FnOnce(&Renderer) + Send>),
        Read(mpsc::Sender<()>),
    }

    pub fn spawn(r: Arc<Renderer>) -> (mpsc::Sender<Msg>, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Msg>();
        let handle = std::thread::spawn(move || {
            let mut queued = Vec::new();
            for msg in rx {
                match msg {
                    Msg::Enqueue(op) => queued.push(op),
                    Msg::Read(done) => {
                        queued.drain(..).for_each(|op| op(&r));
                        r.gpu.wait();
                        let _ = done.send(());
                    }
                }
            }
        });
        (tx, handle)
    }

    /// Two draws enqueued, then a read-back: the device thread submits them now.
    pub fn work(device: &mpsc::Sender<Msg>) {
        for _ in 0..2 {
            device.send(Msg::Enqueue(Box::new(|r: &Renderer| r.draw()))).expect("device thread");
        }
        let (done, wait) = mpsc::channel();
        device.send(Msg::Read(done)).expect("device thread");
        wait.recv().expect("read back");
    }
}

rusty_fork_test! {
    /// Also the check of "the backend a span uses is the one the program used": built with
    /// `cuda` too (`--features wgpu,cuda`) on a machine where CUDA starts, each span is still
    /// one wgpu bracket, with no CUDA record beside it.
    #[test]
    fn a_device_thread_that_never_enters_the_callers_span_has_its_lazy_work_bracketed_under_it() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        let (tx, handle) = lazy::spawn(r.clone());
        tracing::info_span!(target: DEVICE, "forward_pass").in_scope(|| lazy::work(&tx));
        tracing::info_span!(target: DEVICE, "forward_pass").in_scope(|| lazy::work(&tx));
        drop(tx);
        handle.join().expect("device thread");
        settle(&r);
        let forward = capture.of("forward_pass");
        assert_eq!(forward.len(), 2, "one record per span instance, of one backend: {forward:?}");
        forward.iter().for_each(assert_span_record);
        let row = gpuspan::summary().site("forward_pass").cloned().expect("a row");
        assert_eq!(row.backend_label(), "wgpu", "{row:?}");
        assert!(capture.of("unattributed").is_empty());
    }
}

rusty_fork_test! {
    /// Two callers at once on one device thread: a bracket is queue-wide, so each span's bound
    /// holds both callers' work (a bound, as labelled), neither is left out.
    #[test]
    fn two_callers_at_once_on_a_lazy_device_thread_each_get_a_bracket_holding_the_work() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        let (tx, handle) = lazy::spawn(r.clone());
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (tx, barrier) = (tx.clone(), barrier.clone());
                std::thread::spawn(move || {
                    tracing::info_span!(target: DEVICE, "forward_pass").in_scope(|| {
                        barrier.wait();
                        lazy::work(&tx);
                        barrier.wait();
                    })
                })
            })
            .collect();
        callers.into_iter().for_each(|c| c.join().expect("caller"));
        drop(tx);
        handle.join().expect("device thread");
        settle(&r);
        let forward = capture.of("forward_pass");
        assert_eq!(forward.len(), 2, "{forward:?}");
        forward.iter().for_each(assert_span_record);
        let (a, b) = (forward[0].gpu.as_ref().unwrap().interval, forward[1].gpu.as_ref().unwrap().interval);
        assert!(a.start_ns < b.end_ns && b.start_ns < a.end_ns, "both open over the same work: {a:?} {b:?}");
    }
}

async fn step(r: Arc<renderer::Renderer>) {
    for _ in 0..3 {
        tokio::task::yield_now().await;
        r.draw();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

rusty_fork_test! {
    #[test]
    fn futures_instrumented_with_a_span_on_tokio_workers_get_one_record_per_span() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().expect("tokio");
        rt.block_on(async {
            let tasks: Vec<_> = (0..4)
                .map(|i| {
                    let span = tracing::info_span!(target: APP, "step", task = i);
                    tokio::spawn(step(r.clone()).instrument(span))
                })
                .collect();
            for t in tasks {
                t.await.expect("task");
            }
        });
        drop(rt);
        settle(&r);
        let steps = capture.of("step");
        assert_eq!(steps.len(), 4, "one record per span, whatever the polls and workers: {steps:?}");
        let mut tasks: Vec<_> = steps.iter().map(|s| attr(s, "task")).collect();
        tasks.sort_by_key(|t| format!("{t:?}"));
        assert_eq!(tasks, (0..4).map(|i| Some(Value::I64(i))).collect::<Vec<_>>());
        for s in &steps {
            assert_span_record(s);
            // The host interval is the span's life, across its awaits (3 sleeps of ≥ 1 ms).
            assert!(s.host.duration_ns() >= 3_000_000, "{:?}", s.host);
        }
    }
}

rusty_fork_test! {
    /// rayon: the caller's span is entered only by rayon's workers (`span.in_scope` inside
    /// `rayon::scope` tasks and a `par_iter`), never on the thread that made it: each span instance
    /// is still one GPU-timed record, from the first worker's entry to its close.
    #[test]
    fn rayon_tasks_entering_the_callers_span_time_its_work_under_it() {
        use rayon::prelude::*;
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("rayon pool");
        let callers = std::sync::Mutex::new(std::collections::HashSet::new());
        let span = tracing::info_span!(target: APP, "rayon_scope", tasks = 4);
        pool.scope(|s| {
            for _ in 0..4 {
                let (span, r, callers) = (span.clone(), r.clone(), &callers);
                s.spawn(move |_| {
                    callers.lock().unwrap().insert(std::thread::current().id());
                    span.in_scope(|| r.draw());
                });
            }
        });
        drop(span);
        let span = tracing::info_span!(target: APP, "rayon_par_iter");
        pool.install(|| (0..4).into_par_iter().for_each(|_| span.in_scope(|| r.draw())));
        drop(span);
        settle(&r);
        assert!(!callers.lock().unwrap().contains(&std::thread::current().id()), "only rayon's workers entered it");
        for name in ["rayon_scope", "rayon_par_iter"] {
            let recs = capture.of(name);
            assert_eq!(recs.len(), 1, "{name}: one record per span instance: {recs:?}");
            assert_span_record(&recs[0]);
        }
        assert_eq!(attr(&capture.of("rayon_scope")[0], "tasks"), Some(Value::I64(4)));
    }
}

rusty_fork_test! {
    #[test]
    fn with_gpuspan_off_a_selected_span_records_nothing() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        gpuspan::set_enabled(false);
        app::frame(&r, 7);
        gpuspan::set_enabled(true);
        settle(&r);
        assert!(capture.of("frame").is_empty(), "GPUSPAN=off: nothing");
    }
}

rusty_fork_test! {
    /// How tight a span's bracket is: its GPU interval against the raw pass timestamps of the one
    /// dispatch it holds, span by span (printed for docs/wgpu.md; asserted only to be a bound).
    #[test]
    fn a_spans_bracket_is_a_bound_of_its_work_and_how_tight() {
        let Some(r) = setup() else { return };
        let capture = Capture::start_all_threads();
        let timer = gpuspan_tests::gpu::RawTimer::new(&r.gpu.device);
        let mut raw = Vec::new();
        for _ in 0..20 {
            app::reference_frame(&r, &timer);
            raw.push(timer.read_ns(&r.gpu));
        }
        settle(&r);
        // Pooled brackets resolve batch by batch, not always in call order (decision 44): matched
        // to their passes by when they were made.
        let mut recs = capture.of("reference_frame");
        recs.sort_by_key(|r| r.host.start_ns);
        assert_eq!(recs.len(), raw.len());
        let mut ratio = Vec::new();
        let mut excess = Vec::new();
        for (rec, raw) in recs.iter().zip(&raw) {
            assert_span_record(rec);
            let bracket = rec.gpu.as_ref().unwrap().interval.duration_ns() as f64;
            // The same GPU clock, mapped linearly: a bound holds the pass (1 µs for rounding).
            assert!(bracket + 1_000.0 >= *raw, "bracket {bracket} ns < pass {raw} ns");
            ratio.push(bracket / raw);
            excess.push(bracket - raw);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mut raw_sorted = raw.clone();
        eprintln!(
            "span bracket vs raw pass timestamps, {} spans: median pass {:.1} µs, bracket/pass median {:.2}, \
             max {:.2}, median excess {:.1} µs",
            raw.len(),
            median(&mut raw_sorted) / 1e3,
            median(&mut ratio),
            ratio.last().unwrap(),
            median(&mut excess) / 1e3
        );
    }
}
