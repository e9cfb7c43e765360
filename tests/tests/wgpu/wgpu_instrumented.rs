//! The instrumented device (`gpuspan::wgpu::instrument`, issue 38): code shaped like the big
//! wgpu users, which owns its encoders and never calls gpuspan between setup and exit, gets every
//! pass timed exactly, named by its label and attributed to the call or span of the thread that
//! began it. On a real driver (lavapipe in CI).
//!
//! The references: a pass with its own timestamp writes is read from them (the same ticks the
//! test reads by hand), and every pass gpuspan times lies within `write_timestamp` marks the
//! test writes around it in the same encoder.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, TimingSource};
use gpuspan_testing::record::{Activity, GpuTiming};
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::gpu::{Gpu, RawTimer};
use gpuspan_tests::wgpu;
use rusty_fork::rusty_fork_test;
use std::sync::{mpsc, Arc};

#[allow(dead_code)] // not every helper is used here
use crate::labels_common;

/// Timestamps written with `write_timestamp` around a pass, in the same encoder: an upper bound
/// of the pass (the marks hold it and nothing of gpuspan's). Needs in-encoder timestamps.
struct Marks {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    count: u32,
}

impl Marks {
    fn new(device: &wgpu::Device, passes: u32) -> Marks {
        let count = 2 * passes;
        let bytes = u64::from(count) * 8;
        Marks {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("marks"),
                ty: wgpu::QueryType::Timestamp,
                count,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("marks resolve"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            read: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("marks read"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            count,
        }
    }

    fn before(&self, encoder: &mut wgpu::CommandEncoder, pass: u32) {
        encoder.write_timestamp(&self.set, 2 * pass);
    }

    fn after(&self, encoder: &mut wgpu::CommandEncoder, pass: u32) {
        encoder.write_timestamp(&self.set, 2 * pass + 1);
    }

    fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.set, 0..self.count, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, u64::from(self.count) * 8);
    }

    /// Each pass's marks, in nanoseconds apart (after the submission completed).
    fn read_ns(&self, gpu: &Gpu) -> Vec<f64> {
        let slice = self.read.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.expect("map marks"));
        gpu.wait();
        let t: Vec<u64> = bytemuck::cast_slice(&gpuspan_tests::mapped(&slice)).to_vec();
        self.read.unmap();
        let period = f64::from(gpu.queue.get_timestamp_period());
        t.chunks_exact(2).map(|p| (p[1] - p[0]) as f64 * period).collect()
    }
}

fn in_encoders(gpu: &Gpu) -> bool {
    gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
}

fn gpu_of(r: &Record) -> &GpuTiming {
    r.gpu.as_ref().unwrap_or_else(|| panic!("no GPU timing for {}: {r:?}", r.site.desc.name))
}

fn names(r: &Record) -> Vec<&str> {
    r.activities.iter().map(|a| &*a.name).collect()
}

/// What a record timed by its passes is: exact (no bracket), its busy time the sum of its
/// passes, its interval from the first one's start to the last one's end.
fn assert_summed(r: &Record) {
    let g = gpu_of(r);
    assert_eq!(g.source, TimingSource::GpuTimestamp, "{r:?}");
    assert!(!g.bracketed, "the sum of passes is exact, not a bracket: {g:?}");
    let sum: u64 = r.activities.iter().map(|a| a.interval.duration_ns()).sum();
    assert_eq!(g.busy_ns, sum, "busy time is the sum of the passes: {r:?}");
    // The interval runs from the first pass's start and holds every pass (and at least their sum:
    // passes placed on the host clock one by one may overlap there by up to the clock bound).
    let first = r.activities.iter().map(|a| a.interval.start_ns).min().unwrap();
    let last = r.activities.iter().map(|a| a.interval.end_ns).max().unwrap();
    assert_eq!(g.interval.start_ns, first, "{r:?}");
    assert!(g.interval.end_ns >= last && g.busy_ns <= g.interval.duration_ns(), "{g:?}");
    assert!(g.interval.end_ns <= last.max(first + sum), "no longer than its passes need: {g:?}");
    assert!(r.activities.iter().all(|a| a.device.is_some()), "each pass names its device: {r:?}");
}

fn activity<'r>(r: &'r Record, name: &str) -> &'r Activity {
    r.activities.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("no pass {name} in {:?}", names(r)))
}

/// Stands for bevy's render graph: nodes each begin a labelled pass on the frame's encoder,
/// which the framework owns, and the framework submits once per frame.
mod bevy_like {
    use super::{wgpu, Gpu, Marks};

    pub struct RenderContext<'w> {
        pub gpu: &'w Gpu,
        pub encoder: wgpu::CommandEncoder,
        pub node: u32,
    }

    pub type Node<'a> = &'a dyn Fn(&mut RenderContext<'_>);

    pub fn run_frame(gpu: &Gpu, marks: &Marks, nodes: &[Node<'_>]) {
        let encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("frame") });
        let mut ctx = RenderContext { gpu, encoder, node: 0 };
        for node in nodes {
            marks.before(&mut ctx.encoder, ctx.node);
            node(&mut ctx);
            marks.after(&mut ctx.encoder, ctx.node);
            ctx.node += 1;
        }
        marks.resolve(&mut ctx.encoder);
        gpu.queue.submit([ctx.encoder.finish()]);
    }

    /// A node whose pass is labelled.
    pub fn labelled(label: &'static str) -> impl Fn(&mut RenderContext<'_>) {
        move |ctx| {
            let mut pass = ctx
                .encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
            pass.set_pipeline(&ctx.gpu.pipeline);
            pass.set_bind_group(0, &ctx.gpu.bind_group, &[]);
            pass.dispatch_workgroups(ctx.gpu.elements.div_ceil(64), 1, 1);
        }
    }

    /// A node whose pass has no label: it is named after its pipeline (`busy`).
    pub fn unlabelled(ctx: &mut RenderContext<'_>) {
        ctx.gpu.record_pass(&mut ctx.encoder, None);
    }
}

/// The game's frame: one annotated call around the framework's frame, nothing else.
#[gpu_kernel(trace_all)]
fn frame(gpu: &Gpu, marks: &Marks) {
    let shadow = bevy_like::labelled("shadow");
    let main = bevy_like::labelled("main pass");
    bevy_like::run_frame(gpu, marks, &[&shadow, &main, &bevy_like::unlabelled]);
}

rusty_fork_test! {
    #[test]
    fn a_bevy_like_render_graph_gets_each_nodes_pass_timed_and_summed_into_the_frame() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 16, 256) else { return };
        if !in_encoders(&gpu) {
            eprintln!("skipped: the marks need TIMESTAMP_QUERY_INSIDE_ENCODERS");
            return;
        }
        let capture = Capture::start();
        let marks = Marks::new(&gpu.device, 3);
        let mut around = Vec::new();
        for _ in 0..3 {
            frame(&gpu, &marks);
            around.push(marks.read_ns(&gpu));
        }
        assert!(gpuspan::flush(), "every pass resolved");
        let mut frames = capture.of("frame");
        assert_eq!(frames.len(), 3);
        frames.sort_by_key(|r| r.host.start_ns);
        for (r, around) in frames.iter().zip(&around) {
            assert_summed(r);
            // The framework's passes, then the marks' read-back copy (the frame's too).
            assert_eq!(names(r), ["shadow", "main pass", "busy", "copy_buffer_to_buffer"], "named by label, else by pipeline");
            for (a, mark) in r.activities.iter().zip(around) {
                let d = a.interval.duration_ns() as f64;
                assert!(d > 0.0, "{a:?}");
                // One tick of slack each side: the marks are rounded as the pass's writes are.
                let tick = f64::from(gpu.queue.get_timestamp_period());
                assert!(d <= mark + 2.0 * tick, "{} took {d} ns, more than the marks around it ({mark})", a.name);
                // The figures docs/wgpu.md quotes: each pass against the marks around it.
                println!("PASS {}: {d:.0} ns; write_timestamp marks around it {mark:.0} ns", a.name);
            }
            let g = gpu_of(r);
            println!("FRAME busy {} ns (sum of passes), interval {} ns", g.busy_ns, g.interval.duration_ns());
        }
        assert!(capture.records().iter().all(|r| !r.site.desc.name.starts_with("unattributed")), "all attributed");
    }
}

