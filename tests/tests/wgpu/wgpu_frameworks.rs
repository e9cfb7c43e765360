//! The shapes of the big wgpu users (issue 27), written like their code, with gpuspan added the
//! way its guide tells a user of each to add it. On a real driver (lavapipe in CI).
//!
//! - **bevy-like**: a render system gets its encoder from a context object the framework owns,
//!   and the framework submits after every system ran. The system attaches the context's encoder:
//!   exact GPU time per system.
//! - **vello-like**: a library call `render(device, queue, ..)` makes its own encoder and submits
//!   inside. The user's function can only be bracketed on the queue: a bound, ending at the
//!   function's exit (the macro cannot see a submission inside the library), with no bandwidth.
//! - **cubecl-like**: a framework given the user's device and queue launches from its own device
//!   thread, on closures the caller sends. The user's call is bracketed on the queue it handed
//!   over: the device thread's submissions fall inside it.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, TimingSource};
use gpuspan_testing::Capture;
use gpuspan_tests::gpu::{Gpu, RawTimer};
use gpuspan_tests::{gpu_timing, wgpu};
use rusty_fork::rusty_fork_test;
use std::sync::Arc;

/// Stands for bevy's renderer: it owns the frame's encoder, hands systems a context, and
/// submits once they all ran.
mod bevy_like {
    use super::wgpu;

    pub struct RenderContext<'w> {
        pub device: &'w wgpu::Device,
        encoder: Option<wgpu::CommandEncoder>,
    }

    impl RenderContext<'_> {
        /// The frame's encoder, made on first use (as bevy's `RenderContext::command_encoder`).
        pub fn command_encoder(&mut self) -> &mut wgpu::CommandEncoder {
            let device = self.device;
            self.encoder.get_or_insert_with(|| device.create_command_encoder(&Default::default()))
        }
    }

    pub type System<'a> = &'a dyn Fn(&mut RenderContext<'_>);

    /// Runs one frame: every system, then one submission.
    pub fn run_frame(device: &wgpu::Device, queue: &wgpu::Queue, systems: &[System<'_>]) {
        let _frame = tracing::info_span!("run_frame").entered();
        let mut ctx = RenderContext { device, encoder: None };
        for system in systems {
            system(&mut ctx);
        }
        if let Some(encoder) = ctx.encoder.take() {
            queue.submit([encoder.finish()]);
        }
    }
}

/// A render system, annotated as the guide says for an encoder it does not own.
#[gpu_kernel(trace_all)]
fn bloom_system(ctx: &mut bevy_like::RenderContext<'_>, gpu: &Gpu) {
    let mut encoder = gpuspan::wgpu::attach(ctx.command_encoder());
    gpu.record_pass(&mut encoder, None);
}

#[gpu_kernel(trace_all)]
fn tonemap_system(ctx: &mut bevy_like::RenderContext<'_>, gpu: &Gpu, reference: &RawTimer) {
    let mut encoder = gpuspan::wgpu::attach(ctx.command_encoder());
    gpu.record_pass(&mut encoder, Some(&reference.query_set));
    drop(encoder);
    reference.resolve(ctx.command_encoder());
}

rusty_fork_test! {
    #[test]
    fn a_bevy_like_system_attaching_the_frameworks_encoder_is_timed_exactly() {
        let Some(gpu) = Gpu::for_test(1 << 16, 256) else { return };
        let capture = Capture::start();
        let reference = RawTimer::new(&gpu.device);
        let mut raw = Vec::new();
        for _ in 0..3 {
            let bloom = |ctx: &mut bevy_like::RenderContext<'_>| bloom_system(ctx, &gpu);
            let tonemap = |ctx: &mut bevy_like::RenderContext<'_>| tonemap_system(ctx, &gpu, &reference);
            bevy_like::run_frame(&gpu.device, &gpu.queue, &[&bloom, &tonemap]);
            raw.push(reference.read_ns(&gpu));
        }
        assert!(gpuspan::flush(), "every call resolved");
        let (bloom, mut tonemap) = (capture.of("bloom_system"), capture.of("tonemap_system"));
        assert_eq!((bloom.len(), tonemap.len()), (3, 3));
        tonemap.sort_by_key(|r| r.host.start_ns);
        for r in bloom.iter().chain(&tonemap) {
            let g = gpu_timing(r);
            assert_eq!(g.source, TimingSource::GpuTimestamp, "{r:?}");
            assert!(!g.bracketed, "an attached encoder is exact, not a bracket: {g:?}");
        }
        // Each tonemap call's query encloses its pass, which the framework submitted after the
        // call had returned.
        for (r, raw) in tonemap.iter().zip(&raw) {
            let g = gpu_timing(r);
            assert!(g.busy_ns as f64 >= raw * 0.99, "the attachment covers the pass: {} < {raw}", g.busy_ns);
            assert!(g.interval.start_ns + g.clock_error_ns >= r.host.start_ns, "starts in its call: {r:?}");
        }
    }
}

/// Stands for vello: a renderer whose entry point takes the device and queue, makes its own
/// encoder and submits inside.
mod vello_like {
    use super::wgpu;
    use gpuspan_tests::gpu::{Gpu, RawTimer};

    pub struct Renderer<'g> {
        pub gpu: &'g Gpu,
        /// Its own pass timestamps, the reference the bound is checked against.
        pub reference: RawTimer,
    }

    impl Renderer<'_> {
        pub fn render_to_texture(&mut self, device: &wgpu::Device, queue: &wgpu::Queue) {
            let mut encoder = device.create_command_encoder(&Default::default());
            self.gpu.record_pass(&mut encoder, Some(&self.reference.query_set));
            self.reference.resolve(&mut encoder);
            queue.submit([encoder.finish()]);
        }
    }
}

