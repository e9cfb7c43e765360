//! A framework's GPU work belongs to the span that asked for it (issue 37), on CUDA under CUPTI,
//! in cubecl's shape: one device thread per device, fed closures through a channel, that never
//! enters the caller's span (no span travels with the work), and a lazy queue that launches what
//! was enqueued only when the caller reads a result back, inside the caller's span. Nothing but
//! the layer and a selection: no annotation, no `gpuspan::cuda::start()`. The work goes to the
//! innermost selected span entered when it was launched, labelled `time`; with two callers at
//! once it is not guessed but reported under `during several spans`.
//!
//! Needs a GPU with CUPTI: `#[ignore = "needs a GPU"]`. Build it also with `wgpu` compiled in
//! (`--features cuda,wgpu`): a framework user's binary often has both. Each test runs alone
//! (`SERIAL`): attribution by time looks at every span of the process.
#![cfg(feature = "cuda")]

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use gpuspan::{Attributed, TimingSource};
use gpuspan_testing::record::{ActivityKind, Value};
use gpuspan_testing::{Capture, Record};
use rusty_fork::rusty_fork_test;
use std::sync::{mpsc, Arc, Mutex, OnceLock};

const SRC: &str = r#"
extern "C" __global__ void spin(unsigned long long cycles) {
    unsigned long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"#;

/// cubecl's `ChannelDeviceHandle`, reduced: the device thread owns the context and the stream and
/// runs the closures it is sent, and burn's fusion is lazy: enqueued operations are launched when
/// a read-back flushes the queue. No span is sent with the work.
mod cubecl {
    use super::*;

    pub type Op = Box<dyn FnOnce(&Arc<CudaStream>, &CudaFunction) + Send>;

    pub enum Msg {
        Enqueue(Op),
        /// A read-back: launch what is queued, wait for it, answer.
        Read(mpsc::Sender<()>),
    }

    pub fn device_thread() -> (mpsc::Sender<Msg>, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Msg>();
        let handle = std::thread::spawn(move || {
            let ctx = CudaContext::new(0).expect("context");
            let stream = ctx.new_stream().expect("stream");
            let module = ctx.load_module(cudarc::nvrtc::compile_ptx(SRC).expect("NVRTC")).expect("module");
            let spin = module.load_function("spin").expect("spin");
            let mut queued: Vec<Op> = Vec::new();
            for msg in rx {
                match msg {
                    Msg::Enqueue(op) => queued.push(op),
                    Msg::Read(done) => {
                        for op in queued.drain(..) {
                            op(&stream, &spin);
                        }
                        stream.synchronize().expect("synchronize");
                        let _ = done.send(());
                    }
                }
            }
        });
        (tx, handle)
    }

    pub fn spin(stream: &Arc<CudaStream>, f: &CudaFunction) {
        let cycles = 100_000u64;
        let mut launch = stream.launch_builder(f);
        launch.arg(&cycles);
        // SAFETY: `spin` takes one u64 by value.
        unsafe { launch.launch(LaunchConfig::for_num_elems(1)) }.expect("launch");
    }

    /// Enqueues `n` kernels (nothing is launched yet).
    pub fn enqueue(device: &mpsc::Sender<Msg>, n: usize) {
        for _ in 0..n {
            device.send(Msg::Enqueue(Box::new(spin))).expect("device thread");
        }
    }

    /// Reads a result back: the queue is flushed on the device thread, and this one waits.
    pub fn read_back(device: &mpsc::Sender<Msg>) {
        let (done, wait) = mpsc::channel();
        device.send(Msg::Read(done)).expect("device thread");
        wait.recv().expect("read back");
    }
}

/// The application, shaped like the burn MLP of issue 37: `#[instrument]` on the steps, an
/// `info_span!` around the epoch.
mod model {
    use super::cubecl;
    use std::sync::mpsc::Sender;

    pub const FORWARD_KERNELS: usize = 3;
    pub const STEP_KERNELS: usize = 2;

    #[tracing_attributes::instrument(skip_all)]
    pub fn forward_pass(device: &Sender<cubecl::Msg>) {
        cubecl::enqueue(device, FORWARD_KERNELS);
        cubecl::read_back(device);
    }

    /// A forward pass, then the backward pass's kernels, launched by the step's read-back.
    #[tracing_attributes::instrument(skip_all)]
    pub fn train_step(device: &Sender<cubecl::Msg>) {
        forward_pass(device);
        cubecl::enqueue(device, STEP_KERNELS);
        cubecl::read_back(device);
    }
}

/// One global subscriber (the device thread is a thread of the process like any other).
fn setup() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    static SUBSCRIBER: OnceLock<()> = OnceLock::new();
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = gpuspan::cuda::probe() {
        panic!("this test needs a CUDA device (run it on a GPU machine: scripts/gpu): {e}");
    }
    SUBSCRIBER.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber =
            tracing_subscriber::registry().with(gpuspan::layer_with("[epoch],[train_step],[forward_pass]"));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    });
    serial
}

