//! Queue brackets end with the call's last submission (issue 13): a function that submits, then
//! maps, waits for and copies out its result has a bracket that holds its GPU work but not its
//! read-back; a `submit` that is not a wgpu queue's is left alone. Async functions' brackets
//! end at their last submission too, on whichever thread the future runs.
#![cfg(feature = "wgpu-suite")]

use gpuspan::{gpu_kernel, gpu_transfer};
use gpuspan_testing::{Capture, Record};
use gpuspan_tests::gpu::{Gpu, RawTimer};
use gpuspan_tests::wgpu;
use rusty_fork::rusty_fork_test;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn bracket_end(r: &Record) -> String {
    let attrs = r.attributes();
    let v = attrs.iter().find(|(k, _)| *k == "gpu.timing.bracket_end").map(|(_, v)| format!("{v:?}"));
    v.unwrap_or_else(|| panic!("no gpu.timing.bracket_end on {}", r.site.desc.name))
}

fn gpu_timing(r: &Record) -> &gpuspan_testing::record::GpuTiming {
    r.gpu.as_ref().unwrap_or_else(|| panic!("no GPU timing for {}: {r:?}", r.site.desc.name))
}

/// Host work on the result after the read-back (parsing it, say). Long next to any clock
/// mapping error, so that a bracket that still ended at exit could not pass for one that did not.
const HOST_WORK: Duration = Duration::from_millis(30);

/// Shaped like a third party's compute wrapper: the queue in a field, a compute submit, then a
/// map, a blocking poll and a copy-out in the same function.
struct Compute {
    gpu: Gpu,
    staging: wgpu::Buffer,
    /// When the read-back's map callback ran, on gpuspan's host clock.
    mapped_at: Arc<AtomicU64>,
    /// When each upload's submission was done on the GPU, on gpuspan's host clock.
    uploaded_at: Arc<Mutex<Vec<u64>>>,
}

impl Compute {
    fn new(gpu: Gpu) -> Compute {
        let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("staging"),
            size: gpu.buffer.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Compute { gpu, staging, mapped_at: Arc::new(AtomicU64::new(0)), uploaded_at: Arc::default() }
    }

    fn encode(&self) -> wgpu::CommandBuffer {
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        self.gpu.record_pass(&mut encoder, None);
        encoder.copy_buffer_to_buffer(&self.gpu.buffer, 0, &self.staging, 0, self.gpu.buffer.size());
        encoder.finish()
    }

    fn read_back(&self) -> Vec<u8> {
        let slice = self.staging.slice(..);
        let mapped_at = self.mapped_at.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            r.expect("map");
            mapped_at.store(gpuspan_testing::clock::now_ns(), Ordering::SeqCst);
        });
        self.gpu.wait();
        let out = gpuspan_tests::mapped(&slice).to_vec();
        self.staging.unmap();
        std::thread::sleep(HOST_WORK);
        out
    }

    #[gpu_kernel(name = "compute_then_read_back", queue = self.gpu.queue, trace_all)]
    fn run(&self) -> Vec<u8> {
        self.gpu.queue.submit([self.encode()]);
        self.read_back()
    }

    /// The same, with the submission in a callee the macro cannot see into.
    #[gpu_kernel(name = "compute_in_callee_then_read_back", queue = self.gpu.queue, trace_all)]
    fn run_in_callee(&self) -> Vec<u8> {
        self.submit_encoded();
        self.read_back()
    }

    fn submit_encoded(&self) {
        self.gpu.queue.submit([self.encode()]);
    }

    /// The read-back without blocking a worker: the device is polled between sleeps, so the
    /// future may resume on another thread.
    async fn read_back_async(&self) -> Vec<u8> {
        let slice = self.staging.slice(..);
        let mapped_at = self.mapped_at.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            r.expect("map");
            mapped_at.store(gpuspan_testing::clock::now_ns(), Ordering::SeqCst);
        });
        while self.mapped_at.load(Ordering::SeqCst) == 0 {
            let _ = self.gpu.device.poll(wgpu::PollType::Poll);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let out = gpuspan_tests::mapped(&slice).to_vec();
        self.staging.unmap();
        tokio::time::sleep(HOST_WORK).await;
        out
    }

    /// An async compute wrapper: submit, an `.await`, then the read-back and host work.
    #[gpu_kernel(name = "async_compute_then_read_back", queue = self.gpu.queue, trace_all)]
    async fn run_async(&self) -> Vec<u8> {
        self.gpu.queue.submit([self.encode()]);
        tokio::task::yield_now().await;
        self.read_back_async().await
    }

    /// An async upload that may fail after its submission, through `?`.
    #[gpu_transfer(name = "async_upload_or_fail", queue = self.gpu.queue, direction = cpu_to_gpu, bytes = data.len(), trace_all)]
    async fn upload_async(&self, data: &[u8], fail: bool) -> Result<usize, String> {
        self.gpu.queue.write_buffer(&self.gpu.buffer, 0, data);
        self.gpu.queue.submit([]);
        self.submission_done().await;
        tokio::time::sleep(HOST_WORK).await;
        refuse(fail)?;
        Ok(data.len())
    }
}