/// Stands for vello: a call given the device and queue that makes its own encoder and submits
/// inside.
mod vello_like {
    use super::wgpu;

    pub struct Renderer {
        pub target: wgpu::Texture,
    }

    impl Renderer {
        pub fn new(device: &wgpu::Device) -> Renderer {
            let target = device.create_texture(&wgpu::TextureDescriptor {
                label: Some("target"),
                size: wgpu::Extent3d { width: 256, height: 256, depth_or_array_layers: 1 },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rgba8Unorm,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
                view_formats: &[],
            });
            Renderer { target }
        }

        pub fn render_to_texture(&self, device: &wgpu::Device, queue: &wgpu::Queue) {
            let view = self.target.create_view(&Default::default());
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let _pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                    label: Some("fine"),
                    color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                        view: &view,
                        depth_slice: None,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            load: wgpu::LoadOp::Clear(wgpu::Color::BLUE),
                            store: wgpu::StoreOp::Store,
                        },
                    })],
                    ..Default::default()
                });
            }
            queue.submit([encoder.finish()]);
        }
    }
}

/// The user's call around the library: a bare annotation, no wgpu argument at all.
#[gpu_kernel(trace_all)]
fn draw_scene(renderer: &vello_like::Renderer, gpu: &Gpu) {
    renderer.render_to_texture(&gpu.device, &gpu.queue);
}

rusty_fork_test! {
    #[test]
    fn a_vello_like_library_call_is_timed_by_the_pass_the_library_began() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        let capture = Capture::start();
        let renderer = vello_like::Renderer::new(&gpu.device);
        for _ in 0..3 {
            draw_scene(&renderer, &gpu);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let scenes = capture.of("draw_scene");
        assert_eq!(scenes.len(), 3);
        for r in &scenes {
            assert_summed(r);
            assert_eq!(names(r), ["fine"]);
            let g = gpu_of(r);
            assert!(g.interval.start_ns + g.clock_error_ns >= r.host.start_ns, "after the call began: {r:?}");
        }
    }
}

/// Stands for cubecl/burn: a device thread that encodes and submits for callers, on closures
/// sent through a channel. It never enters the caller's span.
mod cubecl_like {
    use super::{wgpu, Gpu};
    use std::sync::{mpsc, Arc};

    pub type Job = Box<dyn FnOnce(&Gpu) + Send>;

    pub fn spawn(gpu: Arc<Gpu>, span: bool) -> mpsc::Sender<(Job, mpsc::Sender<()>)> {
        let (tx, rx) = mpsc::channel::<(Job, mpsc::Sender<()>)>();
        std::thread::spawn(move || {
            for (job, done) in rx {
                let entered = span.then(|| tracing::info_span!("device_step").entered());
                job(&gpu);
                drop(entered);
                let _ = done.send(());
            }
        });
        tx
    }

    pub fn matmul(gpu: &Gpu) {
        let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("cubecl") });
        {
            let mut pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("matmul"), timestamp_writes: None });
            pass.set_pipeline(&gpu.pipeline);
            pass.set_bind_group(0, &gpu.bind_group, &[]);
            pass.dispatch_workgroups(gpu.elements.div_ceil(64), 1, 1);
        }
        gpu.queue.submit([encoder.finish()]);
    }
}

#[gpu_kernel(trace_all)]
fn forward(device: &mpsc::Sender<(cubecl_like::Job, mpsc::Sender<()>)>) {
    let (done, wait) = mpsc::channel();
    device.send((Box::new(cubecl_like::matmul), done)).unwrap();
    wait.recv().unwrap();
}

rusty_fork_test! {
    #[test]
    fn a_cubecl_like_device_thread_outside_every_span_lists_its_pass_as_unattributed_by_label() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 14, 64) else { return };
        let gpu = Arc::new(gpu);
        let capture = Capture::start_all_threads();
        let device = cubecl_like::spawn(gpu.clone(), false);
        for _ in 0..2 {
            forward(&device);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let calls = capture.of("forward");
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|r| r.activities.is_empty()), "the caller's thread began no pass: {calls:?}");
        let passes = capture.of("unattributed: matmul");
        assert_eq!(passes.len(), 2, "each pass is a record of its own, named by its label");
        for r in &passes {
            let g = gpu_of(r);
            assert_eq!(g.source, TimingSource::GpuTimestamp);
            assert!(!g.bracketed && g.busy_ns > 0, "{g:?}");
            assert_eq!(names(r), ["matmul"]);
        }
    }

    #[test]
    fn a_device_thread_entering_a_selected_span_gets_its_pass_under_that_span() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with("[device_step]"));
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber per process (rusty-fork)");
        let Some(gpu) = Gpu::instrumented_for_test(1 << 14, 64) else { return };
        let gpu = Arc::new(gpu);
        let capture = Capture::start_all_threads();
        let device = cubecl_like::spawn(gpu.clone(), true);
        for _ in 0..2 {
            forward(&device);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let steps = capture.of("device_step");
        assert_eq!(steps.len(), 2, "one record per span instance");
        for r in &steps {
            assert!(r.site.is_span());
            assert_summed(r);
            assert_eq!(names(r), ["matmul"]);
        }
        assert!(capture.of("unattributed: matmul").is_empty(), "attributed to the span, not unattributed");
    }
}

/// The caller's step in a span the program did not select, waiting for the device thread.
fn unselected_step(device: &mpsc::Sender<(cubecl_like::Job, mpsc::Sender<()>)>) {
    let _span = tracing::info_span!("unselected_step").entered();
    let (done, wait) = mpsc::channel();
    device.send((Box::new(cubecl_like::matmul), done)).unwrap();
    wait.recv().unwrap();
}

fn attr(r: &Record, key: &str) -> Option<gpuspan_testing::record::Value> {
    r.attributes().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

rusty_fork_test! {
    /// Two callers on two threads each inside their own selected span at once, one device thread
    /// doing the work: whose the pass is cannot be known from time, so it is not guessed
    /// (decision 55). It is a `during several spans` record naming both, GPU-timed.
    #[test]
    fn two_callers_at_once_get_their_device_threads_pass_listed_during_several_spans() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with("[forward_pass]"));
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber per process (rusty-fork)");
        let Some(gpu) = Gpu::instrumented_for_test(1 << 14, 64) else { return };
        let gpu = Arc::new(gpu);
        let capture = Capture::start_all_threads();
        let device = cubecl_like::spawn(gpu.clone(), false);
        // Both spans are entered before the work is sent, and left after it ran.
        let both_in = Arc::new(std::sync::Barrier::new(2));
        let work_done = Arc::new(std::sync::Barrier::new(2));
        let callers: Vec<_> = [true, false]
            .into_iter()
            .map(|sends| {
                let (device, both_in, work_done) = (device.clone(), both_in.clone(), work_done.clone());
                std::thread::spawn(move || {
                    let _span = tracing::info_span!("forward_pass").entered();
                    both_in.wait();
                    if sends {
                        let (done, wait) = mpsc::channel();
                        device.send((Box::new(cubecl_like::matmul), done)).unwrap();
                        wait.recv().unwrap();
                    }
                    work_done.wait();
                })
            })
            .collect();
        callers.into_iter().for_each(|c| c.join().unwrap());
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let several = capture.of("during several spans");
        assert_eq!(several.len(), 1, "{several:?}");
        let r = &several[0];
        assert_eq!(r.attributed, Some(gpuspan::Attributed::Ambiguous));
        assert_eq!(attr(r, "gpuspan.during_spans"), Some(gpuspan_testing::record::Value::Str("forward_pass ×2".into())));
        let g = gpu_of(r);
        assert!(g.source == TimingSource::GpuTimestamp && !g.bracketed && g.busy_ns > 0, "{g:?}");
        assert_eq!(names(r), ["matmul"]);
        for step in capture.of("forward_pass") {
            assert!(step.activities.is_empty(), "neither span got the pass: {step:?}");
        }
        assert!(capture.of("unattributed: matmul").is_empty());
    }
}

