//! The spans a program already has, as measurement scopes (issue 25), on CUDA: the ML
//! frameworks' shape, where a device thread owns the stream and launches the kernels of
//! closures sent with the caller's `Span::current()`, entering it. No gpuspan annotation and no
//! `gpuspan::cuda::start()`: the layer starts CUPTI at the first selected span, before the first
//! launch. Needs a GPU with CUPTI: `#[ignore = "needs a GPU"]`, run by `scripts/gpu run`.
#![cfg(feature = "cuda")]

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use gpuspan::record::{ActivityKind, Value};
use gpuspan::{Capture, TimingSource};
use std::sync::{mpsc, Arc};

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

#[test]
#[ignore = "needs a GPU"]
fn kernels_a_device_thread_launches_inside_the_callers_span_are_that_spans_and_none_unattributed() {
    if let Err(e) = gpuspan::cuda::probe() {
        panic!("this test needs a CUDA device (run it on a GPU machine: scripts/gpu): {e}");
    }
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with("spans_cuda::app=info"));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let capture = Capture::start_all_threads();
    let (tx, handle) = framework::device_thread();
    for id in 0..3 {
        app::infer(&tx, id);
    }
    drop(tx);
    handle.join().expect("device thread");
    let timing = gpuspan::cuda::timing();
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
