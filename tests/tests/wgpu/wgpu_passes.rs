//! Pass-level timing (issue 27): on a device with `TIMESTAMP_QUERY` but not
//! `TIMESTAMP_QUERY_INSIDE_ENCODERS` (Metal, WebGPU in browsers), a scope that times an encoder
//! is timed by the `timestamp_writes` gpuspan gives the passes its body begins: the union of
//! them, labelled `gpu_passes`. Lavapipe with the in-encoder feature withheld stands in for
//! those devices. Serial: the loss counters are global.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, TimingSource};
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::gpu::{Gpu, RawTimer};
use gpuspan_tests::{gpu_timing, wgpu};
use rusty_fork::rusty_fork_test;
use std::sync::OnceLock;

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

/// The encoder-parameter shape: two passes (the second with a default descriptor), and between
/// them a pass of the same kernel begun by a helper, which is not rewritten: it keeps the raw
/// timestamp writes it asks for, so the test reads that pass's own duration, inside the union.
#[gpu_kernel(name = "two_passes", trace_all)]
fn two_passes(gpu: &Gpu, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder, inner: &RawTimer) {
    let _ = device;
    {
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("first"), timestamp_writes: None });
        dispatch(gpu, &mut pass);
    }
    gpu.record_pass(encoder, Some(&inner.query_set));
    let mut pass = encoder.begin_compute_pass(&Default::default());
    dispatch(gpu, &mut pass);
}

rusty_fork_test! {
    #[test]
    fn an_encoder_scope_is_the_union_of_its_passes() {
        let Some(gpu) = pass_level() else { return };
        let lost_before = lost();
        let capture = Capture::start();
        // In one encoder: a raw mark, the call (its two passes around the raw-timed one), a raw
        // mark. The union holds the raw-timed pass, and lies between the marks.
        let inner = RawTimer::new(&gpu.device);
        let around = RawTimer::new(&gpu.device);
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        mark(&mut encoder, &around.query_set, 0);
        two_passes(gpu, &gpu.device, &mut encoder, &inner);
        mark(&mut encoder, &around.query_set, 1);
        inner.resolve(&mut encoder);
        around.resolve(&mut encoder);
        gpu.queue.submit([encoder.finish()]);
        let (one_pass, marks) = (inner.read_ns(gpu), around.read_ns(gpu));
        assert!(gpuspan::flush());
        let records = capture.of("two_passes");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!(g.source, TimingSource::GpuPasses, "{g:?}");
        assert_eq!(g.source.as_str(), "gpu_passes");
        assert!(!g.bracketed, "{g:?}");
        // Both in whole ticks, rounded to nanoseconds: a tick of slack.
        let tick = f64::from(gpu.queue.get_timestamp_period());
        assert!(g.busy_ns as f64 + tick >= one_pass, "the union {} < the pass {one_pass} inside it", g.busy_ns);
        assert!(g.busy_ns as f64 <= marks + tick, "the union {} exceeds the marks around it {marks}", g.busy_ns);
        assert!(g.interval.end_ns > g.interval.start_ns, "{g:?}");
        // The figure docs/wgpu.md quotes (`-- --nocapture`).
        eprintln!(
            "union of 3 passes {} ns; the raw pass inside it {one_pass:.0} ns; raw marks around the call {marks:.0} ns",
            g.busy_ns
        );
        assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
    }
}

/// The attach shape: a device and a queue as parameters, the encoder made in the body; a
/// raw-timed pass between the two (as in `two_passes`).
#[gpu_kernel(name = "attached_passes", trace_all)]
fn attached_passes(gpu: &Gpu, device: &wgpu::Device, queue: &wgpu::Queue, inner: &RawTimer) {
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        {
            let mut pass = timed.begin_compute_pass(&Default::default());
            dispatch(gpu, &mut pass);
        }
        gpu.record_pass(&mut timed, Some(&inner.query_set));
        let mut pass = timed.begin_compute_pass(&Default::default());
        dispatch(gpu, &mut pass);
    }
    inner.resolve(&mut encoder);
    queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn an_attached_encoder_is_timed_by_its_passes() {
        let Some(gpu) = pass_level() else { return };
        let lost_before = lost();
        let capture = Capture::start();
        let inner = RawTimer::new(&gpu.device);
        attached_passes(gpu, &gpu.device, &gpu.queue, &inner);
        let one_pass = inner.read_ns(gpu);
        assert!(gpuspan::flush());
        let records = capture.of("attached_passes");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!(g.source, TimingSource::GpuPasses, "the attachment, not the queue bracket: {g:?}");
        assert!(!g.bracketed, "{g:?}");
        let tick = f64::from(gpu.queue.get_timestamp_period());
        assert!(g.busy_ns as f64 + tick >= one_pass, "the union {} < the pass {one_pass} inside it", g.busy_ns);
        assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
    }
}

