//! A small wgpu compute pipeline, fully annotated: upload two vectors, run three kernels, copy
//! the result back and read it on the host. Run it with `scripts/demo`.
//!
//! What it shows: every site timed exactly by GPU timestamps. The kernels take the encoder; the
//! uploads copy from a staging buffer in an encoder they make and hand over with
//! `gpuspan::wgpu::attach` (which replaces the bracket their queue parameter would get); the
//! read-back is `gpuspan::wgpu::read_buffer`: its record is the GPU copy, and it carries the
//! host's wait for the mapping and its copy-out, which on a real GPU are often the bigger part.
//!
//! `--seconds N` runs frames for that long instead of eight: long enough to watch it with
//! `gpuspan top` (`scripts/demo --live`).

use gpuspan::{gpu_kernel, gpu_transfer};
use wgpu::util::DeviceExt;

const N: u32 = 1 << 20;
const FRAMES: usize = 8;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
struct Params { a: f32, iterations: u32 }
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&y)) { y[i] = p.a * x[i] + y[i]; }
}

@compute @workgroup_size(64)
fn square(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&y)) { y[i] = y[i] * y[i]; }
}

// Converges to 1.0 whatever the start: x <- x / 2 + 0.5, many times.
@compute @workgroup_size(64)
fn relax(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&y)) { return; }
    var v = y[i];
    for (var k = 0u; k < p.iterations; k++) { v = v * 0.5 + 0.5; }
    y[i] = v;
}
"#;

struct App {
    device: wgpu::Device,
    queue: wgpu::Queue,
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pipelines: [wgpu::ComputePipeline; 3],
}

/// The host's bytes go into a staging buffer (host work), then a copy in an encoder made here
/// and attached: the record is that copy's GPU time, with the slice's bytes.
#[gpu_transfer(direction = cpu_to_gpu)]
fn upload(device: &wgpu::Device, queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[f32]) {
    let staging = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("upload staging"),
        contents: bytemuck::cast_slice(data),
        usage: wgpu::BufferUsages::COPY_SRC,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        timed.copy_buffer_to_buffer(&staging, 0, buffer, 0, staging.size());
    }
    queue.submit([encoder.finish()]);
}

fn dispatch(app: &App, pass: &mut wgpu::ComputePass<'_>, which: usize) {
    pass.set_pipeline(&app.pipelines[which]);
    pass.set_bind_group(0, &app.bind_group, &[]);
    pass.dispatch_workgroups(N.div_ceil(64), 1, 1);
}

#[gpu_kernel]
fn saxpy(app: &App, encoder: &mut wgpu::CommandEncoder) {
    dispatch(app, &mut encoder.begin_compute_pass(&Default::default()), 0);
}

#[gpu_kernel]
fn square(app: &App, encoder: &mut wgpu::CommandEncoder) {
    dispatch(app, &mut encoder.begin_compute_pass(&Default::default()), 1);
}

#[gpu_kernel(name = "relax")]
fn relax(app: &App, encoder: &mut wgpu::CommandEncoder) {
    dispatch(app, &mut encoder.begin_compute_pass(&Default::default()), 2);
}

/// The read-back: `read_buffer` times the GPU copy into a mappable buffer exactly (its own
/// `read_buffer` site) and labels the host's wait for the mapping and its copy-out on the record.
fn read_back(app: &App) -> Result<Vec<f32>, wgpu::BufferAsyncError> {
    gpuspan::wgpu::read_buffer(&app.device, &app.queue, &app.y, .., |bytes| {
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    })
}

fn setup() -> Result<App, String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    }
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| format!("no GPU adapter: {e} (scripts/demo installs Mesa's software Vulkan driver)"))?;
    let info = adapter.get_info();
    eprintln!("adapter: {} ({:?}, {:?})", info.name, info.backend, info.device_type);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("gpuspan demo"),
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
    let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("params"),
        contents: bytemuck::cast_slice(&[2.0f32.to_bits(), 64u32]),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("kernels"),
        entries: &[
            storage_entry(0, true),
            storage_entry(1, false),
            wgpu::BindGroupLayoutEntry {
                binding: 2,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
        ],
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("kernels"),
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: x.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: y.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 2, resource: params.as_entire_binding() },
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
    Ok(App { device, queue, x, y, bind_group, pipelines })
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// `--seconds N`: run frames for N seconds instead of [`FRAMES`] frames.
fn run_for() -> Option<std::time::Duration> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => None,
        [flag, n] if flag == "--seconds" => match n.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => Some(std::time::Duration::from_secs_f64(s)),
            _ => {
                eprintln!("wgpu_pipeline: --seconds {n}: not a number of seconds");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("wgpu_pipeline: usage: wgpu_pipeline [--seconds N]");
            std::process::exit(2);
        }
    }
}

fn main() {
    let run_for = run_for();
    let guard = gpuspan::init();
    let app = match setup() {
        Ok(app) => app,
        Err(e) => {
            eprintln!("wgpu_pipeline: {e}");
            std::process::exit(1);
        }
    };
    let xs: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let ys = vec![1.0f32; N as usize];
    let start = std::time::Instant::now();
    let more = |frame: usize| match run_for {
        Some(d) => start.elapsed() < d,
        None => frame < FRAMES,
    };
    let mut frame = 0;
    while more(frame) {
        upload(&app.device, &app.queue, &app.x, &xs);
        upload(&app.device, &app.queue, &app.y, &ys);
        let mut encoder = app.device.create_command_encoder(&Default::default());
        saxpy(&app, &mut encoder);
        square(&app, &mut encoder);
        if frame % 2 == 1 {
            relax(&app, &mut encoder);
        }
        app.queue.submit([encoder.finish()]);
        let out = match read_back(&app) {
            Ok(out) => out,
            Err(e) => {
                eprintln!("wgpu_pipeline: read-back failed: {e}");
                std::process::exit(1);
            }
        };
        // Check the GPU's answer on the host: (2x + 1)^2, relaxed towards 1.0 on odd frames.
        let bad = out.iter().zip(&xs).filter(|(o, x)| {
            let squared = (2.0 * **x + 1.0).powi(2);
            let expected = if frame % 2 == 1 { relax_host(squared) } else { squared };
            (**o - expected).abs() > 1e-3 * expected.abs().max(1.0)
        });
        assert_eq!(bad.count(), 0, "frame {frame}: the GPU computed something else");
        frame += 1;
    }
    eprintln!("wgpu_pipeline: {frame} frames of {N} elements computed and checked");
    drop(guard);
}

fn relax_host(mut v: f32) -> f32 {
    for _ in 0..64 {
        v = v * 0.5 + 0.5;
    }
    v
}
