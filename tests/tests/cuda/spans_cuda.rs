//! The spans a program already has, as measurement scopes (issue 25), on CUDA: the ML
//! frameworks' shape, where a device thread owns the stream and launches the kernels of
//! closures sent with the caller's `Span::current()`, entering it. No gpuspan annotation and no
//! `gpuspan::cuda::start()`: the layer starts CUPTI at the first selected span, before the first
//! launch. And the other shapes of issue 25 under CUPTI: nested selected spans (the innermost
//! owns its launches), one span entered on two threads at once, rayon tasks and tokio workers
//! entering the caller's span. Needs a GPU with CUPTI: `#[ignore = "needs a GPU"]`, run by
//! `scripts/gpu run`.
#![cfg(feature = "cuda")]

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use gpuspan::TimingSource;
use gpuspan_testing::record::{ActivityKind, Value};
use gpuspan_testing::Capture;
use rusty_fork::rusty_fork_test;
use std::sync::{mpsc, Arc, OnceLock};

/// The target of the `shapes` module's spans, set explicitly on the spans other modules open as
/// if they were its own (`module_path!()`: the test binary's name comes first).
const SHAPES: &str = concat!(module_path!(), "::shapes");

const SRC: &str = r#"
extern "C" __global__ void spin(unsigned long long cycles) {
    unsigned long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"#;

/// The framework: a device thread that owns the context and stream and runs what it is sent,
/// inside the span sent with it.
mod framework {
    use super::*;

    pub type Job = (tracing::Span, Box<dyn FnOnce(&Arc<CudaStream>, &CudaFunction) + Send>, mpsc::Sender<()>);

    pub fn device_thread() -> (mpsc::Sender<Job>, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::spawn(move || {
            let ctx = CudaContext::new(0).expect("context");
            let stream = ctx.new_stream().expect("stream");
            let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SRC).expect("NVRTC")).expect("module");
            let spin = module.load_function("spin").expect("spin");
            for (span, job, done) in rx {
                span.in_scope(|| job(&stream, &spin));
                stream.synchronize().expect("synchronize");
                let _ = done.send(());
            }
        });
        (tx, handle)
    }

    pub fn launch_spin(stream: &CudaStream, f: &CudaFunction, cycles: u64) {
        let mut l = stream.launch_builder(f);
        l.arg(&cycles);
        // SAFETY: one u64 parameter, no memory touched.
        unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }) }
            .expect("spin");
    }
}

/// The application: instrumented with `tracing` only.
mod app {
    use super::framework::{self, Job};
    use std::sync::mpsc;

    pub const KERNELS_PER_JOB: usize = 3;
    pub const JOBS: usize = 2;

    #[tracing_attributes::instrument(skip_all, fields(request = id))]
    pub fn infer(device: &mpsc::Sender<Job>, id: u64) {
        for _ in 0..JOBS {
            let (done, wait) = mpsc::channel();
            let job: Box<dyn FnOnce(&_, &_) + Send> = Box::new(|stream: &std::sync::Arc<_>, spin: &_| {
                for _ in 0..KERNELS_PER_JOB {
                    framework::launch_spin(stream, spin, 200_000);
                }
            });
            device.send((tracing::Span::current(), job, done)).expect("device thread");
            wait.recv().expect("job done");
        }
    }
}

/// One global subscriber for every test's threads (spawned, rayon's, tokio's).
fn setup() {
    static SUBSCRIBER: OnceLock<()> = OnceLock::new();
    SUBSCRIBER.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with(concat!(
            module_path!(),
            "::app=info,",
            module_path!(),
            "::shapes=info"
        )));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    });
}

fn kernels(r: &gpuspan_testing::Record) -> usize {
    r.activities.iter().filter(|a| matches!(a.kind, ActivityKind::Kernel(_))).count()
}

/// The other shapes: each launches on a stream of the launching thread's own.
mod shapes {
    use super::*;

    #[derive(Clone)]
    pub struct Gpu {
        pub ctx: Arc<CudaContext>,
        pub spin: CudaFunction,
    }

