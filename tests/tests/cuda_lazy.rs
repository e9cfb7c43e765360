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
    assert_eq!(gpuspan::cuda::timing(), None, "CUDA timing started in a program without CUDA");
    let summary = gpuspan::summary();
    let notes = &summary.notes;
    assert!(!notes.iter().any(|n| n.contains("CUDA") || n.contains("CUPTI")), "{notes:?}");
    let row = summary.site("bare").expect("row");
    assert_eq!((row.calls, row.sources.as_slice(), row.backend_label()), (1, &[TimingSource::Host][..], "host"));
}