fn kernels(r: &Record) -> usize {
    r.activities.iter().filter(|a| matches!(a.kind, ActivityKind::Kernel(_))).count()
}

fn attr(r: &Record, key: &str) -> Option<Value> {
    r.attributes().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn a_device_thread_that_never_enters_the_callers_span_has_its_lazy_launches_attributed_by_time() {
        let _serial = setup();
        let capture = Capture::start_all_threads();
        let (device, handle) = cubecl::device_thread();
        tracing::info_span!("epoch").in_scope(|| {
            for _ in 0..2 {
                model::train_step(&device);
            }
            model::forward_pass(&device); // inference, outside a step
        });
        drop(device);
        handle.join().expect("device thread");
        assert_eq!(gpuspan_testing::cuda::timing(), Some(gpuspan::cuda::Timing::Cupti), "{:?}", gpuspan::summary().notes);
        assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");

        let forward = capture.of("forward_pass");
        assert_eq!(forward.len(), 3, "{forward:?}");
        for r in &forward {
            assert_eq!(r.source(), TimingSource::Cupti, "{r:?}");
            assert_eq!(kernels(r), model::FORWARD_KERNELS, "the kernels its read-back launched: {r:?}");
            assert_eq!(r.attributed, Some(Attributed::Time), "{r:?}");
            assert_eq!(attr(r, "gpuspan.attributed"), Some(Value::Str("time".into())));
            let (gpu, host) = (r.gpu.as_ref().expect("GPU timing").interval, r.host);
            assert!(gpu.start_ns >= host.start_ns && gpu.end_ns <= host.end_ns, "inside the span: {gpu:?} {host:?}");
        }
        let steps = capture.of("train_step");
        assert_eq!(steps.len(), 2, "{steps:?}");
        for r in &steps {
            assert_eq!(kernels(r), model::STEP_KERNELS, "its own kernels; its forward pass's are the pass's: {r:?}");
            assert_eq!(r.attributed, Some(Attributed::Time), "{r:?}");
        }
        let epoch = capture.of("epoch");
        assert_eq!(epoch.len(), 1);
        assert_eq!(kernels(&epoch[0]), 0, "every kernel had an innermost span below the epoch");
        let unattributed: usize = capture.of("unattributed").iter().map(kernels).sum();
        let several: usize = capture.of("during several spans").iter().map(kernels).sum();
        assert_eq!((unattributed, several), (0, 0), "0 unattributed while a selected span is entered");
        let row = gpuspan::summary().reached.into_iter().find(|s| s.site.desc.name == "forward_pass").expect("row");
        assert_eq!((row.backend_label(), row.attributed), ("cuda", Some(Attributed::Time)));
    }
}

