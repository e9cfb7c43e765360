//! Host-side cost of a queue-bracketed upload against the same body unannotated, in one run
//! (issue 16's target: ≤ 1.2× the body). The body writes a buffer and submits, as an upload
//! function does; annotated, gpuspan submits the bracket's start before it and appends the
//! bracket's end to the body's own submission. Runs on whatever adapter is found (lavapipe in CI).

use criterion::{criterion_group, criterion_main, Criterion};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;

/// The upload as written, unannotated.
fn upload_body(queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[u8]) {
    queue.write_buffer(buffer, 0, data);
    queue.submit([]);
}

#[gpuspan::gpu_transfer(name = "bench_upload", direction = cpu_to_gpu, threshold_us = 1_000_000)]
fn upload_bracketed(queue: &wgpu::Queue, buffer: &wgpu::Buffer, data: &[u8]) {
    queue.write_buffer(buffer, 0, data);
    queue.submit([]);
}

fn uploads(c: &mut Criterion) {
    let Some(gpu) = Gpu::new(64 << 10, 1) else {
        eprintln!("skipped: no wgpu adapter");
        return;
    };
    gpuspan::wgpu::register(&gpu.adapter, &gpu.device, &gpu.queue);
    let data = vec![1u8; gpu.buffer.size() as usize];
    let mut g = c.benchmark_group("wgpu_upload_host_time");
    g.bench_function("body", |b| {
        b.iter(|| {
            upload_body(&gpu.queue, &gpu.buffer, &data);
            let _ = gpu.device.poll(wgpu::PollType::Poll);
        })
    });
    // The floor of any bracket that opens with a submission of its own (the staged copy of
    // `write_buffer` runs at the start of the next submission, so the opening timestamp must be
    // submitted before the body): the body after one empty command buffer's submission.
    g.bench_function("body_after_one_submission", |b| {
        b.iter(|| {
            let begin = gpu.device.create_command_encoder(&Default::default());
            gpu.queue.submit([begin.finish()]);
            upload_body(&gpu.queue, &gpu.buffer, &data);
            let _ = gpu.device.poll(wgpu::PollType::Poll);
        })
    });
    // Raw timestamps around the body, from a ring of query slots made once: what the GPU side
    // of any bracket costs, without (`raw_timestamps`) and with (`raw_timestamps_resolved`) the
    // resolve into a buffer that a read-back would then map.
    const RING: u32 = 4096;
    let ring = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("raw bracket"),
        ty: wgpu::QueryType::Timestamp,
        count: RING,
    });
    let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("raw bracket resolve"),
        size: u64::from(RING / 2) * wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT,
        usage: wgpu::BufferUsages::QUERY_RESOLVE,
        mapped_at_creation: false,
    });
    for resolved in [false, true] {
        let mut next = 0u32;
        let name = if resolved { "raw_timestamps_resolved" } else { "raw_timestamps" };
        g.bench_function(name, |b| {
            b.iter(|| {
                let slot = next;
                next = (next + 2) % RING;
                let mut begin = gpu.device.create_command_encoder(&Default::default());
                begin.write_timestamp(&ring, slot);
                gpu.queue.submit([begin.finish()]);
                gpu.queue.write_buffer(&gpu.buffer, 0, &data);
                let mut end = gpu.device.create_command_encoder(&Default::default());
                end.write_timestamp(&ring, slot + 1);
                if resolved {
                    let offset = u64::from(slot / 2) * wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT;
                    end.resolve_query_set(&ring, slot..slot + 2, &resolve, offset);
                }
                gpu.queue.submit([end.finish()]);
                let _ = gpu.device.poll(wgpu::PollType::Poll);
            })
        });
    }
    g.bench_function("bracketed", |b| {
        b.iter(|| {
            upload_bracketed(&gpu.queue, &gpu.buffer, &data);
            let _ = gpu.device.poll(wgpu::PollType::Poll);
        })
    });
    g.finish();
    gpuspan::flush();
}

criterion_group!(benches, uploads);
criterion_main!(benches);
