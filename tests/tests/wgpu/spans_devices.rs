//! A selected span on a process with two wgpu devices (issue 25): the span brackets every
//! registered device's queue, and the record goes to each device it submitted to, not to the
//! first registered one. Two devices without a GPU: Mesa's lavapipe listed twice in
//! `VK_DRIVER_FILES`, as tests/tests/wgpu/multi_adapter_example.rs does. A process of its own: it
//! sets the Vulkan loader's environment and the global subscriber.
#![cfg(feature = "wgpu-suite")]

use gpuspan_testing::Capture;
use gpuspan_tests::wgpu;
use rusty_fork::rusty_fork_test;
use std::path::PathBuf;

/// lavapipe's ICD file, where Mesa installs it.
fn lavapipe_icd() -> Option<PathBuf> {
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.filter_map(Result::ok).map(|e| e.path()))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("lvp_icd")))
}

struct Device {
    device: wgpu::Device,
    queue: wgpu::Queue,
    buffer: wgpu::Buffer,
}

impl Device {
    /// One submission of its own on this device's queue.
    fn work(&self) {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.clear_buffer(&self.buffer, 0, None);
        self.queue.submit([encoder.finish()]);
    }
}

fn devices() -> Vec<Device> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = wgpu::Backends::VULKAN;
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    adapters
        .iter()
        .filter(|a| a.get_info().name.contains("llvmpipe"))
        .filter_map(|adapter| {
            let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                required_features: gpuspan::wgpu::timestamp_features(adapter),
                ..Default::default()
            }))
            .ok()?;
            gpuspan::wgpu::register(adapter, &device, &queue);
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 1 << 20,
                usage: wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            Some(Device { device, queue, buffer })
        })
        .collect()
}

#[tracing_attributes::instrument(skip_all)]
fn on_second(d: &[Device]) {
    d[1].work();
}

#[tracing_attributes::instrument(skip_all)]
fn on_first(d: &[Device]) {
    d[0].work();
}

#[tracing_attributes::instrument(skip_all)]
fn on_both(d: &[Device]) {
    d[0].work();
    d[1].work();
}

fn wait(d: &[Device]) {
    for x in d {
        let _ = x.device.poll(wgpu::PollType::wait_indefinitely());
    }
    assert!(gpuspan::flush(), "flush left GPU work pending");
}

rusty_fork_test! {
    #[test]
    fn a_selected_span_is_bracketed_on_each_device_it_submits_to() {
        let Some(icd) = lavapipe_icd() else {
            assert!(!gpuspan_tests::in_ci(), "CI installs lavapipe (mesa-vulkan-drivers)");
            println!("skipped: no lavapipe ICD file");
            return;
        };
        let dir = std::env::temp_dir().join(format!("gpuspan-spans-devices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (first, second) = (dir.join("lvp-a.json"), dir.join("lvp-b.json"));
        for copy in [&first, &second] {
            std::fs::copy(&icd, copy).expect("copy the ICD file");
        }
        // Before the first wgpu instance of this process.
        std::env::set_var("VK_DRIVER_FILES", std::env::join_paths([&first, &second]).unwrap());
        std::env::remove_var("WGPU_BACKEND");
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with(concat!(module_path!(), "=info")));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        let d = devices();
        assert_eq!(d.len(), 2, "lavapipe listed twice is two devices");

        // Warm-up: each device's first brackets calibrate its clock and make gpuspan's buffers,
        // whose first use wgpu may flush in submissions of its own (counted as anyone's).
        for _ in 0..2 {
            on_both(&d);
            wait(&d);
        }
        let capture = Capture::start_all_threads();
        on_second(&d);
        wait(&d);
        on_first(&d);
        wait(&d);
        on_both(&d);
        wait(&d);
        let device_of = |name: &str| -> Vec<u32> {
            let mut v: Vec<u32> = capture
                .of(name)
                .iter()
                .map(|r| r.gpu.as_ref().and_then(|g| g.device.as_ref()).map_or(u32::MAX, |d| d.id))
                .collect();
            v.sort();
            v
        };
        let first_id = device_of("on_first");
        let second_id = device_of("on_second");
        assert_eq!(first_id.len(), 1, "one record on the one device it submitted to: {first_id:?}");
        assert_eq!(second_id.len(), 1, "{second_id:?}");
        assert_ne!(second_id, first_id, "the span that submitted to the second device is timed there, not on the first");
        let mut both = [first_id[0], second_id[0]];
        both.sort();
        assert_eq!(device_of("on_both"), both, "one record per device it submitted to");
        for r in capture.of("on_second").iter().chain(capture.of("on_both").iter()) {
            let g = r.gpu.as_ref().expect("GPU-timed");
            assert!(g.bracketed && g.bracket_at_exit && g.interval.duration_ns() > 0, "{g:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