rusty_fork_test! {
    #[test]
    #[ignore = "needs a GPU"]
    fn two_callers_at_once_on_one_device_thread_are_reported_as_during_several_spans_not_guessed() {
        let _serial = setup();
        let capture = Capture::start_all_threads();
        let (device, handle) = cubecl::device_thread();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (device, barrier) = (device.clone(), barrier.clone());
                std::thread::spawn(move || {
                    tracing::info_span!("forward_pass").in_scope(|| {
                        barrier.wait(); // both spans entered before either launches
                        model_parts(&device);
                        barrier.wait(); // and both still entered until both launched
                    })
                })
            })
            .collect();
        callers.into_iter().for_each(|c| c.join().expect("caller"));
        drop(device);
        handle.join().expect("device thread");
        assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");

        let forward = capture.of("forward_pass");
        assert_eq!(forward.len(), 2, "{forward:?}");
        assert!(forward.iter().all(|r| kernels(r) == 0), "not guessed: {forward:?}");
        let several = capture.of("during several spans");
        assert_eq!(several.iter().map(kernels).sum::<usize>(), 2 * model::FORWARD_KERNELS, "{several:?}");
        for r in &several {
            assert_eq!(r.attributed, Some(Attributed::Ambiguous));
            assert_eq!(attr(r, "gpuspan.during_spans"), Some(Value::Str("forward_pass ×2".into())), "{r:?}");
        }
        let row = gpuspan::summary().reached.into_iter().find(|s| s.site.desc.name == "during several spans");
        let row = row.expect("the summary has the row");
        assert!(row.total_ns > 0 && row.sources == [TimingSource::Cupti], "its GPU time is reported: {row:?}");
        let unattributed: usize = capture.of("unattributed").iter().map(kernels).sum();
        assert_eq!(unattributed, 0);
    }
}

/// A forward pass's work without its span (the test's callers enter their own).
fn model_parts(device: &mpsc::Sender<cubecl::Msg>) {
    cubecl::enqueue(device, model::FORWARD_KERNELS);
    cubecl::read_back(device);
}

rusty_fork_test! {
    /// Work no selected span owns (the caller's span is not selected) is `unattributed`, and names the
    /// span the caller had entered at its launch, once the census that knows it runs (it starts at the
    /// first unowned work, which a flush delivers): the user learns what to select.
    #[test]
    #[ignore = "needs a GPU"]
    fn unowned_kernels_name_the_unselected_span_entered_at_their_launch() {
        let _serial = setup();
        // The program's selection takes its training spans, and one was made before this
        // inference loop: CUDA timing runs (it starts with the first selected span), so the loop's
        // launches are seen. (Alone in its process since decision 77; before, the file's earlier
        // tests had started it.)
        tracing::info_span!("epoch").in_scope(|| ());
        let capture = Capture::start_all_threads();
        let (device, handle) = cubecl::device_thread();
        for _ in 0..4 {
            tracing::info_span!("inference").in_scope(|| model_parts(&device));
            assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");
        }
        drop(device);
        handle.join().expect("device thread");
        assert!(gpuspan::flush() || gpuspan::flush(), "gpuspan::flush timed out");

        let unowned = capture.of("unattributed");
        assert_eq!(unowned.iter().map(kernels).sum::<usize>(), 4 * model::FORWARD_KERNELS, "{unowned:?}");
        let named: Vec<Option<Value>> = unowned.iter().map(|r| attr(r, "gpuspan.open_span")).collect();
        let inference = Some(Value::Str("inference".into()));
        assert!(named.iter().all(|n| n.is_none() || *n == inference), "{named:?}");
        let count = named.iter().filter(|n| **n == inference).count();
        assert!(count >= 3 * model::FORWARD_KERNELS, "every launch after the first flush is named: {named:?}");
        let notes = gpuspan::summary().notes;
        assert!(notes.iter().any(|n| n.contains("GPUSPAN_SPANS='[inference]'")), "{notes:?}");
    }
}
