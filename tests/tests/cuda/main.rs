//! The CUDA suite (feature `cuda`): CUPTI replay and the no-GPU paths everywhere, the GPU tests
//! (`#[ignore = "needs a GPU"]`) on a GPU machine (`scripts/gpu run` runs each module with
//! `--ignored`). One binary, a module per subject (docs/decisions.md, 77).

mod cuda_fixtures;
mod cuda_gpu;
mod cuda_nogpu;
mod cuda_placement;
#[path = "../labels_common/mod.rs"]
mod labels_common;
mod multi_gpu_example;
#[path = "../otlp_common/mod.rs"]
mod otlp_common;
mod spans_cuda;
mod spans_cuda_time;
mod spans_cuda_window;