/// A pass begun by the caller: it cannot get timestamp writes any more.
#[gpu_kernel(name = "given_a_pass", trace_all)]
fn given_a_pass(gpu: &Gpu, device: &wgpu::Device, pass: &mut wgpu::ComputePass<'_>) {
    let _ = device;
    dispatch(gpu, pass);
}

rusty_fork_test! {
    #[test]
    fn a_function_given_a_pass_is_timed_on_the_host_and_says_why() {
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

rusty_fork_test! {
    #[test]
    fn the_users_own_writes_are_kept_and_a_call_without_passes_is_host_timed() {
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
}

/// Only a queue: a bracket, its two timestamps written by empty passes on this device. Its pass
/// keeps the raw writes it asks for (only a scope timed by its passes fills them).
#[gpu_kernel(name = "queue_only", trace_all)]
fn queue_only(gpu: &Gpu, queue: &wgpu::Queue, inner: &RawTimer) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, Some(&inner.query_set));
    inner.resolve(&mut encoder);
    queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn a_queue_bracket_works_on_a_pass_level_device() {
        let Some(gpu) = pass_level() else { return };
        let capture = Capture::start();
        let inner = RawTimer::new(&gpu.device);
        queue_only(gpu, &gpu.queue, &inner);
        let one_pass = inner.read_ns(gpu);
        assert!(gpuspan::flush());
        let records = capture.of("queue_only");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!((g.source, g.bracketed), (TimingSource::GpuTimestamp, true), "{g:?}");
        // An upper bound of the pass it holds.
        let tick = f64::from(gpu.queue.get_timestamp_period());
        assert!(g.busy_ns as f64 + tick >= one_pass, "bracket {} < the pass {one_pass} inside it", g.busy_ns);
    }
}

/// A bare function (no wgpu parameter) that attaches the encoder it makes: its passes are
/// rewritten too, on the only registered device.
#[gpu_kernel(name = "bare_attach", trace_all)]
fn bare_attach(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        let mut pass = timed.begin_compute_pass(&Default::default());
        dispatch(gpu, &mut pass);
    }
    gpu.queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    /// In this order, in one test: the bare function needs the pass-level device to be the only one
    /// registered, and the second device (with in-encoder timestamps, where the same encoder
    /// function is timed by a query, as before) is registered after it.
    #[test]
    fn a_bare_attach_is_timed_by_its_passes_and_a_device_with_in_encoder_timestamps_is_unchanged() {
        let Some(gpu) = pass_level() else { return };
        let capture = Capture::start();
        bare_attach(gpu);
        gpu.wait();
        let Some(full) = Gpu::for_test(1 << 16, 64) else { return };
        assert!(full.device.features().contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS));
        for g in [gpu, &full] {
            let inner = RawTimer::new(&g.device);
            let mut encoder = g.device.create_command_encoder(&Default::default());
            two_passes(g, &g.device, &mut encoder, &inner);
            g.queue.submit([encoder.finish()]);
            g.wait();
        }
        assert!(gpuspan::flush());
        let bare = capture.of("bare_attach");
        assert_eq!(bare.len(), 1);
        assert_eq!(bare[0].source(), TimingSource::GpuPasses, "{:?}", bare[0]);
        let summary = gpuspan::summary();
        let site = summary.reached.iter().find(|s| s.site.desc.name == "bare_attach").expect("reached");
        assert_eq!(site.backend_label(), "wgpu (bare)");
        let records = capture.of("two_passes");
        let sources: Vec<TimingSource> = records.iter().map(Record::source).collect();
        assert_eq!(sources.len(), 2, "{records:?}");
        assert!(sources.contains(&TimingSource::GpuPasses), "{sources:?}");
        assert!(sources.contains(&TimingSource::GpuTimestamp), "{sources:?}");
    }
}

/// A render pass (a clear) in the encoder-parameter shape: its descriptor is filled the same way.
#[gpu_kernel(name = "render_clear", trace_all)]
fn render_clear(device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder, view: &wgpu::TextureView) {
    let _ = device;
    let _pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("clear"),
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations { load: wgpu::LoadOp::Clear(wgpu::Color::BLUE), store: wgpu::StoreOp::Store },
        })],
        ..Default::default()
    });
}

