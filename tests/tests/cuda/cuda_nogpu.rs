//! The CUDA feature where there may be no GPU (CI): CUDA sites still run, are recorded, timed on
//! the host, and say why once, at the first CUDA call rather than at `init()`. On a GPU machine
//! the same tests check the GPU case instead.
#![cfg(feature = "cuda")]

use cudarc::driver::CudaStream;
use gpuspan::cuda::{CudaError, Timing};
use gpuspan::{gpu_kernel, TimingSource};
use gpuspan_testing::Capture;
use rusty_fork::rusty_fork_test;
use std::sync::Arc;

#[gpu_kernel(backend = cuda)]
fn no_stream(x: u32) -> u32 {
    x + 1
}

// Every stream shape the macro accepts compiles (they are not called without a device).
#[gpu_kernel]
fn by_ref(stream: &CudaStream) {
    let _ = stream;
}
#[gpu_kernel]
fn by_arc(stream: &Arc<CudaStream>) {
    let _ = stream;
}
#[gpu_kernel(stream = owner.0)]
fn by_expr(owner: &(Arc<CudaStream>, u8)) {
    let _ = owner;
}

rusty_fork_test! {
    #[test]
    fn a_cuda_site_runs_and_is_recorded_whatever_the_machine() {
        let capture = Capture::start();
        assert_eq!(no_stream(41), 42);
        gpuspan::flush();
        let r = capture.of("no_stream");
        assert_eq!(r.len(), 1);
        // No GPU work was launched inside, so even with CUPTI the call is timed on the host.
        assert_eq!(r[0].source(), TimingSource::Host);
        let _ = (by_ref, by_arc, by_expr);
    }
}

rusty_fork_test! {
    #[test]
    fn without_a_driver_it_says_so_once_and_times_on_the_host() {
        let timing = gpuspan::cuda::start();
        no_stream(1);
        let notes = gpuspan::summary().notes;
        let said = notes.iter().filter(|n| n.contains("CUDA sites are timed on the host")).count();
        match gpuspan::cuda::probe() {
            Err(e) => {
                assert!(matches!(e, CudaError::NoDriver | CudaError::NoDevice(_)));
                assert_eq!(timing, Timing::Host);
                assert_eq!(said, 1, "said once: {notes:?}");
                if matches!(e, CudaError::NoDriver) {
                    assert!(notes.iter().any(|n| n.starts_with("no CUDA driver found: CUDA sites are timed on the host")));
                }
            }
            // On a GPU machine: a device is used, and nothing claims otherwise.
            Ok(devices) => {
                assert!(!devices.is_empty());
                assert_ne!(timing, Timing::Host);
                assert_eq!(said, 0, "{notes:?}");
            }
        }
    }
}

const LAZY: &str = "init_says_nothing_about_cuda_until_a_cuda_site_is_called";

rusty_fork_test! {
    /// `init()` in a program with CUDA sites says nothing about CUDA; a missing driver is said at
    /// the first CUDA call, once. Runs in a child process: the choice is made once per process.
    #[test]
    fn init_says_nothing_about_cuda_until_a_cuda_site_is_called() {
        if std::env::var("GPUSPAN_CHILD").as_deref() == Ok("lazy") {
            let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
            eprintln!("MARK init done");
            match gpuspan::cuda::probe() {
                // With a device (and a CUDA site compiled in) init starts CUDA timing, silently.
                Ok(_) => assert!(gpuspan_testing::cuda::timing().is_some()),
                Err(_) => assert_eq!(gpuspan_testing::cuda::timing(), None, "no driver: nothing started at init"),
            }
            no_stream(1);
            eprintln!("MARK called");
            drop(guard);
            return;
        }
        let exe = std::env::current_exe().expect("current exe");
        let out = std::process::Command::new(exe)
            .args([&gpuspan_tests::test_path(module_path!(), LAZY), "--exact", "--nocapture", "--test-threads=1"])
            .env("GPUSPAN_CHILD", "lazy")
            .output()
            .expect("child");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "child failed:\n{text}{}", String::from_utf8_lossy(&out.stdout));
        let (before, after) = text.split_once("MARK init done").expect("marker");
        assert!(!before.contains("CUDA") && !before.contains("CUPTI"), "init spoke of CUDA:\n{before}");
        if gpuspan::cuda::probe().is_err() {
            let (call, _) = after.split_once("MARK called").expect("marker");
            assert_eq!(call.matches("CUDA sites are timed on the host").count(), 1, "said at the first call:\n{text}");
        }
    }
}
