//! A selected span's entries under CUPTI are windows of their threads' time (decision 71), run
//! where there is no GPU: the window path is simulated (`gpuspan_testing::cuda::simulate_cupti_windows`:
//! windows on `CLOCK_REALTIME`, queued as under CUPTI, nothing resolved), so what is checked is
//! what each entry hands the resolver: one window per entry, on whichever thread enters, and no
//! CUPTI correlation id pushed (there is no libcupti here to push one). Attribution of real
//! launches by those windows: `spans_cuda.rs` on a GPU, and the resolver's unit tests. On a
//! machine where CUDA timing starts, the simulation cannot run and the test says so and passes.
#![cfg(feature = "cuda")]

use rusty_fork::rusty_fork_test;
use tracing_subscriber::layer::SubscriberExt;

#[gpuspan::gpu_kernel]
fn bare_scope() {}

rusty_fork_test! {
    #[test]
    fn each_entry_of_a_selected_span_queues_one_window_and_pushes_nothing() {
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with(concat!(module_path!(), "=info")));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        let _guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
        if gpuspan::cuda::probe().is_ok() {
            eprintln!("a CUDA device is present: CUPTI would start, the simulation cannot run here (spans_cuda.rs runs)");
            return;
        }
        let drain = || gpuspan_testing::cuda::simulate_cupti_windows().expect("CUDA timing never starts without a device");
        drain();
        let span = tracing::info_span!(target: module_path!(), "request");
        for _ in 0..5 {
            span.in_scope(|| ());
        }
        assert_eq!(drain(), 5, "one window per entry");
        // Nested in the span's entry, an annotated scope: its own window, before the entry's.
        span.in_scope(bare_scope);
        assert_eq!(drain(), 2, "the annotated scope's window and the entry's");
        // Entered on other threads, at once.
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| span.in_scope(|| std::thread::sleep(std::time::Duration::from_millis(2))));
            }
        });
        assert_eq!(drain(), 3, "one window per thread's entry");
        // An unselected span is no window.
        tracing::info_span!(target: "elsewhere", "other").in_scope(|| ());
        assert_eq!(drain(), 0);
        drop(span);
        assert_eq!(drain(), 1, "the span's own end, at its close");
    }
}
