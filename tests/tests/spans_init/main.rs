//! `GPUSPAN_SPANS` read by `init()`, on lavapipe (feature `wgpu-suite`). A binary of its own: the
//! capture file names every site compiled into the binary and the test finds its span's site by
//! name, so that name must be its binary's only one (decision 77).

mod spans_init;
