// wgpu handles held in `Arc`s, as parameters: `Arc<Queue>`, `&Arc<Queue>`, `Arc<Device>`,
// `&Arc<Device>`, alone and together, sync and async. With instrumentation on, a by-value
// `Arc<Queue>` once failed with E0308 (expected `&_`, found `Arc<Queue>`) inside gpuspan's code.

use std::sync::Arc;

#[gpuspan::gpu_kernel]
fn by_arc(queue: Arc<wgpu::Queue>) {
    queue.submit([]);
}

#[gpuspan::gpu_kernel]
fn by_ref_arc(queue: &Arc<wgpu::Queue>) {
    queue.submit([]);
}

#[gpuspan::gpu_transfer(direction = cpu_to_gpu)]
fn both_arcs(device: Arc<wgpu::Device>, queue: Arc<wgpu::Queue>, data: &[u8]) -> usize {
    let encoder = device.create_command_encoder(&Default::default());
    queue.submit([encoder.finish()]);
    data.len()
}

#[gpuspan::gpu_kernel]
fn both_ref_arcs(device: &Arc<wgpu::Device>, queue: &Arc<wgpu::Queue>) {
    let encoder = device.create_command_encoder(&Default::default());
    queue.submit([encoder.finish()]);
}

#[gpuspan::gpu_kernel]
fn device_arc(device: Arc<wgpu::Device>) {
    let _ = device.limits();
}

#[gpuspan::gpu_kernel]
fn device_ref_arc(device: &Arc<wgpu::Device>) {
    let _ = device.limits();
}

#[gpuspan::gpu_kernel]
async fn async_arc(queue: Arc<wgpu::Queue>) {
    queue.submit([]);
}

fn main() {
    let _ = (by_arc, by_ref_arc, both_arcs, both_ref_arcs, device_arc, device_ref_arc);
    let _ = async_arc;
}