/// The user's function around the library call: only the queue is theirs to name.
#[gpu_kernel(trace_all)]
fn draw_scene(renderer: &mut vello_like::Renderer<'_>, device: &wgpu::Device, queue: &wgpu::Queue) {
    renderer.render_to_texture(device, queue);
}

rusty_fork_test! {
    #[test]
    fn a_vello_like_library_call_is_a_labelled_bracket_holding_the_librarys_work() {
        let Some(gpu) = Gpu::for_test(1 << 16, 256) else { return };
        let capture = Capture::start();
        let mut renderer = vello_like::Renderer { gpu: &gpu, reference: RawTimer::new(&gpu.device) };
        let mut raw = Vec::new();
        for _ in 0..3 {
            draw_scene(&mut renderer, &gpu.device, &gpu.queue);
            raw.push(renderer.reference.read_ns(&gpu));
        }
        assert!(gpuspan::flush(), "every call resolved");
        let mut records = capture.of("draw_scene");
        assert_eq!(records.len(), 3);
        records.sort_by_key(|r| r.host.start_ns);
        for (r, raw) in records.iter().zip(&raw) {
            let g = gpu_timing(r);
            assert_eq!(g.source, TimingSource::GpuTimestamp, "{r:?}");
            assert!(g.bracketed && g.bracket_at_exit, "a bracket to the call's exit, said as such: {g:?}");
            assert!(r.bandwidth_bytes_per_s().is_none(), "a bound has no bandwidth: {r:?}");
            // The bracket holds the library's own pass.
            assert!(g.interval.duration_ns() as f64 >= raw * 0.99, "{} < {raw}", g.interval.duration_ns());
        }
    }
}

/// Stands for cubecl's runtime: given the user's device and queue, it runs the closures it is
/// sent on a device thread of its own, which makes the encoders and submits.
mod cubecl_like {
    use super::wgpu;
    use std::sync::{mpsc, Arc};

    type Job = Box<dyn FnOnce(&wgpu::Device, &wgpu::Queue) + Send>;

    pub struct Runtime {
        queue: Arc<wgpu::Queue>,
        jobs: mpsc::Sender<Job>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Runtime {
        pub fn new(device: Arc<wgpu::Device>, queue: Arc<wgpu::Queue>) -> Runtime {
            let (jobs, rx) = mpsc::channel::<Job>();
            let q = queue.clone();
            let thread = std::thread::Builder::new()
                .name("device".into())
                .spawn(move || {
                    for job in rx {
                        job(&device, &q);
                    }
                })
                .expect("device thread");
            Runtime { queue, jobs, thread: Some(thread) }
        }

        pub fn queue(&self) -> &wgpu::Queue {
            &self.queue
        }

        /// Runs `job` on the device thread and waits until it was submitted.
        pub fn execute(&self, job: impl FnOnce(&wgpu::Device, &wgpu::Queue) + Send + 'static) {
            let (done, wait) = mpsc::channel();
            let job: Job = Box::new(move |d, q| {
                job(d, q);
                let _ = done.send(());
            });
            self.jobs.send(job).expect("device thread alive");
            wait.recv().expect("job ran");
        }
    }

    impl Drop for Runtime {
        fn drop(&mut self) {
            let (jobs, _) = mpsc::channel();
            drop(std::mem::replace(&mut self.jobs, jobs));
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// The user's operation: its work is launched by the runtime's device thread.
#[gpu_kernel(queue = rt.queue(), trace_all)]
fn matmul(rt: &cubecl_like::Runtime, gpu: &Arc<Gpu>, reference: &Arc<RawTimer>) {
    let (gpu, reference) = (gpu.clone(), reference.clone());
    rt.execute(move |device, queue| {
        let mut encoder = device.create_command_encoder(&Default::default());
        gpu.record_pass(&mut encoder, Some(&reference.query_set));
        reference.resolve(&mut encoder);
        queue.submit([encoder.finish()]);
    });
}

rusty_fork_test! {
    #[test]
    fn a_cubecl_like_device_thread_launch_falls_inside_the_callers_queue_bracket() {
        let Some(gpu) = Gpu::for_test(1 << 16, 256) else { return };
        let gpu = Arc::new(gpu);
        let rt = cubecl_like::Runtime::new(Arc::new(gpu.device.clone()), Arc::new(gpu.queue.clone()));
        let reference = Arc::new(RawTimer::new(&gpu.device));
        let capture = Capture::start();
        let mut raw = Vec::new();
        for _ in 0..3 {
            matmul(&rt, &gpu, &reference);
            raw.push(reference.read_ns(&gpu));
        }
        assert!(gpuspan::flush(), "every call resolved");
        let mut records = capture.of("matmul");
        assert_eq!(records.len(), 3);
        records.sort_by_key(|r| r.host.start_ns);
        for (r, raw) in records.iter().zip(&raw) {
            let g = gpu_timing(r);
            assert_eq!(g.source, TimingSource::GpuTimestamp, "{r:?}");
            assert!(g.bracketed, "the caller's queue bracket: {g:?}");
            assert!(g.interval.duration_ns() as f64 >= raw * 0.99, "the device thread's pass inside: {g:?} vs {raw}");
        }
    }
}
