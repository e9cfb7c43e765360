//! A binary with the `cuda` feature and no CUDA site: `init()` looks at every site compiled in,
//! so this test cannot share a binary with the CUDA suite's sites (docs/decisions.md, 77).

mod cuda_lazy;
