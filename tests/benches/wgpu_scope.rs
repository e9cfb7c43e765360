//! Host-side cost of an annotated compute pass against the same pass in a raw wgpu-profiler
//! scope (the user doing by hand what gpuspan automates), measured in one run. Target: gpuspan
//! ≤ 1.1× the raw scope. Runs on whatever adapter is found (lavapipe in CI). And the cost of
//! the pass-descriptor rewrite on its own.

use criterion::{criterion_group, criterion_main, Criterion};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;

#[gpuspan::gpu_kernel(name = "bench_pass", threshold_us = 1_000_000)]
fn annotated_pass(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder) {
    gpu.record_pass(encoder, None);
}

fn passes(c: &mut Criterion) {
    let Some(gpu) = Gpu::new(64, 1) else {
        eprintln!("skipped: no wgpu adapter");
        return;
    };
    let mut g = c.benchmark_group("wgpu_pass_host_time");
    g.bench_function("bare", |b| {
        b.iter(|| {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            gpu.record_pass(&mut encoder, None);
            gpu.queue.submit([encoder.finish()]);
            let _ = gpu.device.poll(wgpu::PollType::Poll);
        })
    });
    let mut profiler = wgpu_profiler::GpuProfiler::new(&gpu.device, Default::default()).expect("profiler");
    let period = gpu.queue.get_timestamp_period();
    g.bench_function("raw_wgpu_profiler_scope", |b| {
        b.iter(|| {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            {
                let mut scope = profiler.scope("pass", &mut encoder);
                gpu.record_pass(&mut scope, None);
            }
            profiler.resolve_queries(&mut encoder);
            gpu.queue.submit([encoder.finish()]);
            profiler.end_frame().expect("end frame");
            let _ = gpu.device.poll(wgpu::PollType::Poll);
            std::hint::black_box(profiler.process_finished_frame(period));
        })
    });
    g.bench_function("gpuspan_annotated", |b| {
        b.iter(|| {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            annotated_pass(&gpu, &mut encoder);
            gpu.queue.submit([encoder.finish()]);
            let _ = gpu.device.poll(wgpu::PollType::Poll);
        })
    });
    g.finish();
    gpuspan::flush();
}

/// What the macro's rewrite of a pass descriptor (`macros/src/passes.rs`) costs where the scope
/// is not timed by its passes (every device with in-encoder timestamps): a look at the thread's
/// innermost scope and a copy of the descriptor, against the descriptor as written.
fn pass_descriptor(c: &mut Criterion) {
    let desc = wgpu::ComputePassDescriptor { label: Some("pass"), timestamp_writes: None };
    let mut g = c.benchmark_group("wgpu_pass_descriptor");
    g.bench_function("as_written", |b| {
        b.iter(|| {
            let d = std::hint::black_box(&desc).clone();
            std::hint::black_box(&d);
        })
    });
    g.bench_function("through_gpuspan", |b| {
        b.iter(|| {
            let mut holder = None;
            let d = gpuspan::__private::wgpu_pass(&mut holder, std::hint::black_box(&desc));
            std::hint::black_box(&d);
        })
    });
    g.finish();
}

criterion_group!(benches, passes, pass_descriptor);
criterion_main!(benches);
