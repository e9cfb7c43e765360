// One of the two shapes that still compile with measuring off only (docs/attributes.md): a method
// of another type named like wgpu's that takes `&self`, called through a binding that is neither
// `mut` nor `&mut`. The rewritten receiver is borrowed mutably: the compiler's suggestion
// (`mut recorder`) or `Recorder::begin_compute_pass(recorder, ..)` compiles in both modes.

struct Recorder;

impl Recorder {
    fn begin_compute_pass(&self, _label: &str) {}
}

#[gpuspan::gpu_kernel]
fn draw(queue: &wgpu::Queue, recorder: &Recorder) {
    recorder.begin_compute_pass("label");
    Recorder::begin_compute_pass(recorder, "label");
}

fn main() {}
