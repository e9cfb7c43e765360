//! Pass-level timing (issue 27): on a device with `TIMESTAMP_QUERY` but not
//! `TIMESTAMP_QUERY_INSIDE_ENCODERS` (Metal, WebGPU in browsers), a scope that times an encoder
//! is timed by the `timestamp_writes` gpuspan gives the passes its body begins: the union of
//! them, labelled `gpu_passes`. Lavapipe with the in-encoder feature withheld stands in for
//! those devices. Serial: the loss counters are global.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, Capture, Record, TimingSource};
use gpuspan_tests::gpu::{Gpu, RawTimer};
use gpuspan_tests::{gpu_timing, wgpu};
use std::sync::{Mutex, OnceLock};

static SERIAL: Mutex<()> = Mutex::new(());

/// The pass-level device, one for the process (devices are expensive on a software driver).
fn pass_level() -> Option<&'static Gpu> {
    static GPU: OnceLock<Option<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| Gpu::for_test_with(|f| f & wgpu::Features::TIMESTAMP_QUERY, 1 << 18, 256)).as_ref()
}

/// Scopes counted as lost so far, of every kind.
fn lost() -> u64 {
    gpuspan::summary().losses.iter().map(|(_, n)| *n).sum()
}

/// Why the site's calls were timed on the host, as the summary says it.
fn host_reason(name: &str) -> String {
    let summary = gpuspan::summary();
    let site = summary.reached.iter().find(|s| s.site.desc.name == name);
    site.and_then(|s| s.site.host_reason()).unwrap_or_default().to_owned()
}

/// One busy dispatch in a pass begun with `desc`.
fn dispatch(gpu: &Gpu, pass: &mut wgpu::ComputePass<'_>) {
    pass.set_pipeline(&gpu.pipeline);
    pass.set_bind_group(0, &gpu.bind_group, &[]);
    pass.dispatch_workgroups(gpu.elements.div_ceil(64), 1, 1);
}

/// A raw timestamp at this point of `encoder`: an empty pass writing `index` of `set` at its start.
fn mark(encoder: &mut wgpu::CommandEncoder, set: &wgpu::QuerySet, index: u32) {
    let _ = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some("mark"),
        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
            query_set: set,
            beginning_of_pass_write_index: Some(index),
            end_of_pass_write_index: None,
        }),
    });
}

/// The encoder-parameter shape: two passes, the second with a default descriptor.
#[gpu_kernel(name = "two_passes", trace_all)]
fn two_passes(gpu: &Gpu, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) {
    let _ = device;
    {
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("first"), timestamp_writes: None });
        dispatch(gpu, &mut pass);
    }
    let mut pass = encoder.begin_compute_pass(&Default::default());
    dispatch(gpu, &mut pass);
}

#[test]
fn an_encoder_scope_is_the_union_of_its_passes() {
    let _serial = gpuspan_tests::serial(&SERIAL);
    let Some(gpu) = pass_level() else { return };
    let lost_before = lost();
    let capture = Capture::start();
    // In one encoder: a raw pass of the same kernel (its own timestamps), then a raw mark,
    // the call's two passes, a raw mark. The union holds two such passes, and lies between
    // the marks.
    let single = RawTimer::new(&gpu.device);
    let around = RawTimer::new(&gpu.device);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, Some(&single.query_set));
    mark(&mut encoder, &around.query_set, 0);
    two_passes(gpu, &gpu.device, &mut encoder);
    mark(&mut encoder, &around.query_set, 1);
    single.resolve(&mut encoder);
    around.resolve(&mut encoder);
    gpu.queue.submit([encoder.finish()]);
    let (one_pass, marks) = (single.read_ns(gpu), around.read_ns(gpu));
    assert!(gpuspan::flush());
    let records = capture.of("two_passes");
    assert_eq!(records.len(), 1);
    let g = gpu_timing(&records[0]);
    assert_eq!(g.source, TimingSource::GpuPasses, "{g:?}");
    assert_eq!(g.source.as_str(), "gpu_passes");
    assert!(!g.bracketed, "{g:?}");
    assert!(g.busy_ns as f64 >= one_pass * 0.99, "two passes' union {} < one such pass {one_pass}", g.busy_ns);
    // Rounded to whole ticks on both sides: a tick of slack.
    let tick = f64::from(gpu.queue.get_timestamp_period());
    assert!(g.busy_ns as f64 <= marks + tick, "the union {} exceeds the marks around it {marks}", g.busy_ns);
    assert!(g.interval.end_ns > g.interval.start_ns, "{g:?}");
    assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
}

/// The attach shape: a device and a queue as parameters, the encoder made in the body.
#[gpu_kernel(name = "attached_passes", trace_all)]
fn attached_passes(gpu: &Gpu, device: &wgpu::Device, queue: &wgpu::Queue) {
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        for _ in 0..2 {
            let mut pass = timed.begin_compute_pass(&Default::default());
            dispatch(gpu, &mut pass);
        }
    }
    queue.submit([encoder.finish()]);
}

