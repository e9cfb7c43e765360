use gpuspan::gpu_kernel;

// Stands in for wgpu's type: the check is on the parameter's type as written.
mod wgpu {
    pub struct CommandEncoder;
}

#[gpu_kernel]
fn draw(encoder: &wgpu::CommandEncoder) {
    let _ = encoder;
}

fn main() {}
