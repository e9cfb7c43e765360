//! A program built with the `cuda` feature that has no CUDA site (here: only bare annotations,
//! as a wgpu-only or CPU-only program would have) hears nothing about CUDA: `init()` starts no
//! CUDA timing, loads no CUDA library, and says nothing, with or without a GPU. Its own binary,
//! because `init()` looks at every site compiled in.
#![cfg(feature = "cuda")]

use gpuspan::{gpu_kernel, TimingSource};

#[gpu_kernel]
fn bare(x: u32) -> u32 {
    x * 2
}

#[test]
fn a_program_without_cuda_sites_hears_nothing_about_cuda() {
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    assert_eq!(bare(21), 42);
    drop(guard);
    assert_eq!(gpuspan_testing::cuda::timing(), None, "CUDA timing started in a program without CUDA");
    let summary = gpuspan::summary();
    let notes = &summary.notes;
    assert!(!notes.iter().any(|n| n.contains("CUDA") || n.contains("CUPTI")), "{notes:?}");
    let row = summary.site("bare").expect("row");
    assert_eq!((row.calls, row.sources.as_slice(), row.backend_label()), (1, &[TimingSource::Host][..], "host"));
}

/// Loading libcuda is not using CUDA: a Vulkan driver or a library probing for CUDA loads it
/// too, and a wgpu-only program was told "this program used CUDA … call
/// `gpuspan::cuda::start()`". The hint comes only where a CUDA context is active. Each case in
/// a child process of its own (`init()` runs once per process).
#[test]
#[ignore = "needs a GPU"]
fn loading_libcuda_is_not_using_cuda() {
    const TEST: &str = "loading_libcuda_is_not_using_cuda";
    if let Ok(role) = std::env::var("GPUSPAN_LAZY_CHILD") {
        return lazy_child(&role);
    }
    for (role, hinted) in [("loaded", false), ("context", true)] {
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                &gpuspan_tests::test_path(module_path!(), TEST),
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("GPUSPAN_LAZY_CHILD", role)
            .output()
            .expect("child");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{role}: {text}");
        assert!(text.contains("LAZY_CHILD_DONE"), "{role} ran: {text}");
        assert_eq!(text.contains("this program used CUDA"), hinted, "{role}: {text}");
    }
}

/// After `init()` (which then starts no CUDA timing): libcuda loaded without `cuInit`, or a
/// primary context made and kept until shutdown; then one bare call.
fn lazy_child(role: &str) {
    let guard = gpuspan::Config::from_env().summary(true).no_trace_file().init();
    let mut version = 0;
    // SAFETY: an out-parameter; loads libcuda and reads its version, without initialising it.
    let loaded = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    assert_eq!(loaded, cudarc::driver::sys::CUresult::CUDA_SUCCESS, "libcuda on a GPU machine");
    let context = (role == "context").then(|| cudarc::driver::CudaContext::new(0).expect("a context"));
    assert_eq!(bare(1), 2);
    drop(guard);
    drop(context);
    println!("LAZY_CHILD_DONE");
}
