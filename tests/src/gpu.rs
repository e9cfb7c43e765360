//! A real wgpu device for tests: the first adapter found (Mesa's lavapipe in CI), with every
//! timestamp feature it offers, and a compute kernel that keeps it busy for a measurable time.

use crate::wgpu;
use wgpu::util::DeviceExt;

/// A device, its queue, and a compute pipeline that burns `iterations` multiply-adds per element.
#[allow(missing_debug_implementations)]
pub struct Gpu {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub buffer: wgpu::Buffer,
    pub elements: u32,
}

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
override iterations: u32 = 64u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&data)) { return; }
    var x = data[i];
    for (var k = 0u; k < iterations; k++) { x = x * 1.0001 + 0.5; }
    data[i] = x;
}
"#;

/// The first adapter, one for the process. GL is left out: Mesa's GL logs an EGL error and its
/// timestamps are less reliable. One instance, for speed on a software driver (two instances in
/// one process: tests/tests/wgpu/wgpu_instances.rs).
fn adapter() -> Option<&'static wgpu::Adapter> {
    static ADAPTER: std::sync::OnceLock<Option<wgpu::Adapter>> = std::sync::OnceLock::new();
    ADAPTER
        .get_or_init(|| {
            let instance = wgpu::Instance::new(instance_descriptor());
            pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            }))
            .ok()
        })
        .as_ref()
}

/// The tests' instance: no display, and GL left out (see [`adapter`]) unless `WGPU_BACKEND` says.
pub fn instance_descriptor() -> wgpu::InstanceDescriptor {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    }
    desc
}

/// A device of the adapter with `features(the adapter's timestamp features)`, registered.
fn new_device(
    features: impl FnOnce(wgpu::Features) -> wgpu::Features,
) -> Option<(wgpu::Adapter, wgpu::Device, wgpu::Queue)> {
    let adapter = adapter()?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("gpuspan test device"),
        required_features: features(gpuspan::wgpu::timestamp_features(adapter)),
        ..Default::default()
    }))
    .ok()?;
    gpuspan::wgpu::register(adapter, &device, &queue);
    Some((adapter.clone(), device, queue))
}

/// One device for the whole test process: devices are expensive on a software driver, and
/// gpuspan keeps every device it was told about.
fn device() -> Option<&'static (wgpu::Adapter, wgpu::Device, wgpu::Queue)> {
    static DEVICE: std::sync::OnceLock<Option<(wgpu::Adapter, wgpu::Device, wgpu::Queue)>> = std::sync::OnceLock::new();
    DEVICE.get_or_init(|| new_device(|all| all)).as_ref()
}

impl Gpu {
    /// `None` when no adapter exists (the caller decides whether that is a skip or a failure).
    pub fn new(elements: u32, iterations: u32) -> Option<Gpu> {
        let (adapter, device, queue) = device()?;
        Some(Self::on(adapter.clone(), device.clone(), queue.clone(), elements, iterations))
    }

    /// Like [`Gpu::for_test`], on a new device (registered) with `features` of the adapter's
    /// timestamp features: `|f| f & wgpu::Features::TIMESTAMP_QUERY` makes a device such as
    /// Metal's or WebGPU's, without in-encoder timestamps.
    pub fn for_test_with(
        features: impl FnOnce(wgpu::Features) -> wgpu::Features,
        elements: u32,
        iterations: u32,
    ) -> Option<Gpu> {
        let gpu = new_device(features).map(|(a, d, q)| Self::on(a, d, q, elements, iterations));
        Self::found(gpu)
    }

    /// Like [`Gpu::for_test`], on a new device handed through `gpuspan::wgpu::instrument`:
    /// the kernel, its buffer and everything the test makes go through the instrumented device.
    pub fn instrumented_for_test(elements: u32, iterations: u32) -> Option<Gpu> {
        let gpu = new_device(|all| all).map(|(a, d, q)| {
            let (d, q) = gpuspan::wgpu::instrument(&a, d, q);
            Self::on(a, d, q, elements, iterations)
        });
        Self::found(gpu)
    }

    /// [`Gpu::instrumented_for_test`], and the real device and queue behind it, as a windowed
    /// program keeps them to configure its surface (wgpu's surface needs the core device).
    pub fn instrumented_keeping_real(elements: u32, iterations: u32) -> Option<(Gpu, wgpu::Device, wgpu::Queue)> {
        let gpu = new_device(|all| all).map(|(a, d, q)| {
            let real = (d.clone(), q.clone());
            let (d, q) = gpuspan::wgpu::instrument(&a, d, q);
            (Self::on(a, d, q, elements, iterations), real)
        });
        let (gpu, real) = gpu.unzip();
        Self::found(gpu).zip(real).map(|(gpu, (d, q))| (gpu, d, q))
    }

