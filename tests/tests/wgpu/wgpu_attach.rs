//! What `gpuspan::wgpu::attach` and resource parameters reach (issue 27): an attached encoder
//! replaces a queue bracket, `Arc`ed queues and devices are timed, and a guard held across an
//! `.await` is timed. On a real driver (lavapipe in CI). Each test in its own process (rusty-fork): the loss counters are the process's.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, TimingSource};
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::gpu::{Gpu, RawTimer};
use gpuspan_tests::wgpu;
use rusty_fork::rusty_fork_test;

fn gpu_timing(r: &Record) -> &gpuspan_testing::record::GpuTiming {
    r.gpu.as_ref().unwrap_or_else(|| panic!("no GPU timing for {}: {r:?}", r.site.desc.name))
}

/// Scopes counted as lost so far, of every kind.
fn lost() -> u64 {
    gpuspan::summary().losses.iter().map(|(_, n)| *n).sum()
}

/// The most common signature (issue 27): a device and a queue as parameters, the encoder made
/// in the body and attached. Host work comes first, before anything is encoded: a bracket would
/// start before it, the attachment starts with the commands recorded through it.
#[gpu_kernel(name = "attached_with_queue", trace_all)]
fn attached_with_queue(gpu: &Gpu, device: &wgpu::Device, queue: &wgpu::Queue, reference: &RawTimer) -> u64 {
    std::thread::sleep(std::time::Duration::from_millis(20));
    let attached_at = gpuspan_testing::clock::now_ns();
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        gpu.record_pass(&mut timed, Some(&reference.query_set));
    }
    reference.resolve(&mut encoder);
    queue.submit([encoder.finish()]);
    attached_at
}

rusty_fork_test! {
    #[test]
    fn attach_replaces_the_queue_bracket_and_times_the_call_exactly() {
        let Some(gpu) = Gpu::for_test(1 << 18, 256) else { return };
        let lost_before = lost();
        let capture = Capture::start();
        let reference = RawTimer::new(&gpu.device);
        let attached_at = attached_with_queue(&gpu, &gpu.device, &gpu.queue, &reference);
        let raw = reference.read_ns(&gpu);
        assert!(gpuspan::flush());
        let records = capture.of("attached_with_queue");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!(g.source, TimingSource::GpuTimestamp);
        assert!(!g.bracketed, "the attached encoder times the call, not a queue bracket: {g:?}");
        // The query encloses the pass: it holds the raw pass, and starts after the host work that
        // came before the attachment (a bracket would start at the call's entry).
        assert!(g.busy_ns as f64 >= raw * 0.99, "the attachment covers the pass: {} < {raw}", g.busy_ns);
        assert!(
            g.interval.start_ns + g.clock_error_ns >= attached_at,
            "GPU start {} before the attachment at {attached_at} (error bound {})",
            g.interval.start_ns,
            g.clock_error_ns
        );
        let notes = gpuspan::summary().notes;
        assert!(
            !notes.iter().any(|n| n.contains("attached_with_queue") && n.contains("already has its GPU timing")),
            "attach was ignored: {notes:?}"
        );
        // The bracket it replaced left its batch without a record: that is no loss.
        assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
    }
}

/// Queues and devices held in `Arc`s, as parameters (issue 27: `Arc<Queue>` once failed to
/// compile with instrumentation on).
#[gpu_kernel(name = "arc_queue", trace_all)]
fn arc_queue(gpu: &Gpu, queue: std::sync::Arc<wgpu::Queue>) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
}

#[gpu_kernel(name = "ref_arc_queue_and_device", trace_all)]
fn ref_arc_queue_and_device(gpu: &Gpu, device: &std::sync::Arc<wgpu::Device>, queue: &std::sync::Arc<wgpu::Queue>) {
    let mut encoder = device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
}

#[gpu_kernel(name = "arc_device", trace_all)]
fn arc_device(gpu: &Gpu, device: std::sync::Arc<wgpu::Device>) {
    let mut encoder = device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    gpu.queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn arc_queue_and_device_parameters_are_gpu_timed() {
        use std::sync::Arc;
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let capture = Capture::start();
        let (device, queue) = (Arc::new(gpu.device.clone()), Arc::new(gpu.queue.clone()));
        arc_queue(&gpu, queue.clone());
        ref_arc_queue_and_device(&gpu, &device, &queue);
        arc_device(&gpu, device.clone());
        gpu.wait();
        assert!(gpuspan::flush());
        for name in ["arc_queue", "ref_arc_queue_and_device", "arc_device"] {
            let records = capture.of(name);
            assert_eq!(records.len(), 1, "{name}");
            let g = gpu_timing(&records[0]);
            assert_eq!(g.source, TimingSource::GpuTimestamp, "{name}");
            assert!(g.bracketed, "{name}: a queue or device parameter brackets the call's submissions");
        }
    }
}