rusty_fork_test! {
    /// Nothing is selected yet (the layer is in, `GPUSPAN_SPANS` unset): a device thread's passes
    /// are unattributed, and from the first of them on, each names the span the caller had
    /// entered when it began, in the records and the capture, so the user learns what to select.
    #[test]
    fn unowned_passes_name_the_unselected_span_entered_when_they_began() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer());
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber per process (rusty-fork)");
        let Some(gpu) = Gpu::instrumented_for_test(1 << 14, 64) else { return };
        let gpu = Arc::new(gpu);
        let (guard, out) = labels_common::Outputs::start("unowned-named");
        let capture = Capture::start_all_threads();
        let device = cubecl_like::spawn(gpu.clone(), false);
        for _ in 0..3 {
            unselected_step(&device);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let summary = gpuspan::summary();
        drop(guard);
        let passes = capture.of("unattributed: matmul");
        assert_eq!(passes.len(), 3, "{passes:?}");
        let named: Vec<_> = passes.iter().map(|r| attr(r, "gpuspan.open_span")).collect();
        // The first unowned pass starts the census: spans made after it are followed.
        let step = Some(gpuspan_testing::record::Value::Str("unselected_step".into()));
        assert_eq!(named.iter().filter(|n| n.is_none()).count(), 1, "the census starts at the first: {named:?}");
        assert_eq!(named.iter().filter(|n| **n == step).count(), 2, "{named:?}");
        assert!(capture.of("unselected_step").is_empty(), "naming selects nothing");
        assert!(
            summary.notes.iter().any(|n| n.contains("unselected_step (2)") && n.contains("GPUSPAN_SPANS='[unselected_step]'")),
            "the summary says what to select: {:?}",
            summary.notes
        );
        let file = gpuspan_capture::Capture::open(&out.capture).expect("the capture reads");
        let at_launch: Vec<_> = file.records.iter().filter_map(|r| r.spans_at_launch.as_deref()).collect();
        assert_eq!(at_launch, ["unselected_step", "unselected_step"], "the capture keeps the names");
        let report = gpuspan_cli::report::build(&file);
        assert!(
            report.findings.iter().any(|f| f.kind == "unowned_work" && f.message.contains("unselected_step (2)")),
            "gpuspan report says it too: {:?}",
            report.findings
        );
    }
}

/// The caller's step under a selected span, waiting for the device thread (which never enters
/// it) to run its pass: burn's shape.
fn forward_pass(device: &mpsc::Sender<(cubecl_like::Job, mpsc::Sender<()>)>) {
    let _span = tracing::info_span!("forward_pass").entered();
    let (done, wait) = mpsc::channel();
    device.send((Box::new(cubecl_like::matmul), done)).unwrap();
    wait.recv().unwrap();
}

rusty_fork_test! {
    #[test]
    fn a_device_thread_that_never_enters_the_callers_span_gets_its_pass_under_it_by_time() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer_with("[forward_pass]"));
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber per process (rusty-fork)");
        let Some(gpu) = Gpu::instrumented_for_test(1 << 14, 64) else { return };
        let gpu = Arc::new(gpu);
        let capture = Capture::start_all_threads();
        let device = cubecl_like::spawn(gpu.clone(), false);
        for _ in 0..2 {
            forward_pass(&device);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let steps = capture.of("forward_pass");
        assert_eq!(steps.len(), 2, "one record per span instance");
        for r in &steps {
            assert_summed(r);
            assert_eq!(names(r), ["matmul"], "the device thread's pass, by time");
            assert_eq!(r.attributed, Some(gpuspan::Attributed::Time), "{r:?}");
        }
        assert!(capture.of("unattributed: matmul").is_empty(), "attributed by time, not unattributed");
    }
}

/// A pass the program gave its own timestamp writes.
#[gpu_kernel(trace_all)]
fn measured(gpu: &Gpu, reference: &RawTimer) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, Some(&reference.query_set));
    reference.resolve(&mut encoder);
    gpu.queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn a_pass_with_its_own_timestamp_writes_keeps_them_and_is_read_from_them() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 16, 256) else { return };
        let capture = Capture::start();
        let reference = RawTimer::new(&gpu.device);
        let mut raw = Vec::new();
        for _ in 0..3 {
            measured(&gpu, &reference);
            raw.push(reference.read_ns(&gpu));
        }
        assert!(gpuspan::flush(), "every pass resolved");
        let mut calls = capture.of("measured");
        calls.sort_by_key(|r| r.host.start_ns);
        assert_eq!(calls.len(), 3);
        for (r, raw) in calls.iter().zip(&raw) {
            assert_summed(r);
            let d = activity(r, "busy").interval.duration_ns() as f64;
            // The same two ticks: only the conversion to nanoseconds is rounded.
            assert!(d >= raw * 0.99 && d <= raw * 1.01 + 1.0, "read from the pass's own writes: {d} vs {raw}");
        }
    }
}

const TRIANGLE: &str = r#"
@vertex
fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let x = f32(i32(i) - 1);
    let y = f32(i32(i & 1u) * 2 - 1);
    return vec4<f32>(x, y, 0.0, 1.0);
}

@fragment
fn fs() -> @location(0) vec4<f32> {
    return vec4<f32>(1.0, 0.0, 0.0, 1.0);
}
"#;

/// The format the triangle tests draw in.
const TARGET_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;
const TARGET_SIZE: wgpu::Extent3d = wgpu::Extent3d { width: 64, height: 64, depth_or_array_layers: 1 };

/// A pipeline drawing [`TRIANGLE`] into a [`TARGET_FORMAT`] target.
fn triangle_pipeline(device: &wgpu::Device) -> wgpu::RenderPipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("triangle"),
        source: wgpu::ShaderSource::Wgsl(TRIANGLE.into()),
    });
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("triangle"),
        layout: None,
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[],
        },
        primitive: Default::default(),
        depth_stencil: None,
        multisample: Default::default(),
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs"),
            compilation_options: Default::default(),
            targets: &[Some(TARGET_FORMAT.into())],
        }),
        multiview_mask: None,
        cache: None,
    })
}

/// A [`TARGET_SIZE`] texture to draw into and read back.
fn target_texture(device: &wgpu::Device, label: &str) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: Some(label),
        size: TARGET_SIZE,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: TARGET_FORMAT,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    })
}

/// The centre pixel of `texture`, read back through `device` and `queue`.
fn centre_pixel(device: &wgpu::Device, queue: &wgpu::Queue, texture: &wgpu::Texture) -> Vec<u8> {
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("pixels"),
        size: 256 * 64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &read,
            layout: wgpu::TexelCopyBufferLayout { offset: 0, bytes_per_row: Some(256), rows_per_image: None },
        },
        TARGET_SIZE,
    );
    queue.submit([encoder.finish()]);
    let slice = read.slice(..);
    slice.map_async(wgpu::MapMode::Read, |r| r.expect("map pixels"));
    device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    gpuspan_tests::mapped(&slice)[32 * 256 + 32 * 4..32 * 256 + 32 * 4 + 4].to_vec()
}

