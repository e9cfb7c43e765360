//! Several GPUs through wgpu, in one process: one device per adapter, and on each an upload, a
//! kernel and a read-back, annotated with the device they run on (`device = gpu.device`,
//! `queue = gpu.queue`). Then it checks what gpuspan recorded: every call on its own device
//! (`gpu.device.id` in the order the devices were registered, `gpu.device.name` the adapter's),
//! GPU-timed where the adapter has timestamp queries, and the results right.
//!
//! Adapters: those of wgpu's primary backends (Vulkan, Metal, DX12), or of the backends
//! `WGPU_BACKEND` names. On the lent GPU machine, NVIDIA's Vulkan driver and Mesa's lavapipe
//! listed together in `VK_DRIVER_FILES` give two (docs/multi-gpu.md); in CI, lavapipe alone
//! gives one. Without an adapter it says so in one line and exits 0; it exits 1 when a check
//! fails. The timeline (`GPUSPAN_TRACE_FILE`) has one track per device.

use gpuspan::{gpu_kernel, gpu_transfer, TimingSource};
use gpuspan_testing::record::Record;
use std::process::ExitCode;

/// Values per buffer: 1 MiB of f32.
const N: u32 = 1 << 18;
const ROUNDS: usize = 4;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn double(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) { y[id.x] = 2.0 * y[id.x]; }
}
"#;

/// One adapter's device, with what runs on it.
struct Gpu {
    name: String,
    timestamps: bool,
    device: wgpu::Device,
    queue: wgpu::Queue,
    data: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pipeline: wgpu::ComputePipeline,
}

impl Gpu {
    fn open(adapter: &wgpu::Adapter) -> Result<Gpu, wgpu::RequestDeviceError> {
        let info = adapter.get_info();
        let features = gpuspan::wgpu::timestamp_features(adapter);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some(&info.name),
            required_features: features,
            ..Default::default()
        }))?;
        // Names the device after its adapter in every record, span and track.
        gpuspan::wgpu::register(adapter, &device, &queue);
        let data = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("data"),
            size: u64::from(N) * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("double"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("double"),
            layout: None,
            module: &module,
            entry_point: Some("double"),
            compilation_options: Default::default(),
            cache: None,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("double"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry { binding: 0, resource: data.as_entire_binding() }],
        });
        let timestamps = features.contains(wgpu::Features::TIMESTAMP_QUERY);
        Ok(Gpu { name: info.name, timestamps, device, queue, data, bind_group, pipeline })
    }
}

#[gpu_transfer(direction = cpu_to_gpu, queue = gpu.queue, device = gpu.device)]
fn upload(gpu: &Gpu, values: &[f32]) {
    gpu.queue.write_buffer(&gpu.data, 0, bytemuck::cast_slice(values));
    gpu.queue.submit([]);
}

#[gpu_kernel(device = gpu.device)]
fn double(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder) {
    let mut pass = encoder.begin_compute_pass(&Default::default());
    pass.set_pipeline(&gpu.pipeline);
    pass.set_bind_group(0, &gpu.bind_group, &[]);
    pass.dispatch_workgroups(N.div_ceil(64), 1, 1);
}

/// Upload, double and read back on `gpu`; the values read back.
fn round(gpu: &Gpu, values: &[f32]) -> Result<Vec<f32>, wgpu::BufferAsyncError> {
    upload(gpu, values);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    double(gpu, &mut encoder);
    gpu.queue.submit([encoder.finish()]);
    gpuspan::wgpu::read_buffer(&gpu.device, &gpu.queue, &gpu.data, .., |bytes| {
        bytemuck::cast_slice::<u8, f32>(bytes).to_vec()
    })
}

/// The backends whose adapters are used: `WGPU_BACKEND`'s, else the primary ones.
fn backends() -> wgpu::Backends {
    wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY)
}

fn adapters() -> Vec<wgpu::Adapter> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = backends();
    // One instance for all: devices of two instances compare equal in wgpu (docs/attributes.md).
    let instance = wgpu::Instance::new(desc);
    pollster::block_on(instance.enumerate_adapters(backends()))
}

