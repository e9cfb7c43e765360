//! Two wgpu majors in one process (features `wgpu-29` and `wgpu-30` both on, docs/wgpu.md
//! "Majors"): each major's device registered, and a function of each shape on each major GPU-timed
//! on its own device. A scope has a slot on each major's `attach` stack; an attachment of either
//! major times its call. On lavapipe in CI (scripts/test).
#![cfg(all(feature = "wgpu-29", feature = "wgpu-30"))]

use gpuspan::{gpu_kernel, gpu_transfer, TimingSource};
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::gpu::Gpu;

/// A wgpu 29 device on the first adapter (lavapipe in CI), registered with gpuspan.
fn device_29() -> Option<(wgpu29::Device, wgpu29::Queue)> {
    let mut desc = wgpu29::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu29::Backends::VULKAN | wgpu29::Backends::METAL | wgpu29::Backends::DX12;
    }
    let instance = wgpu29::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&Default::default())).ok()?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu29::DeviceDescriptor {
        label: Some("gpuspan wgpu 29 device"),
        required_features: gpuspan::wgpu::timestamp_features(&adapter),
        ..Default::default()
    }))
    .ok()?;
    gpuspan::wgpu::register(&adapter, &device, &queue);
    Some((device, queue))
}

fn buffer_29(device: &wgpu29::Device) -> wgpu29::Buffer {
    device.create_buffer(&wgpu29::BufferDescriptor {
        label: Some("data 29"),
        size: 1 << 20,
        usage: wgpu29::BufferUsages::COPY_DST | wgpu29::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

#[gpu_kernel(name = "encoder_29", trace_all)]
fn encoder_29(encoder: &mut wgpu29::CommandEncoder, buffer: &wgpu29::Buffer) {
    encoder.clear_buffer(buffer, 0, None);
}

#[gpu_kernel(name = "encoder_30", trace_all)]
fn encoder_30(gpu: &Gpu, encoder: &mut wgpu30::CommandEncoder) {
    gpu.record_pass(encoder, None);
}

/// The most common signature, on wgpu 29: device and queue parameters, the encoder attached.
#[gpu_kernel(name = "attached_29", trace_all)]
fn attached_29(device: &wgpu29::Device, queue: &wgpu29::Queue, buffer: &wgpu29::Buffer) {
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        timed.clear_buffer(buffer, 0, None);
    }
    queue.submit([encoder.finish()]);
}

#[gpu_transfer(name = "upload_29", direction = cpu_to_gpu, trace_all)]
fn upload_29(queue: &wgpu29::Queue, buffer: &wgpu29::Buffer, data: &[u8]) {
    queue.write_buffer(buffer, 0, data);
    queue.submit([]);
}

fn timed_on_the_gpu(records: &[Record], name: &str) {
    assert_eq!(records.len(), 1, "{name}: {records:?}");
    let g = records[0].gpu.as_ref().unwrap_or_else(|| panic!("{name} has no GPU timing: {:?}", records[0]));
    assert_eq!(g.source, TimingSource::GpuTimestamp, "{name}: {g:?}");
}

#[test]
fn each_majors_calls_are_gpu_timed_on_its_own_device() {
    let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
    let Some((device, queue)) = device_29() else {
        assert!(!gpuspan_tests::in_ci(), "no wgpu 29 adapter, and CI=true");
        return;
    };
    let buffer = buffer_29(&device);
    let capture = Capture::start();

    let mut encoder = device.create_command_encoder(&Default::default());
    encoder_29(&mut encoder, &buffer);
    queue.submit([encoder.finish()]);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder_30(&gpu, &mut encoder);
    gpu.queue.submit([encoder.finish()]);
    attached_29(&device, &queue, &buffer);
    upload_29(&queue, &buffer, &[7; 4096]);

    let _ = device.poll(wgpu29::PollType::wait_indefinitely());
    gpu.wait();
    assert!(gpuspan::flush());
    for name in ["encoder_29", "encoder_30", "attached_29", "upload_29"] {
        timed_on_the_gpu(&capture.of(name), name);
    }
    let attached = &capture.of("attached_29")[0];
    assert!(!attached.gpu.as_ref().is_some_and(|g| g.bracketed), "the attachment replaced the bracket: {attached:?}");
    let notes = gpuspan::summary().notes;
    assert!(
        !notes.iter().any(|n| n.contains("attached_29") && n.contains("not timed")),
        "attach was ignored: {notes:?}"
    );
}