/// A render pass that executes a render bundle recorded through the instrumented device.
#[gpu_kernel(trace_all)]
fn bundled(gpu: &Gpu, view: &wgpu::TextureView, bundle: &wgpu::RenderBundle) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("bundled"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations { load: wgpu::LoadOp::Clear(wgpu::Color::BLACK), store: wgpu::StoreOp::Store },
            })],
            ..Default::default()
        });
        pass.execute_bundles([bundle]);
    }
    gpu.queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    // wgpu 29's `RenderBundleEncoder::finish` is not implemented for a custom backend (it panics):
    // on wgpu 29 the test is ignored, said as such, rather than passing without running.
    #[cfg_attr(not(feature = "wgpu-30"), ignore = "render bundles on an instrumented device need wgpu 30")]
    fn render_bundles_run_inside_their_timed_pass_and_draw() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        let capture = Capture::start();
        let device = &gpu.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let format = TARGET_FORMAT;
        let pipeline = triangle_pipeline(device);
        let mut bundle_encoder = device.create_render_bundle_encoder(&wgpu::RenderBundleEncoderDescriptor {
            label: Some("triangle bundle"),
            color_formats: &[Some(format)],
            depth_stencil: None,
            sample_count: 1,
            multiview: None,
        });
        bundle_encoder.set_pipeline(&pipeline);
        bundle_encoder.draw(0..3, 0..1);
        let bundle = bundle_encoder.finish(&wgpu::RenderBundleDescriptor { label: Some("triangle bundle") });
        let texture = target_texture(device, "target");
        let view = texture.create_view(&Default::default());
        bundled(&gpu, &view, &bundle);
        // The bundle drew: the centre pixel is the triangle's red.
        let pixel = centre_pixel(device, &gpu.queue, &texture);
        assert_eq!(pixel, [255, 0, 0, 255], "the bundle's triangle was drawn");
        assert!(pollster::block_on(scope.pop()).is_none(), "no validation error on the instrumented device");
        assert!(gpuspan::flush(), "every pass resolved");
        let calls = capture.of("bundled");
        assert_eq!(calls.len(), 1);
        assert_summed(&calls[0]);
        assert_eq!(names(&calls[0]), ["bundled"]);
    }
}

/// A windowed program's frame: its surface is configured with the real device (wgpu's surface
/// calls the core device), so the frame's texture is the real device's, and the frame's passes,
/// encoded on the instrumented device, draw into a view of it. Headless here: a texture the real
/// device makes as a surface's is made (`RENDER_ATTACHMENT | COPY_SRC`) stands for
/// `get_current_texture()`.
#[gpu_kernel(trace_all)]
fn surface_frame(gpu: &Gpu, frame: &wgpu::TextureView, pipeline: &wgpu::RenderPipeline) {
    let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("frame") });
    {
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("to the surface"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: frame,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations { load: wgpu::LoadOp::Clear(wgpu::Color::BLACK), store: wgpu::StoreOp::Store },
            })],
            ..Default::default()
        });
        pass.set_pipeline(pipeline);
        pass.draw(0..3, 0..1);
    }
    gpu.queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn a_frame_drawn_into_the_real_devices_texture_as_a_surfaces_is_timed_and_drawn() {
        let Some((gpu, real, real_queue)) = Gpu::instrumented_keeping_real(1 << 10, 1) else { return };
        let capture = Capture::start();
        let pipeline = triangle_pipeline(&gpu.device);
        let surface_texture = target_texture(&real, "surface texture");
        let view = surface_texture.create_view(&Default::default());
        for _ in 0..3 {
            surface_frame(&gpu, &view, &pipeline);
        }
        // What the frame drew, read on the real device (as the compositor would see it).
        let pixel = centre_pixel(&real, &real_queue, &surface_texture);
        assert_eq!(pixel, [255, 0, 0, 255], "the frame's triangle was drawn into the surface's texture");
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let frames = capture.of("surface_frame");
        assert_eq!(frames.len(), 3);
        for r in &frames {
            assert_summed(r);
            assert_eq!(names(r), ["to the surface"]);
        }
    }
}

/// A future that is pending once (waking itself) before it is ready: a real suspension of the
/// async function awaiting it, as a read-back or a channel would be.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

fn labelled_pass(gpu: &Gpu, label: &'static str) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
        pass.set_pipeline(&gpu.pipeline);
        pass.set_bind_group(0, &gpu.bind_group, &[]);
        pass.dispatch_workgroups(gpu.elements.div_ceil(64), 1, 1);
    }
    gpu.queue.submit([encoder.finish()]);
}

/// An async step with passes on both sides of its `.await`s: a framework's async API (a
/// read-back, a channel) between two dispatches.
#[gpu_kernel(trace_all)]
async fn async_step(gpu: &Gpu) {
    labelled_pass(gpu, "before await");
    YieldOnce(false).await;
    labelled_pass(gpu, "after await");
    YieldOnce(false).await;
    labelled_pass(gpu, "after second await");
}

/// The same with no pass before its first `.await`.
#[gpu_kernel(trace_all)]
async fn async_late(gpu: &Gpu) {
    YieldOnce(false).await;
    labelled_pass(gpu, "late");
    tokio::task::yield_now().await;
    labelled_pass(gpu, "later");
}

rusty_fork_test! {
    #[test]
    fn an_async_call_sums_the_passes_it_begins_after_each_await() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 12, 16) else { return };
        let capture = Capture::start();
        pollster::block_on(async_step(&gpu));
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let calls = capture.of("async_step");
        assert_eq!(calls.len(), 1);
        assert_summed(&calls[0]);
        assert_eq!(names(&calls[0]), ["before await", "after await", "after second await"], "none dropped");
        assert!(capture.records().iter().all(|r| !r.site.desc.name.starts_with("unattributed")), "all attributed");
    }

    #[test]
    fn an_async_call_polled_on_tokio_worker_threads_sums_its_passes() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 12, 16) else { return };
        let gpu = Arc::new(gpu);
        let capture = Capture::start_all_threads();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("tokio runtime");
        let g = gpu.clone();
        runtime.block_on(async move {
            tokio::spawn(async move {
                async_late(&g).await;
                async_step(&g).await;
            })
            .await
            .expect("task");
        });
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let late = capture.of("async_late");
        assert_eq!(late.len(), 1);
        assert_summed(&late[0]);
        assert_eq!(names(&late[0]), ["late", "later"]);
        let step = capture.of("async_step");
        assert_eq!(step.len(), 1);
        assert_summed(&step[0]);
        assert_eq!(names(&step[0]), ["before await", "after await", "after second await"]);
        assert!(capture.records().iter().all(|r| !r.site.desc.name.starts_with("unattributed")), "all attributed");
    }
}

/// What the copy tests copy between: two buffers of [`COPY_BYTES`] and two 256×256 RGBA
/// textures (256 KiB each).
struct Copies {
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
    texture: wgpu::Texture,
    texture2: wgpu::Texture,
}

const COPY_BYTES: u64 = 4 << 20;
const SIDE: u32 = 256;
const TEXTURE_BYTES: u64 = (SIDE * SIDE * 4) as u64;