impl Compute {
    /// Waits, without blocking a worker, until the GPU has done what was submitted, and notes
    /// when: the bracket's end timestamp was written before then.
    async fn submission_done(&self) {
        let done = Arc::new(AtomicU64::new(0));
        let at = done.clone();
        self.gpu.queue.on_submitted_work_done(move || at.store(gpuspan_testing::clock::now_ns(), Ordering::SeqCst));
        while done.load(Ordering::SeqCst) == 0 {
            let _ = self.gpu.device.poll(wgpu::PollType::Poll);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.uploaded_at.lock().unwrap().push(done.load(Ordering::SeqCst));
    }
}

fn refuse(fail: bool) -> Result<(), String> {
    if fail {
        Err("refused".to_owned())
    } else {
        Ok(())
    }
}

fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().expect("tokio runtime")
}

rusty_fork_test! {
    #[test]
    fn async_bracket_ends_at_its_last_submission_across_awaits() {
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let compute = Arc::new(Compute::new(gpu));
        let capture = Capture::start_all_threads();
        let rt = multi_thread_runtime();
        let c = compute.clone();
        let out = rt.block_on(async move { tokio::spawn(async move { c.run_async().await }).await }).expect("task");
        assert_eq!(out.len() as u64, compute.gpu.buffer.size());
        let mapped_at = compute.mapped_at.load(Ordering::SeqCst);
        assert!(gpuspan::flush(), "flush left GPU work pending");
        let r = &capture.of("async_compute_then_read_back")[0];
        let g = gpu_timing(r);
        assert!(g.bracketed && !g.bracket_at_exit, "ended with the submission: {g:?}");
        assert!(bracket_end(r).contains("last_submit"), "{}", bracket_end(r));
        assert!(
            g.interval.end_ns <= mapped_at + g.clock_error_ns,
            "bracket end {} after the map callback {} (error bound {})",
            g.interval.end_ns,
            mapped_at,
            g.clock_error_ns
        );
        assert!(r.host.end_ns >= mapped_at + HOST_WORK.as_nanos() as u64, "the call held the read-back: {r:?}");
    }
}

rusty_fork_test! {
    #[test]
    fn async_bracket_left_by_question_mark_ends_at_its_submission() {
        let Some(gpu) = Gpu::for_test(1 << 16, 1) else { return };
        let compute = Arc::new(Compute::new(gpu));
        let capture = Capture::start_all_threads();
        let rt = multi_thread_runtime();
        let data = vec![7u8; compute.gpu.buffer.size() as usize];
        let (c, d) = (compute.clone(), data.clone());
        let failed = rt.block_on(async move { tokio::spawn(async move { c.upload_async(&d, true).await }).await });
        assert_eq!(failed.expect("task"), Err("refused".to_owned()));
        let (c, d) = (compute.clone(), data);
        let done = rt.block_on(async move { tokio::spawn(async move { c.upload_async(&d, false).await }).await });
        assert_eq!(done.expect("task"), Ok(compute.gpu.buffer.size() as usize));
        assert!(gpuspan::flush(), "flush left GPU work pending");
        let mut records = capture.of("async_upload_or_fail");
        assert_eq!(records.len(), 2, "{records:?}");
        records.sort_by_key(|r| r.host.start_ns);
        assert!(records[0].error && !records[1].error, "the `?` exit marks its call: {records:?}");
        let uploaded_at = compute.uploaded_at.lock().unwrap().clone();
        for (r, done) in records.iter().zip(uploaded_at) {
            let g = gpu_timing(r);
            assert!(g.bracketed && !g.bracket_at_exit, "{g:?}");
            assert!(bracket_end(r).contains("last_submit"), "{}", bracket_end(r));
            // The sleep after the submission is the call's, not the bracket's: the end was written
            // before the GPU said the submission was done, and the call went on for the sleep.
            assert!(
                g.interval.end_ns <= done + g.clock_error_ns,
                "bracket end {} after its submission was done {} (error bound {})",
                g.interval.end_ns,
                done,
                g.clock_error_ns
            );
            assert!(r.host.end_ns >= done + HOST_WORK.as_nanos() as u64, "the call held the sleep: {r:?}");
        }
    }
}

