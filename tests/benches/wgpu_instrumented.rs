//! What the instrumented device (`gpuspan::wgpu::instrument`) costs on the host, against the
//! plain device it forwards to, measured in one run: per forwarded call (a dispatch inside a
//! pass), and for a frame of 100 passes (each timed: its timestamp writes, its record). Runs on
//! whatever adapter is found (lavapipe in CI).

use criterion::{criterion_group, criterion_main, Criterion};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;

/// Dispatches in the pass of the per-call row.
const CALLS: u32 = 100;
/// Passes in the frame row.
const PASSES: u32 = 100;

/// One pass with [`CALLS`] dispatches of one workgroup.
fn calls(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&gpu.pipeline);
        pass.set_bind_group(0, &gpu.bind_group, &[]);
        for _ in 0..CALLS {
            pass.dispatch_workgroups(1, 1, 1);
        }
    }
    gpu.queue.submit([encoder.finish()]);
    let _ = gpu.device.poll(wgpu::PollType::Poll);
}

/// A frame of [`PASSES`] labelled passes of one dispatch each, one submission.
fn frame(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("frame") });
    for _ in 0..PASSES {
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("node"), timestamp_writes: None });
        pass.set_pipeline(&gpu.pipeline);
        pass.set_bind_group(0, &gpu.bind_group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    gpu.queue.submit([encoder.finish()]);
    let _ = gpu.device.poll(wgpu::PollType::Poll);
}

fn instrumented(c: &mut Criterion) {
    let (Some(plain), Some(instrumented)) = (Gpu::new(64, 1), Gpu::instrumented_for_test(64, 1)) else {
        eprintln!("skipped: no wgpu adapter");
        return;
    };
    let mut g = c.benchmark_group("wgpu_instrumented_100_dispatches");
    g.bench_function("plain", |b| b.iter(|| calls(&plain)));
    g.bench_function("instrumented", |b| b.iter(|| calls(&instrumented)));
    g.finish();
    let mut g = c.benchmark_group("wgpu_instrumented_frame_100_passes");
    g.bench_function("plain", |b| b.iter(|| frame(&plain)));
    g.bench_function("instrumented", |b| b.iter(|| frame(&instrumented)));
    g.finish();
    plain.wait();
    instrumented.wait();
    gpuspan::flush();
}

criterion_group!(benches, instrumented);
criterion_main!(benches);
