//! One label per site in every output: the runtime's summary, its timeline, and `gpuspan
//! report` and `gpuspan flamegraph` on the capture of the same run agree on each site's kind,
//! backend, timing sources, whether its times are bounds, and whether it has a bandwidth.
//!
//! The sites cover every way a call gets its time on wgpu (lavapipe here): a recorder parameter
//! (exact), `gpuspan::wgpu::attach` in a bare function (exact, `wgpu (bare)`), a queue bracket
//! (a bound, no bandwidth), and host timing (an upload with a bandwidth, a read-back without).
//! One test in this file: it writes the process's capture and timeline.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, gpu_transfer};
use gpuspan_capture::Capture;
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;

use crate::labels_common;

#[gpu_kernel(trace_all)]
fn encode(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder) {
    gpu.record_pass(encoder, None);
}

/// A bare function that makes its own encoder: `attach` times it.
#[gpu_kernel(trace_all)]
fn attached(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        gpu.record_pass(&mut timed, None);
    }
    gpu.queue.submit([encoder.finish()]);
}

/// A frame bracketed on the queue, holding an attached call and an encoded one.
#[gpu_kernel(queue = gpu.queue, trace_all)]
fn frame(gpu: &Gpu) {
    attached(gpu);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encode(gpu, &mut encoder);
    gpu.queue.submit([encoder.finish()]);
}

#[gpu_transfer(queue = gpu.queue, direction = cpu_to_gpu, trace_all)]
fn upload(gpu: &Gpu, data: &[u8]) {
    gpu.queue.write_buffer(&gpu.buffer, 0, data);
    gpu.queue.submit([]);
}

/// The drop-in for `#[instrument(skip_all, fields(..))]`: `skip_all` says which parameters are
/// recorded, not which resource times the call; the queue parameter still brackets it.
#[gpu_kernel(skip_all, fields(round = 1), trace_all)]
fn skipped(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
}

#[gpu_kernel(trace_all)]
fn host_only(data: &[u64]) -> u64 {
    data.iter().sum()
}

#[gpu_transfer(direction = cpu_to_gpu, trace_all)]
fn stage(data: &[u64]) -> Vec<u64> {
    data.to_vec()
}

#[gpu_transfer(direction = gpu_to_cpu, trace_all)]
fn read_host(data: &[u64]) -> Vec<u64> {
    data.to_vec()
}

/// Two types' methods of one name: two sites that must not read as one.
struct Staging;
struct Scratch;

impl Staging {
    #[gpu_transfer(direction = cpu_to_gpu, trace_all)]
    fn copy(&self, data: &[u64]) -> Vec<u64> {
        data.to_vec()
    }
}

impl Scratch {
    #[gpu_transfer(direction = cpu_to_gpu, trace_all)]
    fn copy(&self, data: &[u64]) -> Vec<u64> {
        data.iter().rev().copied().collect()
    }
}

const SITES: [&str; 8] = ["encode", "attached", "frame", "upload", "skipped", "host_only", "stage", "read_host"];

#[test]
fn summary_timeline_report_and_flamegraph_label_every_site_alike() {
    let Some(gpu) = Gpu::for_test(1 << 14, 64) else { return };
    gpuspan::wgpu::register(&gpu.adapter, &gpu.device, &gpu.queue);
    let (guard, out) = labels_common::Outputs::start("labels");
    let bytes = vec![7u8; 4096];
    let words: Vec<u64> = (0..50_000).collect();
    for _ in 0..3 {
        frame(&gpu);
        upload(&gpu, &bytes);
        skipped(&gpu, &gpu.queue);
        std::hint::black_box(host_only(&words));
        std::hint::black_box(stage(&words));
        std::hint::black_box(read_host(&words));
        std::hint::black_box(Staging.copy(&words));
        std::hint::black_box(Scratch.copy(&words[..10]));
    }
    gpu.wait();
    assert!(gpuspan::flush(), "every call resolved");
    let summary = gpuspan::summary();
    drop(guard);

    let labels = labels_common::agree(&summary, &out.capture, &out.timeline, &SITES);
    let report = gpuspan_cli::report::build(&Capture::open(&out.capture).expect("the capture reads"));
    // Two sites named `copy`: each shown with its place, the same in the summary and the report.
    let copies: Vec<&str> = report.sites.iter().map(|r| r.site.as_str()).filter(|s| s.starts_with("copy")).collect();
    assert_eq!(copies.len(), 2, "{copies:?}");
    let table = summary.to_string();
    for c in &copies {
        assert!(c.starts_with("copy (labels_agree.rs:"), "{c}");
        assert!(table.contains(c), "{c} in the summary:\n{table}");
    }
    assert_ne!(copies[0], copies[1]);
    // The cases this test is for, as lavapipe times them.
    let label = |name: &str| labels.iter().find(|l| l.0 == name).map(|l| (l.1.as_str(), l.2, l.3)).expect("labelled");
    assert_eq!(label("encode"), ("wgpu", false, false));
    assert_eq!(label("attached"), ("wgpu (bare)", false, false));
    assert!(label("frame").1, "a queue bracket is a bound");
    assert_eq!(label("upload"), ("wgpu", true, false), "a bracketed upload has no bandwidth");
    assert_eq!(label("skipped"), ("wgpu", true, false), "`skip_all` keeps the queue bracket");
    assert_eq!(label("host_only"), ("host", false, false), "a kernel site has no bandwidth");
    assert_eq!(label("stage"), ("host", false, true));
    assert_eq!(label("read_host"), ("host", false, false), "a host-timed read-back is mostly waiting");
}
