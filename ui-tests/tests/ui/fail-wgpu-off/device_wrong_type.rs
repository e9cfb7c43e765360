use gpuspan::gpu_kernel;

#[gpu_kernel(device = queue.clone())]
fn submit(queue: &wgpu::Queue) {}

fn main() {}