impl Copies {
    fn new(device: &wgpu::Device) -> Copies {
        let buffer = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: COPY_BYTES,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let texture = |label| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: wgpu::Extent3d { width: SIDE, height: SIDE, depth_or_array_layers: 1 },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rgba8Unorm,
                usage: wgpu::TextureUsages::COPY_SRC | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            })
        };
        Copies { src: buffer("src"), dst: buffer("dst"), texture: texture("texture"), texture2: texture("texture2") }
    }

    fn rows<'b>(buffer: &'b wgpu::Buffer) -> wgpu::TexelCopyBufferInfo<'b> {
        wgpu::TexelCopyBufferInfo {
            buffer,
            layout: wgpu::TexelCopyBufferLayout { offset: 0, bytes_per_row: Some(SIDE * 4), rows_per_image: None },
        }
    }
}

const EXTENT: wgpu::Extent3d = wgpu::Extent3d { width: SIDE, height: SIDE, depth_or_array_layers: 1 };

/// Every copy command and a clear, each between `write_timestamp` marks of the test's own.
fn record_copies(gpu: &Gpu, c: &Copies, marks: &Marks) {
    let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("copies") });
    let e = &mut encoder;
    let steps: [&dyn Fn(&mut wgpu::CommandEncoder); 5] = [
        &|e| e.copy_buffer_to_buffer(&c.src, 0, &c.dst, 0, Some(COPY_BYTES)),
        &|e| e.clear_buffer(&c.dst, 0, None),
        &|e| e.copy_buffer_to_texture(Copies::rows(&c.src), c.texture.as_image_copy(), EXTENT),
        &|e| e.copy_texture_to_buffer(c.texture.as_image_copy(), Copies::rows(&c.dst), EXTENT),
        &|e| e.copy_texture_to_texture(c.texture.as_image_copy(), c.texture2.as_image_copy(), EXTENT),
    ];
    for (i, step) in steps.iter().enumerate() {
        marks.before(e, i as u32);
        step(e);
        marks.after(e, i as u32);
    }
    marks.resolve(e);
    gpu.queue.submit([encoder.finish()]);
}

const COPY_NAMES: [&str; 5] = [
    "copy_buffer_to_buffer",
    "clear_buffer",
    "copy_buffer_to_texture",
    "copy_texture_to_buffer",
    "copy_texture_to_texture",
];
const COPY_SIZES: [u64; 5] = [COPY_BYTES, COPY_BYTES, TEXTURE_BYTES, TEXTURE_BYTES, TEXTURE_BYTES];

/// A framework's upload step: copies and a clear in its own encoder, then a `write_buffer`.
#[gpu_kernel(trace_all)]
fn upload_step(gpu: &Gpu, c: &Copies, marks: &Marks) {
    record_copies(gpu, c, marks);
    gpu.queue.write_buffer(&c.src, 0, &[1u8; 4096]);
}

/// The same copy outside every call and span.
fn loose_copy(gpu: &Gpu, c: &Copies) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&c.src, 0, &c.dst, 0, Some(COPY_BYTES));
    gpu.queue.submit([encoder.finish()]);
}

fn copy_bytes(a: &Activity) -> u64 {
    match a.kind {
        gpuspan_testing::record::ActivityKind::Copy { bytes, .. }
        | gpuspan_testing::record::ActivityKind::Set { bytes } => bytes,
        _ => panic!("{} is not a copy: {a:?}", a.name),
    }
}

rusty_fork_test! {
    #[test]
    fn copies_and_clears_are_timed_apart_with_their_bytes_and_an_exact_bandwidth() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        if !in_encoders(&gpu) {
            eprintln!("skipped: copies are timed only with TIMESTAMP_QUERY_INSIDE_ENCODERS");
            return;
        }
        let capture = Capture::start_all_threads();
        let c = Copies::new(&gpu.device);
        let marks = Marks::new(&gpu.device, 5);
        upload_step(&gpu, &c, &marks);
        let around = marks.read_ns(&gpu);
        loose_copy(&gpu, &c);
        gpu.wait();
        assert!(gpuspan::flush(), "every copy resolved");
        let steps = capture.of("upload_step");
        assert_eq!(steps.len(), 1);
        let r = &steps[0];
        assert_summed(r);
        // The sixth: the marks' own read-back copy (10 timestamps of 8 bytes), in the same call.
        assert_eq!(names(r)[..5], COPY_NAMES, "each copy an activity, in order, named by its command");
        assert_eq!(names(r)[5], "copy_buffer_to_buffer");
        assert_eq!(copy_bytes(&r.activities[5]), 80);
        let tick = f64::from(gpu.queue.get_timestamp_period());
        for ((a, bytes), mark) in r.activities.iter().zip(COPY_SIZES).zip(&around) {
            assert_eq!(copy_bytes(a), bytes, "{}'s bytes", a.name);
            let d = a.interval.duration_ns() as f64;
            assert!(d <= mark + 2.0 * tick, "{} took {d} ns, more than the marks around it ({mark})", a.name);
            println!("COPY {}: {bytes} B in {d:.0} ns; marks around it {mark:.0} ns", a.name);
        }
        assert!(r.activities[0].interval.duration_ns() > 0, "a 4 MiB copy takes time: {:?}", r.activities[0]);
        assert_eq!(r.bytes, None, "the call is a kernel site: its copies carry their bytes");
        let loose = capture.of("unattributed: copy_buffer_to_buffer");
        assert_eq!(loose.len(), 1, "a copy outside every scope is a transfer record of its own");
        let l = &loose[0];
        assert_eq!(l.site.desc.kind, gpuspan::SiteKind::Transfer);
        assert_eq!(l.bytes, Some(COPY_BYTES));
        let g = gpu_of(l);
        assert_eq!(g.source, TimingSource::GpuTimestamp);
        assert!(!g.bracketed && g.interval.duration_ns() > 0, "{g:?}");
        let bw = l.bandwidth_bytes_per_s().expect("an exact copy has a bandwidth");
        assert!((bw - COPY_BYTES as f64 * 1e9 / g.interval.duration_ns() as f64).abs() < 1.0, "from its own two timestamps");
        let summary = gpuspan::summary().to_string();
        assert!(
            summary.contains("transfers without a GPU time (bytes only): write_buffer 1×"),
            "write_buffer counted, bytes only:\n{summary}"
        );
    }

    #[test]
    fn copies_label_alike_in_summary_timeline_capture_and_report() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        if !in_encoders(&gpu) {
            return;
        }
        let (guard, out) = labels_common::Outputs::start("instrumented-copies");
        let c = Copies::new(&gpu.device);
        let marks = Marks::new(&gpu.device, 5);
        for _ in 0..2 {
            upload_step(&gpu, &c, &marks);
            loose_copy(&gpu, &c);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every copy resolved");
        let summary = gpuspan::summary();
        drop(guard);
        let labels =
            labels_common::agree(&summary, &out.capture, &out.timeline, &["upload_step", "unattributed: copy_buffer_to_buffer"]);
        assert_eq!(labels[0], ("upload_step".into(), "wgpu (bare)".into(), false, false), "{labels:?}");
        assert!(!labels[1].2, "exact, not a bound");
        assert!(labels[1].3, "an unattributed copy has its exact bandwidth: {labels:?}");
    }
}

/// A model's weights, loaded in an annotated call that tracks memory: a buffer and a texture
/// with mips and layers.
#[gpu_kernel(trace_all, track_memory)]
fn load_weights(gpu: &Gpu) -> (wgpu::Buffer, wgpu::Texture) {
    let weights = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("weights"),
        size: 1 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let atlas = gpu.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("atlas"),
        size: wgpu::Extent3d { width: 64, height: 64, depth_or_array_layers: 2 },
        mip_level_count: 3,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::TEXTURE_BINDING,
        view_formats: &[],
    });
    (weights, atlas)
}

/// The atlas's logical size: (64² + 32² + 16²) texels × 4 bytes × 2 layers.
const ATLAS_BYTES: u64 = (64 * 64 + 32 * 32 + 16 * 16) * 4 * 2;

