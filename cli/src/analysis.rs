//! What every command derives from a capture (names by id, the GPU work as intervals per
//! device, how calls nest on each thread): `gpuspan_capture::analysis`, which the timeline
//! writer there shares.

pub use gpuspan_capture::analysis::*;