rusty_fork_test! {
    #[test]
    fn bracket_ends_at_the_last_submission_not_after_the_read_back() {
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let compute = Compute::new(gpu);
        let capture = Capture::start();
        let out = compute.run();
        let mapped_at = compute.mapped_at.load(Ordering::SeqCst);
        assert_eq!(out.len() as u64, compute.gpu.buffer.size());
        assert!(gpuspan::flush(), "flush left GPU work pending");
        let r = &capture.of("compute_then_read_back")[0];
        let g = gpu_timing(r);
        assert!(g.bracketed && !g.bracket_at_exit, "ended with the submission: {g:?}");
        eprintln!(
            "bracket {:.3} ms, host call {:.3} ms, bracket end {:.3} ms before the map callback (error bound {:.3} ms)",
            g.busy_ns as f64 / 1e6,
            r.host.duration_ns() as f64 / 1e6,
            (mapped_at as f64 - g.interval.end_ns as f64) / 1e6,
            g.clock_error_ns as f64 / 1e6
        );
        // The end timestamp was written before the work the map waited for completed.
        assert!(
            g.interval.end_ns <= mapped_at + g.clock_error_ns,
            "bracket end {} after the map callback {} (error bound {})",
            g.interval.end_ns,
            mapped_at,
            g.clock_error_ns
        );
        assert!(g.busy_ns < r.host.duration_ns().saturating_sub(HOST_WORK.as_nanos() as u64) + g.clock_error_ns);
        assert!(bracket_end(r).contains("last_submit"), "{}", bracket_end(r));
    }
}

rusty_fork_test! {
    #[test]
    fn bracket_without_a_visible_submission_ends_at_exit_and_says_so() {
        let Some(gpu) = Gpu::for_test(1 << 16, 64) else { return };
        let compute = Compute::new(gpu);
        let capture = Capture::start();
        compute.run_in_callee();
        let mapped_at = compute.mapped_at.load(Ordering::SeqCst);
        assert!(gpuspan::flush());
        let r = &capture.of("compute_in_callee_then_read_back")[0];
        let g = gpu_timing(r);
        assert!(g.bracketed && g.bracket_at_exit, "{g:?}");
        // Submitted at exit, after the map callback and the host work: the bracket holds them.
        assert!(g.interval.end_ns + g.clock_error_ns >= mapped_at + HOST_WORK.as_nanos() as u64);
        let table = gpuspan::summary().to_string();
        let row = table.lines().find(|l| l.starts_with("compute_in_callee_then_read_back ")).expect("row");
        assert!(row.contains("≤ ") && row.contains("bracket to exit"), "{row}");
    }
}

#[gpu_kernel(name = "two_submissions", trace_all)]
fn two_submissions(gpu: &Gpu, queue: &wgpu::Queue, first: &RawTimer, second: &RawTimer) {
    for reference in [first, second] {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        gpu.record_pass(&mut encoder, Some(&reference.query_set));
        reference.resolve(&mut encoder);
        queue.submit(Some(encoder.finish()));
    }
}

rusty_fork_test! {
    #[test]
    fn bracket_spans_every_submission_of_the_call() {
        let Some(gpu) = Gpu::for_test(1 << 18, 64) else { return };
        let capture = Capture::start();
        let (first, second) = (RawTimer::new(&gpu.device), RawTimer::new(&gpu.device));
        two_submissions(&gpu, &gpu.queue, &first, &second);
        let raw = first.read_ns(&gpu) + second.read_ns(&gpu);
        assert!(gpuspan::flush());
        let r = &capture.of("two_submissions")[0];
        let g = gpu_timing(r);
        assert!(g.bracketed && !g.bracket_at_exit);
        // Ending at the first submission would leave the second pass out.
        assert!(g.busy_ns as f64 >= raw * 0.99, "bracket {} ns < both passes {raw} ns", g.busy_ns);
        let table = gpuspan::summary().to_string();
        let row = table.lines().find(|l| l.starts_with("two_submissions ")).expect("row");
        assert!(row.contains("≤ ") && row.contains("bracket to last submit"), "{row}");
    }
}

#[gpu_kernel(name = "one_pass", trace_all)]
fn one_pass(gpu: &Gpu, queue: &wgpu::Queue, reference: &RawTimer) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, Some(&reference.query_set));
    reference.resolve(&mut encoder);
    queue.submit(Some(encoder.finish()));
}

