//! A small wgpu compute library written the way applications write one (resources in struct
//! fields, encoders made in the body, `anyhow` errors, `async` and `#[async_trait]` methods run
//! on tokio) and annotated with gpuspan without reshaping anything. It builds and runs with the
//! `profile` feature (gpuspan's instrumentation) on and off.

#[cfg(feature = "cuda")]
pub mod cuda;

use anyhow::{bail, ensure, Context as _};
use async_trait::async_trait;
use gpuspan::{gpu_kernel, gpu_transfer};
use std::sync::Arc;
use std::time::Duration;
use wgpu::util::DeviceExt;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&data)) { return; }
    var x = data[i];
    for (var k = 0u; k < 64u; k++) { x = x * 1.0001 + 0.5; }
    data[i] = x;
}
"#;

/// A compute pipeline over one storage buffer.
#[derive(Debug)]
pub struct Compute {
    device: wgpu::Device,
    queue: Arc<wgpu::Queue>,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    buffer: wgpu::Buffer,
    elements: u32,
}

impl Compute {
    /// The first adapter, with the timestamp features gpuspan can use (an empty set when
    /// instrumentation is off).
    pub fn new(elements: u32) -> anyhow::Result<Self> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        if std::env::var_os("WGPU_BACKEND").is_none() {
            desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        }
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&Default::default())).context("no GPU adapter")?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_features: gpuspan::wgpu::timestamp_features(&adapter),
            ..Default::default()
        }))?;
        gpuspan::wgpu::register(&adapter, &device, &queue);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("step"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("step"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("data"),
            contents: bytemuck::cast_slice(&vec![1.0f32; elements as usize]),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("data"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry { binding: 0, resource: buffer.as_entire_binding() }],
        });
        Ok(Compute { device, queue: Arc::new(queue), pipeline, bind_group, buffer, elements })
    }

    pub fn queue(&self) -> &Arc<wgpu::Queue> {
        &self.queue
    }

    pub fn device_encoder(&self) -> wgpu::CommandEncoder {
        self.device.create_command_encoder(&Default::default())
    }

    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Makes its own encoder from the device field and submits it: timed on the queue field.
    #[gpu_kernel(queue = self.queue)]
    pub fn step(&self, passes: u32) -> anyhow::Result<()> {
        ensure!(passes > 0, "a step needs at least one pass");
        let mut encoder = self.device.create_command_encoder(&Default::default());
        for _ in 0..passes {
            self.record(&mut encoder);
        }
        self.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// Records one pass into the caller's encoder: timed by queries in it.
    #[gpu_kernel]
    pub fn record(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.elements.div_ceil(64), 1, 1);
    }

    /// Leaves through `bail!` after recording a pass, with its query open in the encoder.
    #[gpu_kernel]
    pub fn record_at_most(&self, encoder: &mut wgpu::CommandEncoder, passes: u32) -> anyhow::Result<u32> {
        self.record(encoder);
        if passes > 4 {
            bail!("{passes} passes is more than 4");
        }
        Ok(passes)
    }

    /// Makes its own encoder from the device field and hands it to gpuspan with `attach`:
    /// timed by a query around exactly the passes recorded through the guard.
    #[gpu_kernel(device = self.device)]
    pub fn step_attached(&self, passes: u32) -> anyhow::Result<()> {
        ensure!(passes > 0, "a step needs at least one pass");
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut timed = gpuspan::wgpu::attach(&mut encoder);
            for _ in 0..passes {
                self.dispatch(&mut timed);
            }
        }
        self.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// No arguments at all: the attached pass is timed on the one registered device.
    #[gpu_kernel]
    pub async fn step_attached_async(&self) {
        tokio::task::yield_now().await;
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut timed = gpuspan::wgpu::attach(&mut encoder);
            self.dispatch(&mut timed);
        }
        self.queue.submit([encoder.finish()]);
    }

    fn dispatch(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.elements.div_ceil(64), 1, 1);
    }

    /// An async method spawned on tokio: its future must be `Send`.
    #[gpu_kernel(queue = self.queue)]
    pub async fn step_async(&self, passes: u32) -> anyhow::Result<()> {
        tokio::task::yield_now().await;
        let mut encoder = self.device.create_command_encoder(&Default::default());
        for _ in 0..passes {
            self.record(&mut encoder);
        }
        self.queue.submit([encoder.finish()]);
        Ok(())
    }
}

/// Uploads through a shared queue handle.
#[gpu_transfer(direction = cpu_to_gpu)]
pub fn upload(queue: &Arc<wgpu::Queue>, buffer: &wgpu::Buffer, data: &[f32]) {
    queue.write_buffer(buffer, 0, bytemuck::cast_slice(data));
    queue.submit([]);
}

/// A model behind a trait object, as inference servers write them.
#[async_trait]
pub trait Model: Send + Sync {
    async fn forward(&self, passes: u32) -> anyhow::Result<u32>;
}

#[async_trait]
impl Model for Compute {
    /// Waits 20 ms on the host (a batch filling up), then submits its passes.
    #[gpu_kernel(name = "forward", queue = self.queue)]
    async fn forward(&self, passes: u32) -> anyhow::Result<u32> {
        tokio::time::sleep(Duration::from_millis(20)).await;
        ensure!(passes > 0, "nothing to run");
        self.step(passes)?;
        Ok(passes)
    }
}
