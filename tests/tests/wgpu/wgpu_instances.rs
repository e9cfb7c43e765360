//! Two `wgpu::Instance`s in one process (an application and a library, or two windows), each
//! with its own device: wgpu's `Device` equality compares ids each instance numbers from the
//! start, so the devices compare equal to wgpu; gpuspan's registry must still keep them apart
//! (docs/decisions.md, 58). Each call's record is attributed to its own device and GPU-timed,
//! on lavapipe in CI (scripts/test). In a process of its own: the registry then holds exactly
//! these two devices, numbered in the order they were registered.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, gpu_transfer, TimingSource};
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::wgpu;
use rusty_fork::rusty_fork_test;

/// A device and queue of the first adapter of a new instance, registered with gpuspan.
fn device_of_a_new_instance() -> Option<(wgpu::Device, wgpu::Queue)> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    }
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&Default::default())).ok()?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("gpuspan instance test device"),
        required_features: gpuspan::wgpu::timestamp_features(&adapter),
        ..Default::default()
    }))
    .ok()?;
    gpuspan::wgpu::register(&adapter, &device, &queue);
    Some((device, queue))
}

fn buffer(device: &wgpu::Device) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("data"),
        size: 1 << 20,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// Timed by queries in `encoder`, on the device it is given.
#[gpu_kernel(trace_all)]
fn clear(device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder, buffer: &wgpu::Buffer) {
    let _ = device.features();
    encoder.clear_buffer(buffer, 0, None);
}

/// Timed by a bracket on `queue`: the device is found from the queue.
#[gpu_transfer(direction = cpu_to_gpu, trace_all)]
fn upload(queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[u8]) {
    queue.write_buffer(buffer, 0, data);
    queue.submit([]);
}

/// The device id each of `records` is attributed to, in call order; each GPU-timed.
fn devices_of(mut records: Vec<Record>) -> Vec<u32> {
    records.sort_by_key(|r| r.scope_id);
    records
        .iter()
        .map(|r| {
            let g = gpuspan_tests::gpu_timing(r);
            assert_eq!(g.source, TimingSource::GpuTimestamp, "{r:?}");
            g.device.as_ref().unwrap_or_else(|| panic!("no device on {r:?}")).id
        })
        .collect()
}

rusty_fork_test! {
    #[test]
    fn two_instances_devices_are_kept_apart_and_each_call_timed_on_its_own() {
        let (Some((device_a, queue_a)), Some((device_b, queue_b))) =
            (device_of_a_new_instance(), device_of_a_new_instance())
        else {
            assert!(!gpuspan_tests::in_ci(), "no wgpu adapter, and CI=true");
            return;
        };
        assert!(device_a == device_b, "wgpu's own equality confuses them (the case under test)");
        let (buffer_a, buffer_b) = (buffer(&device_a), buffer(&device_b));
        let capture = Capture::start();
        for _ in 0..2 {
            for (device, queue, buffer) in [(&device_a, &queue_a, &buffer_a), (&device_b, &queue_b, &buffer_b)] {
                let mut encoder = device.create_command_encoder(&Default::default());
                clear(device, &mut encoder, buffer);
                queue.submit([encoder.finish()]);
                upload(queue, buffer, &[7; 4096]);
            }
        }
        for device in [&device_a, &device_b] {
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
        }
        assert!(gpuspan::flush());
        assert_eq!(devices_of(capture.of("clear")), [0, 1, 0, 1], "each encoder's call on its own device");
        assert_eq!(devices_of(capture.of("upload")), [0, 1, 0, 1], "each queue's call on its own device");
    }
}