/// A decoding step under a span (no annotation): its scratch buffer lives only inside it.
fn decode(gpu: &Gpu) {
    let _span = tracing::info_span!("decode").entered();
    let cache = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("kv cache"),
        size: 4 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    drop(cache);
}

rusty_fork_test! {
    #[test]
    fn buffers_and_textures_give_live_bytes_by_label_and_owner_and_a_peak_with_its_holder() {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(gpuspan::layer_with("[decode]")))
            .expect("one subscriber per process (rusty-fork)");
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        let (guard, out) = labels_common::Outputs::start("instrumented-memory");
        let (weights, atlas) = load_weights(&gpu);
        decode(&gpu);
        let held = (1 << 20) + ATLAS_BYTES;
        gpu.wait();
        assert!(gpuspan::flush());
        let summary = gpuspan::summary().to_string();
        drop(guard);
        let line = summary.lines().find(|l| l.contains("instrumented: GPU memory")).unwrap_or_else(|| panic!("{summary}"));
        // The Gpu helper's own buffer (`data`, 4 KiB) and the two loaded objects are live; the
        // peak held the decode span's cache too.
        assert!(line.contains("live 1.0 MiB in 3 buffers and textures"), "{line}");
        assert!(line.contains("peak 5.0 MiB, held by `kv cache` 4.0 MiB, `weights` 1.0 MiB, `atlas` 42.0 KiB"), "{line}");
        assert!(line.contains("(owners: `decode` 4.0 MiB, `load_weights` 1.0 MiB"), "{line}");
        let by = summary.lines().find(|l| l.contains("live by label:")).unwrap_or_else(|| panic!("{summary}"));
        assert!(by.contains("`weights` 1.0 MiB, `atlas` 42.0 KiB, `data` 4.0 KiB"), "{by}");
        assert!(!by.contains("kv cache") && !by.contains("`decode`"), "dropped: {by}");
        // The timeline's counter track: every change, up to the peak and back down.
        let timeline: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&out.timeline).expect("timeline")).expect("JSON");
        let values: Vec<u64> = timeline["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"].as_str().is_some_and(|n| n.starts_with("GPU memory")))
            .map(|e| e["args"]["bytes"].as_u64().expect("bytes"))
            .collect();
        let data = 4096u64; // the helper's buffer, made first
        assert_eq!(values[values.len() - 4..], [data + (1 << 20), data + held, data + held + (4 << 20), data + held]);

        // The capture holds the same account (format 9), and the CLI states it alike.
        let capture = gpuspan_capture::Capture::open(&out.capture).expect("the capture reads");
        assert_eq!(capture.memory.len(), 1, "one instrumented device allocated");
        let m = &capture.memory[0];
        assert_eq!((m.peak_bytes, m.live_bytes, m.live_objects), (data + held + (4 << 20), data + held, 3));
        let named = |h: &[gpuspan_capture::Held]| h.iter().map(|h| (h.name.clone(), h.bytes)).collect::<Vec<_>>();
        let pairs = |v: &[(&str, u64)]| v.iter().map(|(n, b)| (n.to_string(), *b)).collect::<Vec<_>>();
        assert_eq!(named(&m.peak_by_label), pairs(&[("kv cache", 4 << 20), ("weights", 1 << 20), ("atlas", ATLAS_BYTES)]));
        assert_eq!(named(&m.peak_by_owner)[..2], pairs(&[("decode", 4 << 20), ("load_weights", held)]));
        assert_eq!(named(&m.live_by_label), pairs(&[("weights", 1 << 20), ("atlas", ATLAS_BYTES), ("data", data)]));
        assert!(!m.live_by_owner.iter().any(|h| h.name == "decode"), "the span's cache was dropped");
        assert_eq!((m.not_sized, m.samples_dropped), (0, 0));
        let samples: Vec<u64> = m.samples.iter().map(|s| s.bytes).collect();
        assert_eq!(samples, values, "the capture's samples are the runtime timeline's counter");
        let peak_sample = m.samples.iter().find(|s| s.bytes == m.peak_bytes).expect("the peak is a sample");
        assert_eq!(m.peak_ns, peak_sample.time_ns, "the peak's time is its change's");
        let device = capture.device(m.device).expect("the account names a described device");
        let track = gpuspan_capture::MemoryAccount::track_name(device.id);
        assert!(timeline.to_string().contains(&track), "the runtime's track is named {track}");

        // `gpuspan report`: the same figures as the summary's line, in the same units.
        let report = gpuspan_cli::report::build(&capture);
        let row = &report.memory[0];
        assert_eq!((row.peak_bytes, row.end_bytes, row.end_objects), (m.peak_bytes, m.live_bytes, 3));
        let text = report.to_text();
        let section = text.split("\nGPU memory (wgpu, logical sizes").nth(1).unwrap_or_else(|| panic!("{text}"));
        for figure in ["5.0 MiB", "kv cache 4.0 MiB, weights 1.0 MiB, atlas 42.0 KiB", "decode 4.0 MiB, load_weights 1.0 MiB"] {
            assert!(line.replace('`', "").contains(figure), "summary: {figure} in {line}");
            assert!(section.contains(figure), "report: {figure} in {section}");
        }
        // `gpuspan timeline`: the same track with the same values.
        let mut cli_timeline = Vec::new();
        gpuspan_cli::perfetto::write_as(gpuspan_cli::perfetto::Format::Json, &[("run", &capture)], &mut cli_timeline)
            .expect("timeline");
        let cli_timeline: serde_json::Value = serde_json::from_slice(&cli_timeline).expect("JSON");
        let cli_values: Vec<u64> = cli_timeline["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == track.as_str())
            .map(|e| e["args"]["bytes"].as_u64().expect("bytes"))
            .collect();
        assert_eq!(cli_values, values, "gpuspan timeline draws the runtime's counter");
        // `gpuspan export`: the same figures in its tables.
        let db = out.dir.join("run.sqlite");
        gpuspan_cli::export::export(&out.capture, gpuspan_cli::export::To::Sqlite, &db, false, false).expect("export");
        let db = rusqlite::Connection::open(&db).expect("the export opens");
        let exported: (u64, u64, u64) = db
            .query_row("SELECT peak_bytes, end_bytes, end_objects FROM gpu_memory", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .expect("one gpu_memory row");
        assert_eq!(exported, (m.peak_bytes, m.live_bytes, 3));
        let peak_holders: Vec<(String, u64)> = db
            .prepare("SELECT name, bytes FROM gpu_memory_holders WHERE at = 'peak' AND by = 'label' ORDER BY rowid")
            .and_then(|mut q| q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .expect("holders");
        assert_eq!(peak_holders, named(&m.peak_by_label));
        let exported_samples: Vec<u64> = db
            .prepare("SELECT bytes FROM gpu_memory_samples ORDER BY rowid")
            .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
            .expect("samples");
        assert_eq!(exported_samples, values);
        drop((weights, atlas));
    }

    #[test]
    fn track_memory_reads_the_instrumented_devices_count_without_nvml() {
        let Some(gpu) = Gpu::instrumented_for_test(1 << 10, 1) else { return };
        let capture = Capture::start();
        let kept = load_weights(&gpu);
        assert!(gpuspan::flush());
        let calls = capture.of("load_weights");
        assert_eq!(calls.len(), 1);
        let (before, after) = calls[0].memory.expect("track_memory marks");
        let (b, a) = (before.device_used_bytes.expect("counted"), after.device_used_bytes.expect("counted"));
        assert_eq!(a - b, (1 << 20) + ATLAS_BYTES, "the call's buffer and texture, logical sizes");
        drop(kept);
    }
}

#[gpu_kernel(trace_all)]
fn on_a_device_about_to_be_lost(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    /// gpuspan's own commands on a device that is lost under them fail: that is said once, and
    /// never reaches the program's uncaptured-error handler (wgpu's default panics) from
    /// gpuspan's resolver thread. The program's own failing calls still reach it, from its thread.
    #[test]
    fn a_device_lost_under_gpuspans_own_commands_is_said_and_its_errors_stay_gpuspans() {
        let Some(gpu) = Gpu::for_test_with(|all| all, 1 << 10, 1) else { return };
        let errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = errors.clone();
        gpu.device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let thread = std::thread::current().name().unwrap_or("unnamed").to_owned();
            seen.lock().unwrap().push(format!("{thread}: {e}"));
        }));
        let test_thread = std::thread::current().name().unwrap_or("unnamed").to_owned();
        on_a_device_about_to_be_lost(&gpu, &gpu.queue);
        gpu.device.destroy();
        // The program goes on calling: its calls fail (on its thread), and gpuspan's brackets
        // around them give the resolver rounds to submit on the lost device.
        for _ in 0..5 {
            on_a_device_about_to_be_lost(&gpu, &gpu.queue);
            let _ = gpuspan::flush();
        }
        let errors = errors.lock().unwrap().clone();
        let foreign: Vec<&String> = errors.iter().filter(|e| !e.starts_with(&format!("{test_thread}:"))).collect();
        assert!(foreign.is_empty(), "errors of gpuspan's own commands reached the program's handler: {foreign:?}");
    }
}