rusty_fork_test! {
    /// Brackets share batches of query slots (issue 16): each record must still get its own two
    /// timestamps, not a neighbour's.
    #[test]
    fn pooled_brackets_each_get_their_own_timestamps() {
        let Some(gpu) = Gpu::for_test(1 << 12, 4) else { return };
        let capture = Capture::start();
        let timers: Vec<RawTimer> = (0..40).map(|_| RawTimer::new(&gpu.device)).collect();
        for t in &timers {
            one_pass(&gpu, &gpu.queue, t);
        }
        let raw: Vec<f64> = timers.iter().map(|t| t.read_ns(&gpu)).collect();
        assert!(gpuspan::flush());
        // Delivered batch by batch, not necessarily in call order: put them back in it.
        let mut records = capture.of("one_pass");
        records.sort_by_key(|r| r.host.start_ns);
        assert_eq!(records.len(), timers.len());
        for (i, (r, raw)) in records.iter().zip(&raw).enumerate() {
            let g = gpu_timing(r);
            assert!(g.bracketed && !g.bracket_at_exit, "{g:?}");
            assert!(g.busy_ns as f64 >= raw * 0.99, "call {i}: bracket {} ns < its pass {raw} ns", g.busy_ns);
            // Queue order: the next call's bracket opens after this one's end.
            if let Some(next) = records.get(i + 1).map(gpu_timing) {
                assert!(
                    g.interval.end_ns <= next.interval.start_ns + g.clock_error_ns + next.clock_error_ns,
                    "call {i} ends at {} after call {} starts at {}",
                    g.interval.end_ns,
                    i + 1,
                    next.interval.start_ns
                );
            }
        }
    }
}

/// A call that stays inside its bracket until told to leave.
#[gpu_kernel(name = "held_open", trace_all)]
fn held_open(queue: &wgpu::Queue, opened: &std::sync::mpsc::Sender<()>, leave: &std::sync::mpsc::Receiver<()>) {
    queue.submit([]);
    opened.send(()).expect("the test waits");
    leave.recv().expect("the test says when");
}

rusty_fork_test! {
    /// A bracket still running in a batch does not hold back its neighbours' records: a flush
    /// delivers every call that finished.
    #[test]
    fn a_running_bracket_does_not_hold_back_finished_ones() {
        let Some(gpu) = Gpu::for_test(1 << 12, 4) else { return };
        let capture = Capture::start_all_threads();
        let (opened_tx, opened) = std::sync::mpsc::channel();
        let (leave, leave_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let queue = &gpu.queue;
            let running = s.spawn(move || held_open(queue, &opened_tx, &leave_rx));
            opened.recv().expect("the call opened its bracket");
            let timer = RawTimer::new(&gpu.device);
            one_pass(&gpu, &gpu.queue, &timer);
            assert!(gpuspan::flush());
            let done = capture.of("one_pass");
            assert_eq!(done.len(), 1, "the finished call is delivered while the other runs");
            assert!(gpu_timing(&done[0]).bracketed);
            assert!(capture.of("held_open").is_empty());
            leave.send(()).expect("the call waits");
            running.join().expect("the call returns");
        });
        assert!(gpuspan::flush());
        let held = capture.of("held_open");
        assert_eq!(held.len(), 1);
        assert!(gpu_timing(&held[0]).bracketed && !gpu_timing(&held[0]).bracket_at_exit);
    }
}

/// Something else with a `submit` method, taking `&mut self`.
#[derive(Default)]
struct Jobs(Vec<u32>);

impl Jobs {
    fn submit(&mut self, job: u32) -> usize {
        self.0.push(job);
        self.0.len()
    }
}

trait Submitter {
    fn submit(&mut self, job: u32) -> usize;
}

impl Submitter for Jobs {
    fn submit(&mut self, job: u32) -> usize {
        Jobs::submit(self, job + 100)
    }
}

fn jobs_of(j: &mut Jobs) -> &mut Jobs {
    j
}

#[gpu_kernel(name = "other_submits", trace_all)]
fn other_submits<S: Submitter>(queue: &wgpu::Queue, jobs: &mut Jobs, generic: &mut S) -> (usize, usize, usize) {
    let a = jobs.submit(1);
    let b = jobs_of(jobs).submit(2);
    let c = generic.submit(3);
    queue.submit([]);
    (a, b, c)
}

rusty_fork_test! {
    #[test]
    fn other_submit_methods_run_unchanged() {
        let Some(gpu) = Gpu::for_test(1 << 10, 1) else { return };
        let capture = Capture::start();
        let (mut jobs, mut generic) = (Jobs::default(), Jobs::default());
        assert_eq!(other_submits(&gpu.queue, &mut jobs, &mut generic), (1, 2, 1));
        assert_eq!((jobs.0, generic.0), (vec![1, 2], vec![103]));
        assert!(gpuspan::flush());
        let g = gpu_timing(&capture.of("other_submits")[0]).clone();
        // The empty submission on the queue carried the bracket's end; the others were not seen
        // as the queue's.
        assert!(g.bracketed && !g.bracket_at_exit, "{g:?}");
    }
}
