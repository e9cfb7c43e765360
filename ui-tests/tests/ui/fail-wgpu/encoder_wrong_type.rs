use gpuspan::gpu_kernel;

struct Frame {
    encoder: wgpu::Device,
}

#[gpu_kernel(encoder = frame.encoder)]
fn draw(frame: &mut Frame) {}

fn main() {}