/// Stands for a framework handed only an instance (bevy's `RenderCreation::Manual` with an
/// instance, a windowed app's setup): it encodes and submits its own labelled pass.
fn framework_simulate(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("framework") });
    {
        let mut pass = encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("simulate"), timestamp_writes: None });
        pass.set_pipeline(&gpu.pipeline);
        pass.set_bind_group(0, &gpu.bind_group, &[]);
        pass.dispatch_workgroups(gpu.elements.div_ceil(64), 1, 1);
    }
    gpu.queue.submit([encoder.finish()]);
}

#[gpu_kernel(trace_all)]
fn simulate_step(gpu: &Gpu) {
    framework_simulate(gpu);
}

rusty_fork_test! {
    #[test]
    fn a_device_from_an_instrumented_instance_times_every_pass_of_a_framework() {
        let Some(gpu) = Gpu::from_instrumented_instance_for_test(1 << 14, 64) else { return };
        // `instrument` given an adapter and device of the instrumented instance returns the
        // device as it is: instrumenting twice would time each pass twice.
        let (device, queue) = gpuspan::wgpu::instrument(&gpu.adapter, gpu.device.clone(), gpu.queue.clone());
        assert!(device == gpu.device && queue == gpu.queue, "already instrumented: returned as it is");
        let capture = Capture::start();
        for _ in 0..3 {
            simulate_step(&gpu);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let steps = capture.of("simulate_step");
        assert_eq!(steps.len(), 3);
        for r in &steps {
            assert_summed(r);
            assert_eq!(names(r), ["simulate"], "one pass, timed once, named by its label");
            let g = gpu_of(r);
            assert!(g.busy_ns > 0, "{g:?}");
            assert!(g.interval.start_ns + g.clock_error_ns >= r.host.start_ns, "after the call began: {r:?}");
        }
        assert!(capture.records().iter().all(|r| !r.site.desc.name.starts_with("unattributed")), "all attributed");
    }

    #[test]
    fn adapters_enumerated_by_an_instrumented_instance_give_instrumented_devices() {
        let desc = gpuspan_tests::gpu::instance_descriptor();
        let backends = desc.backends;
        let instance = gpuspan::wgpu::instrument_instance(wgpu::Instance::new(desc));
        let adapters = pollster::block_on(instance.enumerate_adapters(backends));
        let Some(adapter) = adapters.first() else {
            assert!(!gpuspan_tests::in_ci(), "no adapter enumerated, and CI=true");
            return eprintln!("skipped: no wgpu adapter on this machine");
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&Default::default())).expect("a device of the enumerated adapter");
        let (same_device, same_queue) = gpuspan::wgpu::instrument(adapter, device.clone(), queue.clone());
        assert!(same_device == device && same_queue == queue, "already instrumented by the adapter");
        // Forwarded to the real instance: its devices are the real ones behind the instrumented.
        instance.poll_all(true);
    }
}

/// A window on a virtual X display (Xvfb), for a real surface without a screen. Xvfb and the
/// window go when it is dropped.
struct XWindow {
    xvfb: std::process::Child,
    connection: x11rb::xcb_ffi::XCBConnection,
    screen: usize,
    window: u32,
}

impl XWindow {
    const SIZE: (u16, u16) = (64, 48);

    /// `None` (skipped, said once) where Xvfb is missing; a failure in CI (scripts/test
    /// installs it).
    fn open() -> Option<XWindow> {
        use std::io::BufRead;
        use x11rb::connection::Connection;
        use x11rb::protocol::xproto::{ConnectionExt, CreateWindowAux, WindowClass};
        // `-displayfd`: Xvfb picks a free display and writes its number once it accepts clients.
        let spawned = std::process::Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "320x240x24", "-nolisten", "tcp"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn();
        let mut xvfb = match (spawned, gpuspan_tests::in_ci()) {
            (Ok(child), _) => child,
            (Err(e), true) => panic!("Xvfb cannot start ({e}), and CI=true: install xvfb (scripts/test does)"),
            (Err(e), false) => {
                eprintln!("skipped: Xvfb cannot start ({e}); set CI=true to make this a failure");
                return None;
            }
        };
        let mut display = String::new();
        std::io::BufReader::new(xvfb.stdout.take().expect("piped")).read_line(&mut display).expect("Xvfb's display");
        let display = std::ffi::CString::new(format!(":{}", display.trim())).expect("a display name");
        let (connection, screen) =
            x11rb::xcb_ffi::XCBConnection::connect(Some(display.as_c_str())).expect("connect to Xvfb");
        let root = &connection.setup().roots[screen];
        let window = connection.generate_id().expect("a window id");
        let (width, height) = Self::SIZE;
        connection
            .create_window(
                x11rb::COPY_DEPTH_FROM_PARENT,
                window,
                root.root,
                0,
                0,
                width,
                height,
                0,
                WindowClass::INPUT_OUTPUT,
                root.root_visual,
                &CreateWindowAux::new(),
            )
            .expect("create a window");
        connection.map_window(window).expect("map the window");
        connection.flush().expect("flush");
        Some(XWindow { xvfb, connection, screen, window })
    }

    /// The window as wgpu takes it: its XCB connection and window id.
    fn target(&self) -> wgpu::SurfaceTargetUnsafe {
        use wgpu::rwh::{RawDisplayHandle, RawWindowHandle, XcbDisplayHandle, XcbWindowHandle};
        let connection = std::ptr::NonNull::new(self.connection.get_raw_xcb_connection());
        wgpu::SurfaceTargetUnsafe::RawHandle {
            raw_display_handle: Some(RawDisplayHandle::Xcb(XcbDisplayHandle::new(connection, self.screen as i32))),
            raw_window_handle: RawWindowHandle::Xcb(XcbWindowHandle::new(
                std::num::NonZeroU32::new(self.window).expect("X ids are not 0"),
            )),
        }
    }
}

impl Drop for XWindow {
    fn drop(&mut self) {
        let _ = self.xvfb.kill();
        let _ = self.xvfb.wait();
    }
}

