//! NVTX ranges seen by a C tool attached through `NVTX_INJECTION64_PATH` (feature `nvtx`).

mod nvtx_tool;