/// What each call of `site` ran on, in call order: `(device id, device name, timing source)`.
fn devices_of(records: &[Record], site: &str) -> Vec<(Option<u32>, String, TimingSource)> {
    let mut of: Vec<&Record> = records.iter().filter(|r| r.site.desc.name == site).collect();
    of.sort_by_key(|r| r.host.start_ns);
    of.iter()
        .map(|r| {
            let g = r.gpu.as_ref();
            let device = g.and_then(|g| g.device.as_ref());
            (
                device.map(|d| d.id),
                device.map_or_else(String::new, |d| d.name.to_string()),
                g.map_or(TimingSource::Host, |g| g.source),
            )
        })
        .collect()
}

fn main() -> ExitCode {
    let adapters = adapters();
    if adapters.is_empty() {
        println!("multi_adapter: no GPU adapter found, nothing to run (backends {:?})", backends());
        return ExitCode::SUCCESS;
    }
    let _guard = gpuspan::init();
    let capture = gpuspan_testing::Capture::start_all_threads();
    let mut gpus = Vec::new();
    for adapter in &adapters {
        let info = adapter.get_info();
        match Gpu::open(adapter) {
            Ok(gpu) => {
                println!(
                    "multi_adapter: GPU {}: {} ({:?}, {:?}), timestamp queries: {}",
                    gpus.len(),
                    info.name,
                    info.backend,
                    info.device_type,
                    gpu.timestamps
                );
                gpus.push(gpu);
            }
            Err(e) => println!("multi_adapter: {} ({:?}): no device ({e}); left out", info.name, info.backend),
        }
    }

    let mut failed = Vec::new();
    let values: Vec<f32> = (0..N).map(|i| (i % 1024) as f32).collect();
    for _ in 0..ROUNDS {
        for gpu in &gpus {
            match round(gpu, &values) {
                Ok(out) if out.iter().zip(&values).all(|(o, v)| *o == 2.0 * v) => {}
                Ok(_) => failed.push(format!("{}: wrong values read back", gpu.name)),
                Err(e) => failed.push(format!("{}: read-back failed ({e})", gpu.name)),
            }
        }
    }
    if !gpuspan::flush() {
        failed.push("flush left GPU work pending".to_owned());
    }

    // Every call on the device it ran on, in the order the rounds ran them; GPU-timed where its
    // adapter has timestamp queries.
    let records = capture.records();
    for site in ["upload", "double", "read_buffer"] {
        let got = devices_of(&records, site);
        if got.len() != ROUNDS * gpus.len() {
            failed.push(format!("{site}: {} records of {} calls", got.len(), ROUNDS * gpus.len()));
        }
        for (k, (id, name, source)) in got.iter().enumerate() {
            // The rounds ran the devices in turn; gpuspan names a device "<adapter> (<backend>)".
            let (i, gpu) = (k % gpus.len(), &gpus[k % gpus.len()]);
            if *id != Some(i as u32) || !name.starts_with(&gpu.name) {
                failed.push(format!("{site} call {k}: on device {id:?} {name:?}, expected {i} {:?}", gpu.name));
            }
            if gpu.timestamps && *source != TimingSource::GpuTimestamp {
                failed.push(format!("{site} call {k} on GPU {i}: timed by {source:?}, not its timestamp queries"));
            }
        }
    }
    for (i, gpu) in gpus.iter().enumerate() {
        let busy: u64 = records
            .iter()
            .filter_map(|r| r.gpu.as_ref())
            .filter(|g| g.device.as_ref().is_some_and(|d| d.id == i as u32))
            .map(|g| g.busy_ns)
            .sum();
        println!("multi_adapter: GPU {i}: {} busy {:.3} ms over {ROUNDS} rounds", gpu.name, busy as f64 / 1e6);
    }
    if failed.is_empty() {
        println!("multi_adapter: every call on its device ({} device(s))", gpus.len());
        ExitCode::SUCCESS
    } else {
        for f in &failed {
            println!("multi_adapter: CHECK FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}