    impl Gpu {
        pub fn new() -> Gpu {
            let ctx = CudaContext::new(0).expect("context");
            let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SRC).expect("NVRTC")).expect("module");
            let spin = module.load_function("spin").expect("spin");
            Gpu { ctx, spin }
        }

        /// `n` kernels on a new stream of this thread, waited for.
        pub fn launch(&self, n: usize) {
            let stream = self.ctx.new_stream().expect("stream");
            for _ in 0..n {
                framework::launch_spin(&stream, &self.spin, 100_000);
            }
            stream.synchronize().expect("synchronize");
        }
    }

    #[tracing_attributes::instrument(skip_all)]
    pub fn outer(gpu: &Gpu) {
        gpu.launch(2);
        inner(gpu);
        gpu.launch(1);
    }

    #[tracing_attributes::instrument(skip_all)]
    pub fn inner(gpu: &Gpu) {
        gpu.launch(4);
    }

    pub async fn steps(gpu: Gpu) {
        for _ in 0..3 {
            tokio::task::yield_now().await;
            gpu.launch(1);
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn nested_two_thread_rayon_and_tokio_spans_own_exactly_their_kernels() {
        use rayon::prelude::*;
        use tracing::Instrument;
        if let Err(e) = gpuspan::cuda::probe() {
            panic!("this test needs a CUDA device (run it on a GPU machine: scripts/gpu): {e}");
        }
        setup();
        let capture = Capture::start_all_threads();
        let gpu = shapes::Gpu::new();
        // Nested: the innermost selected span entered on the launching thread owns the launch.
        shapes::outer(&gpu);
        // One span entered on two threads at once: both threads' kernels.
        let span = tracing::info_span!(target: crate::spans_cuda::SHAPES, "two_threads");
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    span.in_scope(|| {
                        barrier.wait();
                        gpu.launch(3);
                        barrier.wait();
                    })
                });
            }
        });
        drop(span);
        // rayon tasks entering the caller's span.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("rayon pool");
        let span = tracing::info_span!(target: crate::spans_cuda::SHAPES, "rayon_batch");
        pool.install(|| (0..4).into_par_iter().for_each(|_| span.in_scope(|| gpu.launch(1))));
        drop(span);
        // tokio: launches after awaits, polled on any of two workers.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().expect("tokio");
        rt.block_on(async {
            let tasks: Vec<_> = (0..2)
                .map(|i| {
                    let span = tracing::info_span!(target: crate::spans_cuda::SHAPES, "tokio_task", task = i);
                    tokio::spawn(shapes::steps(gpu.clone()).instrument(span))
                })
                .collect();
            for t in tasks {
                t.await.expect("task");
            }
        });
        drop(rt);
        assert_eq!(gpuspan_testing::cuda::timing(), Some(gpuspan::cuda::Timing::Cupti));
        assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");

        let one = |name: &str| {
            let recs = capture.of(name);
            assert_eq!(recs.len(), 1, "{name}: one record: {recs:?}");
            assert_eq!(recs[0].source(), TimingSource::Cupti, "{name}: {:?}", recs[0]);
            kernels(&recs[0])
        };
        assert_eq!((one("outer"), one("inner")), (3, 4), "self: the inner span's kernels are its own");
        assert_eq!(one("two_threads"), 6, "both threads' kernels");
        assert_eq!(one("rayon_batch"), 4, "every task's kernel");
        let tokio = capture.of("tokio_task");
        assert_eq!(tokio.len(), 2, "{tokio:?}");
        assert!(tokio.iter().all(|r| kernels(r) == 3), "every step's kernel, whichever worker: {tokio:?}");
        let unattributed: usize = capture.of("unattributed").iter().map(kernels).sum();
        assert_eq!(unattributed, 0, "kernels launched under a selected span are never unattributed");
    }
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn kernels_a_device_thread_launches_inside_the_callers_span_are_that_spans_and_none_unattributed() {
        if let Err(e) = gpuspan::cuda::probe() {
            panic!("this test needs a CUDA device (run it on a GPU machine: scripts/gpu): {e}");
        }
        setup();
        let capture = Capture::start_all_threads();
        let (tx, handle) = framework::device_thread();
        for id in 0..3 {
            app::infer(&tx, id);
        }
        drop(tx);
        handle.join().expect("device thread");
        let timing = gpuspan_testing::cuda::timing();
        let notes = gpuspan::summary().notes;
        assert_eq!(timing, Some(gpuspan::cuda::Timing::Cupti), "the layer started CUPTI: {notes:?}");
        assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");

        let infer = capture.of("infer");
        assert_eq!(infer.len(), 3, "one record per span instance: {infer:?}");
        for (id, r) in infer.iter().enumerate() {
            assert!(r.site.is_span());
            assert_eq!(r.source(), TimingSource::Cupti, "{r:?}");
            let kernels = r.activities.iter().filter(|a| matches!(a.kind, ActivityKind::Kernel(_))).count();
            assert_eq!(kernels, app::KERNELS_PER_JOB * app::JOBS, "every kernel of the span's jobs: {r:?}");
            let attrs = r.attributes();
            assert!(attrs.contains(&("gpuspan.kind", Value::Str("span".into()))), "{attrs:?}");
            assert!(attrs.contains(&("request", Value::I64(id as i64))), "{attrs:?}");
        }
        let unattributed: usize = capture
            .of("unattributed")
            .iter()
            .map(|u| u.activities.iter().filter(|a| matches!(a.kind, ActivityKind::Kernel(_))).count())
            .sum();
        assert_eq!(unattributed, 0, "kernels launched under a selected span are never unattributed");
    }
}

