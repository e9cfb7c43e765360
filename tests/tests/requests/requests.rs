//! GPU cost per request: a tokio program serves two requests at once, each awaiting annotated
//! wgpu work (lavapipe here) and hopping to a blocking thread for more; the capture names each
//! record's request span, and the report's per-request GPU totals are the sums of their records.
//! One test in this file: it installs the global subscriber and writes the process's capture.
#![cfg(feature = "wgpu-suite")]

use gpuspan::gpu_kernel;
use gpuspan_capture::{Capture, Record};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tracing::Instrument;

#[gpu_kernel(name = "forward", trace_all)]
async fn forward(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
    tokio::task::yield_now().await;
}

#[gpu_kernel(name = "postprocess", trace_all)]
fn postprocess(gpu: &Gpu, queue: &wgpu::Queue) {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    gpu.record_pass(&mut encoder, None);
    queue.submit([encoder.finish()]);
}

/// Host work only: no GPU resource, no GPU time.
#[gpu_kernel(name = "tokenize", trace_all)]
fn tokenize(text: &str) -> usize {
    text.split_whitespace().count()
}

/// A request: `passes` awaited forward passes on a worker thread, then a post-processing pass
/// on a blocking thread that carries the request's span there.
async fn handle_request(gpu: Arc<Gpu>, passes: usize) {
    for _ in 0..passes {
        forward(&gpu, &gpu.queue).await;
    }
    let span = tracing::Span::current();
    let g = gpu.clone();
    tokio::task::spawn_blocking(move || span.in_scope(|| postprocess(&g, &g.queue))).await.expect("the hop ran");
}

/// The id of the outermost span named `name` in the record's chain.
fn request_of(c: &Capture, r: &Record, name: &str) -> Option<u64> {
    let mut at = r.span;
    let mut found = None;
    while let Some(id) = at {
        let s = c.spans.iter().find(|s| s.id == id)?;
        if s.name == name {
            found = Some(id);
        }
        at = s.parent;
    }
    found
}

#[test]
fn each_requests_gpu_total_is_the_sum_of_its_records_across_awaits_and_threads() {
    let Some(gpu) = Gpu::for_test(1 << 16, 256) else { return };
    let gpu = Arc::new(gpu);
    tracing::subscriber::set_global_default(tracing_subscriber::registry()).expect("the only subscriber");
    let dir = std::env::temp_dir().join(format!("gpuspan-requests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("requests.gpuspan");
    let guard = gpuspan::Config::from_env().no_trace_file().summary(false).trace_all(true).capture(&path).init();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let a = tokio::spawn(handle_request(gpu.clone(), 2).instrument(tracing::info_span!("handle_request", id = 1)));
        let b = tokio::spawn(handle_request(gpu.clone(), 3).instrument(tracing::info_span!("handle_request", id = 2)));
        a.await.unwrap();
        b.await.unwrap();
    });
    tracing::info_span!("host_request").in_scope(|| std::hint::black_box(tokenize("one two three")));
    gpu.wait();
    assert!(gpuspan::flush());
    drop(guard);

    let c = Capture::open(&path).expect("the capture reads");
    assert!(c.end.is_some(), "the guard finished the capture");
    let site = |r: &Record| c.site(r.site).map(|s| s.name.clone()).unwrap_or_default();
    let mine: Vec<&Record> =
        c.records.iter().filter(|r| ["forward", "postprocess"].contains(&site(r).as_str())).collect();
    assert_eq!(mine.len(), 7, "2 + 3 forward passes and 2 post-processing passes");
    assert!(mine.iter().all(|r| r.gpu.is_some()), "every pass has GPU timing");
    let mut by_request: BTreeMap<u64, Vec<&Record>> = BTreeMap::new();
    for r in &mine {
        let request = request_of(&c, r, "handle_request").unwrap_or_else(|| panic!("{} outside a request", site(r)));
        by_request.entry(request).or_default().push(r);
    }
    assert_eq!(by_request.len(), 2, "two requests with one name stay apart");
    let mut sizes: Vec<(usize, usize)> = by_request
        .values()
        .map(|rs| {
            let forward = rs.iter().filter(|r| site(r) == "forward").count();
            let threads: BTreeSet<u32> = rs.iter().map(|r| r.thread).collect();
            let hop = rs.iter().find(|r| site(r) == "postprocess").expect("a post-processing pass");
            let workers: BTreeSet<u32> = rs.iter().filter(|r| site(r) == "forward").map(|r| r.thread).collect();
            assert!(!workers.contains(&hop.thread), "the hop ran on another thread, still in its request");
            assert!(threads.len() >= 2);
            (forward, rs.len())
        })
        .collect();
    sizes.sort();
    assert_eq!(sizes, [(2, 3), (3, 4)], "each request's own calls, none of the other's");

    let sums: BTreeSet<u64> =
        by_request.values().map(|rs| rs.iter().map(|r| r.gpu.as_ref().unwrap().busy_ns).sum()).collect();
    let (report, _) = gpuspan_cli::report::stream(&path, false).expect("the report reads it");
    let row = report.requests.iter().find(|r| r.span == "handle_request").expect("a row for the request span");
    assert_eq!((row.requests, row.records), (2, 7));
    assert_eq!(row.total_ns, sums.iter().sum::<u64>());
    let quantiles: BTreeSet<u64> = [row.p50_ns.unwrap(), row.p99_ns.unwrap()].into();
    assert_eq!(quantiles, sums, "p50 and p99 of two requests are their two totals");

    // A request whose calls were all host-timed had no GPU time measured: the table shows none,
    // not "0 ns" (issue 39).
    let host = report.requests.iter().find(|r| r.span == "host_request").expect("a row for the host request");
    assert_eq!((host.records, host.gpu_timed), (1, 0), "{host:?}");
    let text = report.to_text();
    let line = text.lines().find(|l| l.trim_start().starts_with("host_request")).expect("its row in the text");
    assert!(!line.contains("0 ns") && line.contains('-'), "no GPU time, not 0 ns: {line}");

    let folded = gpuspan_cli::flame::folded(&c);
    let under: u64 = folded.iter().filter(|(k, _)| k.contains(";handle_request;")).map(|(_, v)| v).sum();
    assert_eq!(under, row.total_ns, "the flamegraph folds the same GPU time under the request: {folded:?}");
    assert!(folded.keys().any(|k| k.ends_with(";handle_request;forward")), "{folded:?}");
    // GPUSPAN_TEST_KEEP=path keeps the capture (cli/tests/fixtures/lavapipe_requests.gpuspan came
    // from here).
    if let Some(keep) = std::env::var_os("GPUSPAN_TEST_KEEP") {
        std::fs::copy(&path, keep).expect("the capture is kept");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
