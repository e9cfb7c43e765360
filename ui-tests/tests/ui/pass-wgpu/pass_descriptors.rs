// The pass descriptors a wgpu-timed body hands to `begin_compute_pass`/`begin_render_pass` go
// through gpuspan (for devices without in-encoder timestamps, docs/wgpu.md): each shape a
// program writes still compiles, its type inferred from the method as before.

#[gpuspan::gpu_kernel]
fn inferred(encoder: &mut wgpu::CommandEncoder) {
    let _pass = encoder.begin_compute_pass(&Default::default());
}

#[gpuspan::gpu_kernel]
fn borrowed_label(encoder: &mut wgpu::CommandEncoder, name: &str) {
    let label = format!("{name} pass");
    let desc = wgpu::ComputePassDescriptor { label: Some(&label), timestamp_writes: None };
    let pass = encoder.begin_compute_pass(&desc).forget_lifetime();
    drop(pass);
}

#[gpuspan::gpu_kernel]
fn render(encoder: &mut wgpu::CommandEncoder, view: &wgpu::TextureView) {
    let attachments = [Some(wgpu::RenderPassColorAttachment {
        view,
        depth_slice: None,
        resolve_target: None,
        ops: wgpu::Operations::default(),
    })];
    let _pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
        color_attachments: &attachments,
        ..Default::default()
    });
}

#[gpuspan::gpu_kernel]
fn attached(device: &wgpu::Device, queue: &wgpu::Queue) {
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        let _pass = timed.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
    }
    queue.submit([encoder.finish()]);
}

#[gpuspan::gpu_kernel]
async fn in_async(device: &wgpu::Device, queue: &wgpu::Queue) {
    let mut encoder = device.create_command_encoder(&Default::default());
    let _ = encoder.begin_compute_pass(&Default::default());
    queue.submit([encoder.finish()]);
}

fn main() {}