/// Calls nested with selected spans (decision 71: a span's entry is a window of its thread).
mod nesting {
    use super::shapes::Gpu;

    #[gpuspan::gpu_kernel]
    pub fn annotated_in_span(gpu: &Gpu) {
        gpu.launch(2);
    }

    /// An async annotated call: from its first suspension it pushes its id around each poll, so
    /// a span entered inside a poll pushes its own on top.
    #[gpuspan::gpu_kernel]
    pub async fn async_call(gpu: Gpu) {
        tokio::task::yield_now().await;
        gpu.launch(1);
        tracing::info_span!(target: crate::spans_cuda::SHAPES, "span_in_poll").in_scope(|| gpu.launch(2));
    }
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn an_annotated_call_inside_a_span_entry_and_a_span_inside_an_async_poll_own_their_kernels() {
        if let Err(e) = gpuspan::cuda::probe() {
            panic!("this test needs a CUDA device (run it on a GPU machine: scripts/gpu): {e}");
        }
        setup();
        let capture = Capture::start_all_threads();
        let gpu = shapes::Gpu::new();
        // The annotated call's window is inside the entry's: the innermost owns its launches.
        let span = tracing::info_span!(target: crate::spans_cuda::SHAPES, "around_annotated");
        span.in_scope(|| {
            gpu.launch(1);
            nesting::annotated_in_span(&gpu);
            gpu.launch(1);
        });
        drop(span);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("tokio");
        rt.block_on(async { tokio::spawn(nesting::async_call(gpu.clone())).await.expect("task") });
        drop(rt);
        assert_eq!(gpuspan_testing::cuda::timing(), Some(gpuspan::cuda::Timing::Cupti));
        assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");
        let one = |name: &str| {
            let recs = capture.of(name);
            assert_eq!(recs.len(), 1, "{name}: one record: {recs:?}");
            assert_eq!(recs[0].source(), TimingSource::Cupti, "{name}: {:?}", recs[0]);
            kernels(&recs[0])
        };
        assert_eq!(one("around_annotated"), 2, "the span's entry owns the launches outside the annotated call");
        assert_eq!(one("annotated_in_span"), 2, "the annotated call inside the entry owns its own");
        assert_eq!(one("span_in_poll"), 2, "a span entered inside an async call's poll owns its launches");
        assert_eq!(one("async_call"), 1, "the async call keeps the launch outside the span");
        let unattributed: usize = capture.of("unattributed").iter().map(kernels).sum();
        assert_eq!(unattributed, 0);
    }
}
