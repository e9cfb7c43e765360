//! The wgpu suite (feature `wgpu-suite`: lavapipe in CI, on whichever major the features chose).
//! One binary, a module per subject (docs/decisions.md, 77); a test that needs the process's
//! `init()`, subscriber, environment or counters runs in a process of its own (rusty-fork).

mod bracket_capture;
#[path = "../labels_common/mod.rs"]
mod labels_common;
mod multi_adapter_example;
mod spans_devices;
mod spans_wgpu;
mod timeline_perfetto;
mod wgpu;
mod wgpu_attach;
mod wgpu_bracket;
mod wgpu_frameworks;
mod wgpu_instances;
mod wgpu_instrumented;
mod wgpu_passes;
