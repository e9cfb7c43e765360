//! The CUDA feature where there may be no GPU (CI): CUDA sites still run, are recorded, timed on
//! the host, and say why once. On a GPU machine the same tests check the CUPTI case instead.
#![cfg(feature = "cuda")]

use cudarc::driver::CudaStream;
use gpuspan::cuda::{CudaError, Timing};
use gpuspan::{gpu_kernel, Capture, TimingSource};
use std::sync::{Arc, Mutex};

/// Captures see every record in the process: these tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

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

#[test]
fn a_cuda_site_runs_and_is_recorded_whatever_the_machine() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let capture = Capture::start();
    assert_eq!(no_stream(41), 42);
    gpuspan::flush();
    let r = capture.of("no_stream");
    assert_eq!(r.len(), 1);
    // No GPU work was launched inside, so even with CUPTI the call is timed on the host.
    assert_eq!(r[0].source(), TimingSource::Host);
    let _ = (by_ref, by_arc, by_expr);
}

#[test]
fn without_a_driver_it_says_so_once_and_times_on_the_host() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Err(e) = gpuspan::cuda::probe() else {
        eprintln!("a CUDA device is present: nothing to check here");
        return;
    };
    assert!(matches!(e, CudaError::NoDriver | CudaError::NoDevice(_)));
    assert_eq!(gpuspan::cuda::start(), Timing::Host);
    no_stream(1);
    let notes = gpuspan::summary().notes;
    let said = notes.iter().filter(|n| n.contains("CUDA sites are timed on the host")).count();
    assert_eq!(said, 1, "said once: {notes:?}");
    if matches!(e, CudaError::NoDriver) {
        assert!(notes.iter().any(|n| n.starts_with("no CUDA driver found: CUDA sites are timed on the host")));
    }
}