rusty_fork_test! {
    #[test]
    fn a_render_pass_is_timed_too() {
        let Some(gpu) = pass_level() else { return };
        let capture = Capture::start();
        let texture = gpu.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("target"),
            size: wgpu::Extent3d { width: 64, height: 64, depth_or_array_layers: 1 },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba8Unorm,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        });
        let view = texture.create_view(&Default::default());
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        render_clear(&gpu.device, &mut encoder, &view);
        gpu.queue.submit([encoder.finish()]);
        gpu.wait();
        assert!(gpuspan::flush());
        let records = capture.of("render_clear");
        assert_eq!(records.len(), 1);
        assert_eq!(gpu_timing(&records[0]).source, TimingSource::GpuPasses, "{:?}", records[0]);
    }
}

/// A framework's encoder wrapper with a `begin_compute_pass` of its own, which forwards.
struct Tracked {
    encoder: wgpu::CommandEncoder,
    passes: usize,
}

impl Tracked {
    fn begin_compute_pass(&mut self, desc: &wgpu::ComputePassDescriptor<'_>) -> wgpu::ComputePass<'_> {
        self.passes += 1;
        self.encoder.begin_compute_pass(desc)
    }
}

/// A pass begun through `attach`'s guard on an encoder behind a `Box`.
#[gpu_kernel(name = "guarded_passes", trace_all)]
fn guarded_passes(gpu: &Gpu, device: &wgpu::Device, queue: &wgpu::Queue) {
    let mut boxed = Box::new(device.create_command_encoder(&Default::default()));
    {
        let mut timed = gpuspan::wgpu::attach(&mut *boxed);
        let mut pass = timed.begin_compute_pass(&Default::default());
        dispatch(gpu, &mut pass);
    }
    queue.submit([boxed.finish()]);
}

/// The wrapper's own method is the one called, as written: its pass gets no writes of gpuspan's.
#[gpu_kernel(name = "wrapper_pass", trace_all, encoder = tracked.encoder)]
fn wrapper_pass(gpu: &Gpu, device: &wgpu::Device, tracked: &mut Tracked) {
    let _ = device;
    let mut pass = tracked.begin_compute_pass(&Default::default());
    dispatch(gpu, &mut pass);
}

/// An encoder behind a `Box`, named as the call's encoder.
#[gpu_kernel(name = "boxed_encoder", trace_all, encoder = **boxed)]
fn boxed_encoder(gpu: &Gpu, device: &wgpu::Device, boxed: &mut Box<wgpu::CommandEncoder>) {
    let _ = device;
    let mut pass = boxed.begin_compute_pass(&Default::default());
    dispatch(gpu, &mut pass);
}

rusty_fork_test! {
    /// The receiver decides (`__private::PassReceiver`): passes begun through a guard or a `Box`
    /// are timed as passes begun on the encoder; a method of a wrapper's own is called as written
    /// (so the call began no pass of gpuspan's and is timed on the host, saying why).
    #[test]
    fn passes_begun_through_guards_are_timed_and_a_wrappers_own_method_is_called_as_written() {
        let Some(gpu) = pass_level() else { return };
        let lost_before = lost();
        let capture = Capture::start();
        guarded_passes(gpu, &gpu.device, &gpu.queue);
        let mut tracked = Tracked { encoder: gpu.device.create_command_encoder(&Default::default()), passes: 0 };
        wrapper_pass(gpu, &gpu.device, &mut tracked);
        assert_eq!(tracked.passes, 1, "the wrapper's own method ran");
        let mut boxed = Box::new(gpu.device.create_command_encoder(&Default::default()));
        boxed_encoder(gpu, &gpu.device, &mut boxed);
        gpu.queue.submit([tracked.encoder.finish(), boxed.finish()]);
        gpu.wait();
        assert!(gpuspan::flush());
        for name in ["guarded_passes", "boxed_encoder"] {
            let records = capture.of(name);
            assert_eq!(records.len(), 1, "{name}");
            assert_eq!(records[0].source(), TimingSource::GpuPasses, "{name}: {:?}", records[0]);
        }
        let records = capture.of("wrapper_pass");
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].source(), TimingSource::Host, "{:?}", records[0]);
        let reason = host_reason("wrapper_pass");
        assert!(reason.contains("began no pass"), "{reason}");
        assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
    }
}
