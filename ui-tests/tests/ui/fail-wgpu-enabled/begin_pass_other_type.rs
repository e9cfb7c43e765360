use gpuspan::gpu_kernel;

struct Recorder;

impl Recorder {
    fn begin_compute_pass(&mut self, _label: &&str) {}
}

// A method of another type named like wgpu's, in a wgpu-timed body: its argument is taken for a
// pass descriptor.
#[gpu_kernel]
fn draw(queue: &wgpu::Queue, recorder: &mut Recorder) {
    recorder.begin_compute_pass(&"label");
}

fn main() {}
