use gpuspan::gpu_kernel;

#[gpu_kernel(queue = device)]
fn submit(device: &wgpu::Device) {}

fn main() {}
