//! GPU spans in an OpenTelemetry backend: a wgpu compute "service" whose requests are traced,
//! sent over OTLP to a collector (Jaeger, Tempo, an OpenTelemetry Collector).
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 cargo run -p gpuspan-examples --features otlp --bin otlp_trace
//! ```
//!
//! Each request is a span of the application (`#[instrument]`); inside it gpuspan adds the
//! upload, the kernel and the read-back as host spans, each with a child span carrying the
//! GPU's own timestamps. With `TRACEPARENT` set (a job launcher's trace), the whole run joins
//! that trace; `RANK`/`LOCAL_RANK` become resource attributes. Nothing else to configure: the
//! standard `OTEL_*` variables apply.

use gpuspan::{gpu_kernel, gpu_transfer};
use std::process::ExitCode;
use tracing_subscriber::prelude::*;

const N: u32 = 1 << 18;
const REQUESTS: u64 = 4;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read_write> y: array<f32>;

// Converges to 1.0 whatever the start: y <- y / 2 + 0.5, many times.
@compute @workgroup_size(64)
fn relax(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&y)) { return; }
    var v = y[i];
    for (var k = 0u; k < 256u; k++) { v = v * 0.5 + 0.5; }
    y[i] = v;
}
"#;

struct App {
    device: wgpu::Device,
    queue: wgpu::Queue,
    y: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pipeline: wgpu::ComputePipeline,
}

#[gpu_transfer(direction = cpu_to_gpu)]
fn upload(queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[f32]) {
    queue.write_buffer(buffer, 0, bytemuck::cast_slice(data));
}

#[gpu_kernel]
fn relax(app: &App, encoder: &mut wgpu::CommandEncoder) {
    let mut pass = encoder.begin_compute_pass(&Default::default());
    pass.set_pipeline(&app.pipeline);
    pass.set_bind_group(0, &app.bind_group, &[]);
    pass.dispatch_workgroups(N.div_ceil(64), 1, 1);
}

#[gpu_transfer(direction = gpu_to_cpu, bytes = u64::from(N) * 4)]
fn download(app: &App, encoder: &mut wgpu::CommandEncoder) {
    encoder.copy_buffer_to_buffer(&app.y, 0, &app.staging, 0, u64::from(N) * 4);
}

/// Reads the result back on the host (not annotated: plain host work inside the request span).
fn read_back(app: &App) -> Result<Vec<f32>, String> {
    let slice = app.staging.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    app.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| e.to_string())?;
    rx.recv().map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let out = bytemuck::cast_slice(&slice.get_mapped_range().map_err(|e| e.to_string())?).to_vec();
    app.staging.unmap();
    Ok(out)
}

/// One request of the service: the application's own span, exported through gpuspan's layer.
#[tracing::instrument(skip(app))]
fn request(app: &App, id: u64) -> Result<f32, String> {
    upload(&app.queue, &app.y, &vec![id as f32; N as usize]);
    let mut encoder = app.device.create_command_encoder(&Default::default());
    relax(app, &mut encoder);
    download(app, &mut encoder);
    app.queue.submit([encoder.finish()]);
    let out = read_back(app)?;
    Ok(out.iter().sum::<f32>() / out.len() as f32)
}

fn setup() -> Result<App, String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    }
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&Default::default()))
        .map_err(|e| format!("no GPU adapter: {e} (scripts/demo installs Mesa's software Vulkan driver)"))?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("otlp_trace"),
        required_features: gpuspan::wgpu::timestamp_features(&adapter),
        ..Default::default()
    }))
    .map_err(|e| e.to_string())?;
    gpuspan::wgpu::register(&adapter, &device, &queue);
    let bytes = u64::from(N) * 4;
    let y = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("y"),
        size: bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("staging"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("relax"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("relax"),
        layout: None,
        module: &module,
        entry_point: Some("relax"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("relax"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry { binding: 0, resource: y.as_entire_binding() }],
    });
    Ok(App { device, queue, y, staging, bind_group, pipeline })
}

fn main() -> ExitCode {
    // With OTEL_EXPORTER_OTLP_ENDPOINT set, spans and metrics go to that collector.
    let guard = gpuspan::Config::from_env().no_trace_file().init();
    tracing_subscriber::registry().with(guard.otlp_layer()).init();
    let app = match setup() {
        Ok(app) => app,
        Err(e) => {
            eprintln!("otlp_trace: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The run's root span: with TRACEPARENT set it is a child of the launcher's span.
    let root = tracing::info_span!("otlp_trace", requests = REQUESTS).entered();
    for id in 0..REQUESTS {
        match request(&app, id) {
            Ok(mean) => eprintln!("request {id}: mean {mean:.3}"),
            Err(e) => eprintln!("request {id} failed: {e}"),
        }
    }
    drop(root);
    // Dropping the guard resolves the pending GPU timestamps, sends the last spans and
    // metrics (within 5 s whatever the collector does) and prints the summary.
    drop(guard);
    ExitCode::SUCCESS
}
