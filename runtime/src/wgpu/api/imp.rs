//! The traits only the instrumented build (`enabled`) has: each major implements them in
//! `major/imp.rs`.

/// A `wgpu::ComputePassDescriptor` or `wgpu::RenderPassDescriptor` of a supported major: a
/// `begin_compute_pass`/`begin_render_pass` in an annotated body passes its descriptor through
/// `__private::wgpu_pass` (`backend/passes.rs`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a wgpu pass descriptor",
    note = "in a function annotated with a wgpu resource, gpuspan fills the `timestamp_writes` of the passes begun with \
            `.begin_compute_pass(..)`/`.begin_render_pass(..)`; a method of that name on another type \
            needs another name, or a call outside the annotated body"
)]
pub trait PassDescriptor<'a>: Clone {
    /// This descriptor, with gpuspan's `timestamp_writes` where the innermost scope on this
    /// thread is timed by its passes (the query set is kept in `holder`, a temporary of the
    /// call's statement; of one type for every major, so that a wrong argument is one error);
    /// else a copy.
    fn timed(&self, holder: &'a mut Option<Box<dyn std::any::Any>>) -> Self;
}

/// A `wgpu::AdapterInfo` of a supported major.
#[allow(unreachable_pub)] // the bound of the monitor's `describe_adapter` (feature `nvml`), lent to `gpuspan-testing`
pub trait Info {
    /// What the device monitor matches NVML devices by.
    fn facts(&self) -> crate::wgpu::AdapterFacts;
}
