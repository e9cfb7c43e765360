//! One label per site in every output, on lavapipe (feature `wgpu-suite`). A binary of its own:
//! the capture file names every site compiled into the binary, and the report tells sites of one
//! name apart by their place, so this test's names must be its binary's only ones (decision 77).

mod labels_agree;
#[path = "../labels_common/mod.rs"]
mod labels_common;
