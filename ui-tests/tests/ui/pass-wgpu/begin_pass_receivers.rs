// In a wgpu-timed body gpuspan times the passes begun on a wgpu encoder; every other receiver
// of a method named `begin_compute_pass`/`begin_render_pass` is called as written, so each of
// these compiles with measuring on and off (docs/attributes.md).

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// Another type with methods named like wgpu's.
struct Recorder;

impl Recorder {
    fn begin_compute_pass(&mut self, _label: &&str) {}
    fn begin_render_pass(&self, _label: &str) -> usize {
        0
    }
}

/// A framework's encoder wrapper with a method of its own.
struct Tracked(wgpu::CommandEncoder, usize);

impl Tracked {
    fn begin_compute_pass(&mut self, desc: &wgpu::ComputePassDescriptor<'_>) -> wgpu::ComputePass<'_> {
        self.1 += 1;
        self.0.begin_compute_pass(desc)
    }
}

/// A wrapper that only dereferences to the encoder.
struct Frame(wgpu::CommandEncoder);

impl Deref for Frame {
    type Target = wgpu::CommandEncoder;
    fn deref(&self) -> &wgpu::CommandEncoder {
        &self.0
    }
}

impl DerefMut for Frame {
    fn deref_mut(&mut self) -> &mut wgpu::CommandEncoder {
        &mut self.0
    }
}

struct Renderer {
    encoder: wgpu::CommandEncoder,
}

impl Renderer {
    #[gpuspan::gpu_kernel]
    fn node(&mut self, queue: &wgpu::Queue) {
        let _pass = self.encoder.begin_compute_pass(&Default::default());
    }
}

#[gpuspan::gpu_kernel]
fn other_types(queue: &wgpu::Queue, recorder: &mut Recorder, mut owned: Recorder) {
    recorder.begin_compute_pass(&"label");
    let _: usize = recorder.begin_render_pass("label");
    owned.begin_compute_pass(&"label");
}

#[gpuspan::gpu_kernel]
fn wrappers(device: &wgpu::Device, queue: &wgpu::Queue, tracked: &mut Tracked) {
    let _pass = tracked.begin_compute_pass(&Default::default());
    let mut frame = Frame(device.create_command_encoder(&Default::default()));
    drop(frame.begin_compute_pass(&Default::default()));
    let mut boxed = Box::new(device.create_command_encoder(&Default::default()));
    drop(boxed.begin_compute_pass(&Default::default()));
    let cell = RefCell::new(device.create_command_encoder(&Default::default()));
    drop(cell.borrow_mut().begin_compute_pass(&Default::default()));
    queue.submit([frame.0.finish(), boxed.finish(), cell.into_inner().finish()]);
}

fn main() {}