rusty_fork_test! {
    /// The free functions as a program that keeps its adapter, device and queue in `Arc`s calls them
    /// (bevy keeps `Arc`s): unchanged from when they took wgpu 30's types, on every major.
    #[test]
    fn register_read_buffer_and_timestamp_features_take_arcs() {
        use std::sync::Arc;
        let Some(gpu) = Gpu::for_test(1 << 10, 1) else { return };
        let (adapter, device, queue) =
            (Arc::new(gpu.adapter.clone()), Arc::new(gpu.device.clone()), Arc::new(gpu.queue.clone()));
        assert_eq!(gpuspan::wgpu::timestamp_features(&adapter), gpuspan::wgpu::timestamp_features(&gpu.adapter));
        gpuspan::wgpu::register(&adapter, &device, &queue);
        let capture = Capture::start();
        let len = gpuspan::wgpu::read_buffer(&device, &queue, &gpu.buffer, ..16, <[u8]>::len).expect("read back");
        assert_eq!(len, 16);
        assert!(gpuspan::flush());
        let records = capture.of("read_buffer");
        assert_eq!(records.len(), 1);
        assert_eq!(gpu_timing(&records[0]).source, TimingSource::GpuTimestamp);
    }
}

/// Returns `Pending` once (waking itself), so that the function is polled twice: a real suspension.
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

/// An `attach` guard held across an `.await` (issue 27): the query opened in one poll is closed
/// in a later one, in the same encoder.
#[gpu_kernel(name = "attach_across_await", trace_all)]
async fn attach_across_await(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        YieldOnce(false).await;
        gpu.record_pass(&mut timed, None);
    }
    gpu.queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn an_attach_guard_held_across_await_is_gpu_timed() {
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let capture = Capture::start();
        pollster::block_on(attach_across_await(&gpu));
        gpu.wait();
        assert!(gpuspan::flush());
        let records = capture.of("attach_across_await");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!(g.source, TimingSource::GpuTimestamp);
        assert!(!g.bracketed);
    }
}

rusty_fork_test! {
    #[test]
    fn an_attach_guard_held_across_await_is_gpu_timed_when_the_future_moves_thread() {
        use std::future::Future;
        use std::task::{Context, Waker};
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let capture = Capture::start();
        // The guard opens in the first poll, here; the future is then polled to its end on another
        // thread, where the guard is dropped and its query closed.
        let mut future = Box::pin(attach_across_await(&gpu));
        assert!(future.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        std::thread::scope(|s| {
            s.spawn(move || assert!(future.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_ready()))
                .join()
                .unwrap();
        });
        gpu.wait();
        assert!(gpuspan::flush());
        let records = capture.of("attach_across_await");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!(g.source, TimingSource::GpuTimestamp);
        assert!(!g.bracketed);
    }
}

/// An async function that attaches an encoder, closes the guard, then awaits: its scope collects
/// the measurement as it suspends.
#[gpu_kernel(name = "attach_then_await", trace_all)]
async fn attach_then_await(gpu: &Gpu) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        gpu.record_pass(&mut timed, None);
    }
    YieldOnce(false).await;
    gpu.queue.submit([encoder.finish()]);
}

/// Its caller times its own encoder, whose query frame the attachment joins on this thread.
#[gpu_kernel(name = "encoder_around_async", trace_all)]
fn encoder_around_async(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder) {
    gpu.record_pass(encoder, None);
    pollster::block_on(attach_then_await(gpu));
}

rusty_fork_test! {
    #[test]
    fn an_attachment_collected_at_a_suspension_leaves_its_callers_frame_alone() {
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let capture = Capture::start();
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        encoder_around_async(&gpu, &mut encoder);
        gpu.queue.submit([encoder.finish()]);
        gpu.wait();
        assert!(gpuspan::flush(), "a frame was left waiting");
        for name in ["attach_then_await", "encoder_around_async"] {
            let records = capture.of(name);
            assert_eq!(records.len(), 1, "{name}");
            assert_eq!(gpu_timing(&records[0]).source, TimingSource::GpuTimestamp, "{name}");
        }
    }
}

/// Both at once: an async function with a queue parameter (a bracket) whose attached guard is
/// held across an `.await`.
#[gpu_kernel(name = "queue_attach_across_await", trace_all)]
async fn queue_attach_across_await(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut timed = gpuspan::wgpu::attach(&mut encoder);
        YieldOnce(false).await;
        gpu.record_pass(&mut timed, None);
    }
    queue.submit([encoder.finish()]);
}

rusty_fork_test! {
    #[test]
    fn an_async_bracketed_call_with_a_guard_across_await_is_timed_by_the_guard() {
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let lost_before = lost();
        let capture = Capture::start();
        pollster::block_on(queue_attach_across_await(&gpu, &gpu.queue));
        gpu.wait();
        assert!(gpuspan::flush());
        let records = capture.of("queue_attach_across_await");
        assert_eq!(records.len(), 1);
        let g = gpu_timing(&records[0]);
        assert_eq!(g.source, TimingSource::GpuTimestamp);
        assert!(!g.bracketed, "the guard's query times the call: {g:?}");
        assert_eq!(lost(), lost_before, "{:?}", gpuspan::summary().losses);
    }
}

rusty_fork_test! {
    #[test]
    fn a_future_dropped_with_its_guard_open_counts_the_lost_timing() {
        use std::future::Future;
        use std::task::{Context, Waker};
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let lost_before = lost();
        let capture = Capture::start();
        // Cancelled while suspended with the guard open: the guard is dropped before its scope.
        let mut future = Box::pin(attach_across_await(&gpu));
        assert!(future.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        drop(future);
        assert!(gpuspan::flush());
        assert_eq!(capture.of("attach_across_await").len(), 1, "the cancelled call is still recorded");
        assert!(lost() > lost_before, "its GPU timing is counted as lost: {:?}", gpuspan::summary().losses);
    }
}