/// A windowed framework's frame: it takes the surface's texture, renders into it with its own
/// labelled pass, submits and presents. It never calls gpuspan.
struct Windowed {
    surface: wgpu::Surface<'static>,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl Windowed {
    fn frame(&self) {
        let frame = match self.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(f) | wgpu::CurrentSurfaceTexture::Suboptimal(f) => f,
            other => panic!("no surface texture: {other:?}"),
        };
        let view = frame.texture.create_view(&Default::default());
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let _pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("main pass"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::GREEN),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                ..Default::default()
            });
        }
        self.queue.submit([encoder.finish()]);
        #[cfg(feature = "wgpu-30")]
        self.queue.present(frame);
        #[cfg(not(feature = "wgpu-30"))]
        frame.present();
    }
}

#[gpu_kernel(trace_all)]
fn render_frame(app: &Windowed) {
    app.frame();
}

rusty_fork_test! {
    #[test]
    fn a_window_surface_of_an_instrumented_instance_configures_and_presents_with_its_device() {
        let Some(window) = XWindow::open() else { return };
        let instance = gpuspan::wgpu::instrument_instance(wgpu::Instance::new(gpuspan_tests::gpu::instance_descriptor()));
        // SAFETY: the window and its connection outlive the surface (dropped at the test's end,
        // after `app`).
        let surface = match (unsafe { instance.create_surface_unsafe(window.target()) }, gpuspan_tests::in_ci()) {
            (Ok(s), _) => s,
            (Err(e), true) => panic!("no surface of the X window ({e}), and CI=true"),
            // A driver without X presentation (NVIDIA's Vulkan on Xvfb).
            (Err(e), false) => return eprintln!("skipped: no surface of the X window ({e})"),
        };
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            compatible_surface: Some(&surface),
            ..Default::default()
        }));
        let adapter = match (adapter, gpuspan_tests::in_ci()) {
            (Ok(a), _) => a,
            (Err(e), true) => panic!("no adapter presents to the X window ({e}), and CI=true"),
            (Err(e), false) => return eprintln!("skipped: no adapter presents to the X window ({e})"),
        };
        assert!(adapter.is_surface_supported(&surface));
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_features: gpuspan::wgpu::timestamp_features(&adapter),
            ..Default::default()
        }))
        .expect("a device");
        let (width, height) = XWindow::SIZE;
        let config = surface.get_default_config(&adapter, width.into(), height.into()).expect("the surface is supported");
        // With the instrumented device: wgpu's own surface panics here.
        surface.configure(&device, &config);
        let app = Windowed { surface, device, queue };
        let capture = Capture::start();
        for _ in 0..3 {
            render_frame(&app);
        }
        app.device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
        assert!(gpuspan::flush(), "every pass resolved");
        let frames = capture.of("render_frame");
        assert_eq!(frames.len(), 3);
        for r in &frames {
            assert_summed(r);
            assert_eq!(names(r), ["main pass"], "the frame's pass into the surface texture, timed: {r:?}");
        }
        // A device of another instance cannot configure it: the call is skipped and said once,
        // nothing panics.
        let other = Gpu::new(64, 1).expect("a device of the tests' plain instance");
        app.surface.configure(&other.device, &config);
        let notes = gpuspan::summary().notes;
        assert!(
            notes.iter().any(|n| n.contains("device not made through the instance") && n.contains("left unconfigured")),
            "{notes:?}"
        );
        drop(app);
        drop(window);
    }
}

/// Passes in each encoder of [`two_encoders_at_once`]: two encoders take 300 slot pairs between
/// them, more than two of the device's batches (128 pairs each), a chunk at a time.
const INTERLEAVED_PASSES: u32 = 150;

/// A pass labelled `label` in `encoder`, of one workgroup.
fn small_pass(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder, label: &'static str) {
    let mut pass =
        encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
    pass.set_pipeline(&gpu.pipeline);
    pass.set_bind_group(0, &gpu.bind_group, &[]);
    pass.dispatch_workgroups(1, 1, 1);
}

/// Two encoders recorded at once, a pass in each in turn, so that their slot chunks interleave in
/// the device's batches; labels repeat in runs of three (a frame's repeated labels) and change.
#[gpu_kernel(trace_all)]
fn two_encoders_at_once(gpu: &Gpu) {
    let mut a = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("a") });
    let mut b = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("b") });
    for i in 0..INTERLEAVED_PASSES {
        let run = (i / 3) % 2 == 0;
        small_pass(gpu, &mut a, if run { "a shadow" } else { "a light" });
        small_pass(gpu, &mut b, if run { "b shadow" } else { "b light" });
    }
    gpu.queue.submit([a.finish(), b.finish()]);
}

/// An encoder with passes dropped without being finished (a framework giving up a frame), then
/// one pass submitted: the call is timed by that pass.
#[gpu_kernel(trace_all)]
fn abandoned_frame(gpu: &Gpu) {
    let mut dropped = gpu.device.create_command_encoder(&Default::default());
    for _ in 0..3 {
        small_pass(gpu, &mut dropped, "never submitted");
    }
    drop(dropped);
    let mut kept = gpu.device.create_command_encoder(&Default::default());
    small_pass(gpu, &mut kept, "submitted");
    gpu.queue.submit([kept.finish()]);
}

rusty_fork_test! {
    #[test]
    fn passes_of_two_encoders_recorded_at_once_each_resolve_across_chunks_and_batches() {
        let Some(gpu) = Gpu::instrumented_for_test(64, 1) else { return };
        let capture = Capture::start();
        // Three frames: the device's batches are filled, resolved and used again.
        for _ in 0..3 {
            two_encoders_at_once(&gpu);
            gpu.wait();
        }
        assert!(gpuspan::flush(), "every pass resolved");
        let calls = capture.of("two_encoders_at_once");
        assert_eq!(calls.len(), 3);
        let n = INTERLEAVED_PASSES as usize;
        let runs_of_shadow = (0..INTERLEAVED_PASSES).filter(|i| (i / 3) % 2 == 0).count();
        for call in &calls {
            assert_summed(call);
            assert_eq!(call.activities.len(), 2 * n, "every pass of both encoders: {:?}", names(call));
            assert!(call.activities.iter().all(|a| a.interval.duration_ns() > 0), "each pass its own time");
            let count = |label: &str| names(call).iter().filter(|n| **n == label).count();
            assert_eq!(count("a shadow"), runs_of_shadow);
            assert_eq!(count("a light"), n - runs_of_shadow);
            assert_eq!(count("b shadow"), runs_of_shadow);
            assert_eq!(count("b light"), n - runs_of_shadow);
        }
        assert!(capture.records().iter().all(|r| !r.site.desc.name.starts_with("unattributed")), "all attributed");
    }

    #[test]
    fn an_encoder_dropped_unfinished_gives_its_passes_back() {
        let Some(gpu) = Gpu::instrumented_for_test(64, 1) else { return };
        let capture = Capture::start();
        abandoned_frame(&gpu);
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let calls = capture.of("abandoned_frame");
        assert_eq!(calls.len(), 1, "the call does not wait for passes that never execute");
        assert_summed(&calls[0]);
        assert_eq!(names(&calls[0]), ["submitted"]);
    }

    #[test]
    fn encoders_of_two_passes_one_after_another_each_resolve() {
        let Some(gpu) = Gpu::instrumented_for_test(64, 1) else { return };
        // Unattributed passes are records of their own, made on the resolver thread.
        let capture = Capture::start_all_threads();
        // Each takes a chunk of one pair, then one of two, and gives one back when it finishes:
        // 300 passes through three batches and more.
        for _ in 0..150 {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            small_pass(&gpu, &mut encoder, "pair");
            small_pass(&gpu, &mut encoder, "pair");
            gpu.queue.submit([encoder.finish()]);
        }
        gpu.wait();
        assert!(gpuspan::flush(), "every pass resolved");
        let passes = capture.of("unattributed: pair");
        assert_eq!(passes.len(), 300);
        assert!(passes.iter().all(|r| gpu_of(r).busy_ns > 0), "each pass its own time");
    }
}
