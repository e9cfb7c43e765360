//! A program to watch with `gpuspan top`: a small wgpu compute pipeline run frame after frame for
//! a bounded time, with the live feed on.
//!
//! ```text
//! GPUSPAN_LIVE=1 cargo run -p gpuspan-examples --bin live_demo -- --seconds 60 &
//! cargo run -p gpuspan-cli -- top
//! ```
//!
//! Each frame uploads two vectors, runs two or three kernels (`relax` on odd frames only, so the
//! sites' rates differ), copies the result back and checks it on the host (`check`, timed on
//! the host, returns an error on every tenth frame on purpose, so the error column has
//! something to show). At the end it prints how many frames it completed, which the tests
//! compare with and without a client that stalls.

use gpuspan::{gpu_kernel, gpu_transfer};
use std::time::{Duration, Instant};
use wgpu::util::DeviceExt;

const N: u32 = 1 << 16;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&y)) { y[i] = 2.0 * x[i] + y[i]; }
}

@compute @workgroup_size(64)
fn square(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&y)) { y[i] = y[i] * y[i]; }
}

@compute @workgroup_size(64)
fn relax(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&y)) { return; }
    var v = y[i];
    for (var k = 0u; k < 64u; k++) { v = v * 0.5 + 0.5; }
    y[i] = v;
}
"#;

struct App {
    device: wgpu::Device,
    queue: wgpu::Queue,
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pipelines: [wgpu::ComputePipeline; 3],
}

#[gpu_transfer(direction = cpu_to_gpu)]
fn upload(queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[f32]) {
    queue.write_buffer(buffer, 0, bytemuck::cast_slice(data));
}

fn dispatch(app: &App, encoder: &mut wgpu::CommandEncoder, which: usize) {
    let mut pass = encoder.begin_compute_pass(&Default::default());
    pass.set_pipeline(&app.pipelines[which]);
    pass.set_bind_group(0, &app.bind_group, &[]);
    pass.dispatch_workgroups(N.div_ceil(64), 1, 1);
}

#[gpu_kernel]
fn saxpy(app: &App, encoder: &mut wgpu::CommandEncoder) {
    dispatch(app, encoder, 0);
}

#[gpu_kernel]
fn square(app: &App, encoder: &mut wgpu::CommandEncoder) {
    dispatch(app, encoder, 1);
}

#[gpu_kernel]
fn relax(app: &App, encoder: &mut wgpu::CommandEncoder) {
    dispatch(app, encoder, 2);
}

#[gpu_transfer(direction = gpu_to_cpu, bytes = u64::from(N) * 4)]
fn copy_to_staging(app: &App, encoder: &mut wgpu::CommandEncoder) {
    encoder.copy_buffer_to_buffer(&app.y, 0, &app.staging, 0, u64::from(N) * 4);
}

#[gpu_transfer(direction = gpu_to_cpu, bytes = u64::from(N) * 4)]
fn map_and_copy_out(app: &App) -> Result<Vec<f32>, String> {
    let slice = app.staging.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    app.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| e.to_string())?;
    rx.recv().map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let out = {
        let view = slice.get_mapped_range().map_err(|e| e.to_string())?;
        bytemuck::cast_slice(&view).to_vec()
    };
    app.staging.unmap();
    Ok(out)
}

/// The host's check of the GPU's answer; every tenth frame it is told to fail, on purpose.
#[gpu_kernel]
fn check(out: &[f32], xs: &[f32], frame: u64) -> Result<(), String> {
    let expected = |x: f32| {
        let squared = (2.0 * x + 1.0).powi(2);
        if frame % 2 == 1 {
            (0..64).fold(squared, |v, _| v * 0.5 + 0.5)
        } else {
            squared
        }
    };
    let bad = out.iter().zip(xs).filter(|(o, x)| (**o - expected(**x)).abs() > 1e-3 * expected(**x).abs().max(1.0));
    match bad.count() {
        0 if frame % 10 == 9 => Err(format!("frame {frame}: a planted error, for the error column")),
        0 => Ok(()),
        n => Err(format!("frame {frame}: {n} wrong values")),
    }
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
        label: Some("live demo"),
        required_features: gpuspan::wgpu::timestamp_features(&adapter),
        ..Default::default()
    }))
    .map_err(|e| e.to_string())?;
    gpuspan::wgpu::register(&adapter, &device, &queue);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("kernels"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let bytes = u64::from(N) * 4;
    let storage = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    };
    let (x, y) = (storage("x"), storage("y"));
    let staging = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("staging"),
        contents: &vec![0u8; bytes as usize],
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    });
    let entry = |binding, read_only| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("kernels"),
        entries: &[entry(0, true), entry(1, false)],
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("kernels"),
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: x.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: y.as_entire_binding() },
        ],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("kernels"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = |entry| {
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
    };
    let pipelines = [pipeline("saxpy"), pipeline("square"), pipeline("relax")];
    Ok(App { device, queue, x, y, staging, bind_group, pipelines })
}

/// `--seconds N` (default 30): how long to run.
fn seconds() -> Result<f64, String> {
    let mut args = std::env::args().skip(1);
    let mut seconds = 30.0;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                let v = args.next().ok_or("--seconds needs a number")?;
                seconds = v.parse().map_err(|_| format!("--seconds {v}: not a number"))?;
            }
            other => return Err(format!("unknown argument {other:?} (live_demo [--seconds N])")),
        }
    }
    Ok(seconds)
}

fn main() {
    let seconds = match seconds() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("live_demo: {e}");
            std::process::exit(2);
        }
    };
    let guard = gpuspan::init();
    match guard.live_socket() {
        Some(path) => eprintln!("live_demo: live feed on {} (watch it: gpuspan top)", path.display()),
        None => eprintln!("live_demo: no live feed (run with GPUSPAN_LIVE=1)"),
    }
    let app = match setup() {
        Ok(app) => app,
        Err(e) => {
            eprintln!("live_demo: {e}");
            std::process::exit(1);
        }
    };
    let xs: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let ys = vec![1.0f32; N as usize];
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds.max(0.0));
    let (mut frames, mut failed) = (0u64, 0u64);
    while Instant::now() < until {
        upload(&app.queue, &app.x, &xs);
        upload(&app.queue, &app.y, &ys);
        let mut encoder = app.device.create_command_encoder(&Default::default());
        saxpy(&app, &mut encoder);
        square(&app, &mut encoder);
        if frames % 2 == 1 {
            relax(&app, &mut encoder);
        }
        copy_to_staging(&app, &mut encoder);
        app.queue.submit([encoder.finish()]);
        let out = match map_and_copy_out(&app) {
            Ok(out) => out,
            Err(e) => {
                eprintln!("live_demo: read-back failed: {e}");
                std::process::exit(1);
            }
        };
        if let Err(e) = check(&out, &xs, frames) {
            if !e.contains("planted") {
                eprintln!("live_demo: {e}");
                std::process::exit(1);
            }
            failed += 1;
        }
        frames += 1;
    }
    eprintln!("live_demo: {frames} frames in {:.1} s ({failed} planted errors)", start.elapsed().as_secs_f64());
    drop(guard);
}