    /// One new device twice: through `gpuspan::wgpu::instrument`, and as the real handles
    /// behind it, both on one buffer made on the real device (the instrumented one forwards
    /// buffers it did not make unchanged) and one pipeline: the instrumented device's, whose
    /// real pipeline the second uses (`gpuspan_testing::wgpu30::real_compute_pipeline`; the
    /// instrumented device takes only pipelines it made). A raw pass on the second runs the very
    /// pipeline, device and memory gpuspan times the first on: comparing the two compares the
    /// timestamps, not two devices or two pipelines (on NVIDIA a raw one-workgroup pass reads in
    /// one of two speeds ~300–450 ns apart, kept per raw timer: docs/benchmarks.md).
    pub fn instrumented_and_real(elements: u32, iterations: u32) -> Option<(Gpu, Gpu)> {
        let gpu = new_device(|all| all).map(|(a, d, q)| {
            let mut real = Self::on(a.clone(), d.clone(), q.clone(), elements, iterations);
            let (d, q) = gpuspan::wgpu::instrument(&a, d, q);
            let mut instrumented = Self::on(a, d, q, elements, iterations);
            instrumented.bind_group = instrumented.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("data"),
                layout: &instrumented.pipeline.get_bind_group_layout(0),
                entries: &[wgpu::BindGroupEntry { binding: 0, resource: real.buffer.as_entire_binding() }],
            });
            instrumented.buffer = real.buffer.clone();
            // One pipeline for both: two pipelines of one shader can run apart by ~0.3 µs on
            // NVIDIA (docs/benchmarks.md), which would read as gpuspan's error.
            real.pipeline = crate::wgpu_testing::real_compute_pipeline(&instrumented.pipeline).clone();
            real.bind_group = real.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("data"),
                layout: &real.pipeline.get_bind_group_layout(0),
                entries: &[wgpu::BindGroupEntry { binding: 0, resource: real.buffer.as_entire_binding() }],
            });
            (instrumented, real)
        });
        let (gpu, real) = gpu.unzip();
        Self::found(gpu).zip(real)
    }

    /// Like [`Gpu::for_test`], made the way a framework handed only an instance makes its
    /// device (bevy): the instance is `gpuspan::wgpu::instrument_instance`'s, and its adapter's
    /// `request_device` gives the (instrumented) device and queue; gpuspan is not called again.
    pub fn from_instrumented_instance_for_test(elements: u32, iterations: u32) -> Option<Gpu> {
        let instance = gpuspan::wgpu::instrument_instance(wgpu::Instance::new(instance_descriptor()));
        let gpu = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .ok()
        .and_then(|adapter| {
            let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("gpuspan test device"),
                required_features: gpuspan::wgpu::timestamp_features(&adapter),
                ..Default::default()
            }))
            .ok()?;
            Some(Self::on(adapter, device, queue, elements, iterations))
        });
        Self::found(gpu)
    }

    fn on(adapter: wgpu::Adapter, device: wgpu::Device, queue: wgpu::Queue, elements: u32, iterations: u32) -> Gpu {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("busy"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let constants = [("iterations", f64::from(iterations))];
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("busy"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, ..Default::default() },
            cache: None,
        });
        let buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("data"),
            contents: bytemuck::cast_slice(&vec![1.0f32; elements as usize]),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("data"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry { binding: 0, resource: buffer.as_entire_binding() }],
        });
        Gpu { adapter, device, queue, pipeline, bind_group, buffer, elements }
    }

    /// Like [`Gpu::new`], but a missing adapter fails in CI and skips (with one line) elsewhere.
    pub fn for_test(elements: u32, iterations: u32) -> Option<Gpu> {
        Self::found(Gpu::new(elements, iterations))
    }

    /// A missing adapter fails in CI and skips (with one line) elsewhere.
    fn found(gpu: Option<Gpu>) -> Option<Gpu> {
        match (&gpu, crate::in_ci()) {
            (None, true) => {
                panic!("no wgpu adapter found, and CI=true: install mesa-vulkan-drivers (scripts/test does)")
            }
            (None, false) => eprintln!("skipped: no wgpu adapter on this machine (set CI=true to make this a failure)"),
            _ => {}
        }
        gpu
    }

    /// Records the busy kernel into a compute pass of `encoder`, optionally with raw pass
    /// timestamps written to `reference` (queries 0 and 1).
    pub fn record_pass(&self, encoder: &mut wgpu::CommandEncoder, reference: Option<&wgpu::QuerySet>) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("busy"),
            timestamp_writes: reference.map(|q| wgpu::ComputePassTimestampWrites {
                query_set: q,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.elements.div_ceil(64), 1, 1);
    }

    /// Waits for everything submitted so far.
    pub fn wait(&self) {
        self.device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    }
}

/// Raw pass timestamps, read back by hand: the reference gpuspan's numbers are checked against.
#[allow(missing_debug_implementations)]
pub struct RawTimer {
    pub query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
}

impl RawTimer {
    pub fn new(device: &wgpu::Device) -> Self {
        let query_set = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("reference"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("reference resolve"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("reference read"),
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        RawTimer { query_set, resolve, read }
    }

    /// Resolves into the read-back buffer; call before finishing the encoder.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.query_set, 0..2, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 16);
    }

    /// The pass duration in nanoseconds (after the submission completed).
    pub fn read_ns(&self, gpu: &Gpu) -> f64 {
        let slice = self.read.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.expect("map reference"));
        gpu.wait();
        let t: Vec<u64> = {
            let view = crate::mapped(&slice);
            bytemuck::cast_slice(&view).to_vec()
        };
        self.read.unmap();
        (t[1] - t[0]) as f64 * f64::from(gpu.queue.get_timestamp_period())
    }
}
