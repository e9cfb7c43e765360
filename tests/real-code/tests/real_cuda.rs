//! The CUDA half of the library, run as its users would. Every test here needs a CUDA GPU, so
//! they are `#[ignore = "needs a GPU"]` and fail (never skip) without one: `scripts/gpu run`
//! runs them with `--ignored` on the GPU machine. With `profile` the records are checked;
//! without it the same code must run.
#![cfg(feature = "cuda")]

use gpuspan_real_code::cuda::{Infer, Saxpy};
use std::sync::Arc;

#[test]
#[ignore = "needs a GPU"]
fn streams_made_in_the_body_bare_attributes_async_and_async_trait() {
    #[cfg(feature = "profile")]
    let capture = gpuspan_testing::Capture::start_all_threads();
    let saxpy = Arc::new(Saxpy::new().expect("this test needs a CUDA device (scripts/gpu run)"));
    let n = 1 << 16;
    let y = saxpy.run(2.0, &vec![1.0; n], &vec![0.5; n], 4).expect("run");
    assert!(y.iter().all(|&v| v == 8.5), "four saxpy rounds: {}", y[0]);
    assert!(saxpy.run(1.0, &[1.0], &[1.0, 2.0], 1).is_err(), "`ensure!` fails mismatched lengths");
    assert_eq!(saxpy.round_trip(&[3.0; 1024]).expect("round trip"), vec![3.0; 1024]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let spawned = rt.spawn({
        let saxpy = saxpy.clone();
        async move { saxpy.run_async(1.5, 1 << 12).await }
    });
    let model: Arc<dyn Infer> = saxpy.clone();
    let inferred = rt.spawn(async move { model.infer(1 << 12).await });
    rt.block_on(async {
        spawned.await.expect("join").expect("run_async");
        assert_eq!(inferred.await.expect("join").expect("infer"), 2.5);
    });
    assert!(gpuspan::flush(), "every GPU timing arrives");

    #[cfg(feature = "profile")]
    {
        use gpuspan::TimingSource;
        use gpuspan_testing::record::ActivityKind;
        let kernels = |r: &gpuspan_testing::Record| {
            r.activities.iter().filter(|a| matches!(a.kind, ActivityKind::Kernel(_))).count()
        };
        let runs = capture.of("run");
        let ok = runs.iter().find(|r| !r.error).expect("the successful run was recorded");
        assert_eq!(ok.source(), TimingSource::Cupti, "{ok:?}");
        assert_eq!(kernels(ok), 4, "the four launches on the stream made in the body: {ok:?}");
        assert!(runs.iter().any(|r| r.error), "`ensure!` marked the failed call");
        let trips = capture.of("round_trip");
        assert_eq!(trips[0].source(), TimingSource::Cupti, "{trips:?}");
        assert_eq!(trips[0].bytes, Some(4096));
        let asyncs = capture.of("run_async");
        assert_eq!(kernels(&asyncs[0]), 2, "launches before and after the await: {asyncs:?}");
        let infer = capture.of("infer");
        assert_eq!(kernels(&infer[0]), 1, "the #[async_trait] body's launch is attributed: {infer:?}");
        assert!(infer[0].host.duration_ns() >= 20_000_000, "the boxed future is timed: {infer:?}");
        let counts = gpuspan_testing::cuda::cupti_counts().expect("CUPTI counts");
        println!("cupti counts: {counts:?}");
    }
}