#[test]
fn an_attached_encoder_is_timed_by_its_passes() {
    let _serial = gpuspan_tests::serial(&SERIAL);
    let Some(gpu) = pass_level() else { return };
    let lost_before = lost();
    let capture = Capture::start();
    let single = RawTimer::new(&gpu.device);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, Some(&single.query_set));
    single.resolve(&mut encoder);
    gpu.queue.submit([encoder.finish()]);
    attached_passes(gpu, &gpu.device, &gpu.queue);
    let one_pass = single.read_ns(gpu);
    assert!(gpuspan::flush());
    let records = capture.of("attached_passes");
    assert_eq!(records.len(), 1);
    let g = gpu_timing(&records[0]);
    assert_eq!(g.source, TimingSource::GpuPasses, "the attachment, not the queue bracket: {g:?}");
    assert!(!g.bracketed, "{g:?}");
    assert!(g.busy_ns as f64 >= one_pass * 0.99, "two passes' union {} < one such pass {one_pass}", g.busy_ns);
    assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
}

/// A pass begun by the caller: it cannot get timestamp writes any more.
#[gpu_kernel(name = "given_a_pass", trace_all)]
fn given_a_pass(gpu: &Gpu, device: &wgpu::Device, pass: &mut wgpu::ComputePass<'_>) {
    let _ = device;
    dispatch(gpu, pass);
}

#[test]
fn a_function_given_a_pass_is_timed_on_the_host_and_says_why() {
    let _serial = gpuspan_tests::serial(&SERIAL);
    let Some(gpu) = pass_level() else { return };
    let capture = Capture::start();
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        given_a_pass(gpu, &gpu.device, &mut pass);
    }
    gpu.queue.submit([encoder.finish()]);
    gpu.wait();
    assert!(gpuspan::flush());
    let records = capture.of("given_a_pass");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].source(), TimingSource::Host, "{:?}", records[0]);
    let why = host_reason("given_a_pass");
    assert!(why.contains("pass-level device"), "{why}");
}

/// The encoder-parameter shape, with passes the user times themselves or none at all.
#[gpu_kernel(name = "own_writes", trace_all)]
fn own_writes(gpu: &Gpu, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder, reference: &RawTimer) {
    let _ = device;
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some("theirs"),
        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
            query_set: &reference.query_set,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }),
    });
    dispatch(gpu, &mut pass);
}

#[gpu_kernel(name = "no_pass", trace_all)]
fn no_pass(gpu: &Gpu, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) {
    let _ = device;
    encoder.clear_buffer(&gpu.buffer, 0, Some(256));
}

#[test]
fn the_users_own_writes_are_kept_and_a_call_without_passes_is_host_timed() {
    let _serial = gpuspan_tests::serial(&SERIAL);
    let Some(gpu) = pass_level() else { return };
    let lost_before = lost();
    let capture = Capture::start();
    let reference = RawTimer::new(&gpu.device);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    own_writes(gpu, &gpu.device, &mut encoder, &reference);
    no_pass(gpu, &gpu.device, &mut encoder);
    reference.resolve(&mut encoder);
    gpu.queue.submit([encoder.finish()]);
    // The user's timestamps were written where they asked.
    assert!(reference.read_ns(gpu) > 0.0);
    assert!(gpuspan::flush());
    for (name, why) in [("own_writes", "its own timestamp_writes"), ("no_pass", "began no pass")] {
        let records = capture.of(name);
        assert_eq!(records.len(), 1, "{name}");
        assert_eq!(records[0].source(), TimingSource::Host, "{name}: {:?}", records[0]);
        let reason = host_reason(name);
        assert!(reason.contains(why), "{name}: {reason}");
    }
    assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
}

/// Only a queue: a bracket, its two timestamps written by empty passes on this device.
#[gpu_kernel(name = "queue_only", trace_all)]
fn queue_only(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
}

#[test]
fn a_queue_bracket_works_on_a_pass_level_device() {
    let _serial = gpuspan_tests::serial(&SERIAL);
    let Some(gpu) = pass_level() else { return };
    let capture = Capture::start();
    let single = RawTimer::new(&gpu.device);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, Some(&single.query_set));
    single.resolve(&mut encoder);
    gpu.queue.submit([encoder.finish()]);
    let one_pass = single.read_ns(gpu);
    queue_only(gpu, &gpu.queue);
    gpu.wait();
    assert!(gpuspan::flush());
    let records = capture.of("queue_only");
    assert_eq!(records.len(), 1);
    let g = gpu_timing(&records[0]);
    assert_eq!((g.source, g.bracketed), (TimingSource::GpuTimestamp, true), "{g:?}");
    // An upper bound of the one pass it holds (the same kernel as the raw one).
    assert!(g.busy_ns as f64 >= one_pass * 0.5, "bracket {} against a pass of {one_pass}", g.busy_ns);
}

/// The same encoder function on a device with in-encoder timestamps: a query, as before.
#[test]
fn a_device_with_in_encoder_timestamps_is_unchanged() {
    let _serial = gpuspan_tests::serial(&SERIAL);
    let Some(gpu) = pass_level() else { return };
    let Some(full) = Gpu::for_test(1 << 16, 64) else { return };
    assert!(full.device.features().contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS));
    let capture = Capture::start();
    for g in [gpu, &full] {
        let mut encoder = g.device.create_command_encoder(&Default::default());
        two_passes(g, &g.device, &mut encoder);
        g.queue.submit([encoder.finish()]);
        g.wait();
    }
    assert!(gpuspan::flush());
    let records = capture.of("two_passes");
    let sources: Vec<TimingSource> = records.iter().map(Record::source).collect();
    assert_eq!(sources.len(), 2, "{records:?}");
    assert!(sources.contains(&TimingSource::GpuPasses), "{sources:?}");
    assert!(sources.contains(&TimingSource::GpuTimestamp), "{sources:?}");
}
