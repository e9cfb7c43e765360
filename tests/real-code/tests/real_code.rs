//! The library and program of this crate, run as their users would, on a real (software) GPU.
//! With the `profile` feature the records are checked; without it the same code must run.

use gpuspan_real_code::{upload, Compute, Model};
use std::process::Command;
use std::sync::Arc;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The compute library on the first adapter, one for the process (gpuspan tells devices of two
/// wgpu instances apart only by their ids, which collide); `None` (said) without one, outside CI.
fn compute() -> Option<Arc<Compute>> {
    static COMPUTE: std::sync::OnceLock<Option<Arc<Compute>>> = std::sync::OnceLock::new();
    COMPUTE
        .get_or_init(|| match Compute::new(1 << 12) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) if in_ci() => panic!("no GPU adapter with CI=true: {e:#}"),
            Err(e) => {
                eprintln!("skipped: {e:#}");
                None
            }
        })
        .clone()
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

#[test]
fn the_library_runs_on_tokio_with_errors_from_macros() {
    #[cfg(feature = "profile")]
    let capture = gpuspan_testing::Capture::start_all_threads();
    let Some(compute) = compute() else { return };
    upload(compute.queue(), compute.buffer(), &[2.0; 1 << 12]);
    let failed = compute.step(0);
    assert!(failed.is_err(), "`ensure!` fails a step of 0 passes");
    let mut encoder = compute.device_encoder();
    let too_many = compute.record_at_most(&mut encoder, 9);
    let fine = compute.record_at_most(&mut encoder, 2);
    compute.queue().submit([encoder.finish()]);
    assert!(too_many.is_err() && fine.is_ok());
    let rt = tokio();
    let spawned = rt.spawn({
        let compute = compute.clone();
        async move { compute.step_async(2).await }
    });
    compute.step_attached(2).expect("step_attached");
    let attached_async = rt.spawn({
        let compute = compute.clone();
        async move { compute.step_attached_async().await }
    });
    let model: Arc<dyn Model> = compute.clone();
    let forward = rt.spawn(async move { model.forward(1).await });
    rt.block_on(async {
        spawned.await.expect("join").expect("step_async");
        attached_async.await.expect("join");
        assert_eq!(forward.await.expect("join").expect("forward"), 1);
    });
    assert!(gpuspan::flush(), "every GPU timing arrives");

    #[cfg(feature = "profile")]
    {
        use gpuspan::TimingSource;
        let gpu_timed = |name: &str| {
            let records = capture.of(name);
            assert!(!records.is_empty(), "{name} was recorded");
            for r in &records {
                assert_eq!(r.source(), TimingSource::GpuTimestamp, "{name} is GPU-timed: {r:?}");
            }
            records
        };
        // No GPU interval is placed before the call that made it (corrected when the clock
        // mapping said otherwise, and counted in the trust report).
        for r in capture.records() {
            if let Some(g) = &r.gpu {
                assert!(g.interval.start_ns >= r.host.start_ns, "GPU work before its call: {r:?}");
            }
        }
        let trust = gpuspan::summary().trust;
        assert!(trust.iter().any(|t| t.source == TimingSource::GpuTimestamp && t.checked > 0), "{trust:?}");
        let uploads = gpu_timed("upload");
        assert_eq!(uploads[0].bytes, Some(4 << 12), "bytes from the slice behind an &Arc<Queue> call");
        let steps = gpu_timed("step");
        assert!(steps.iter().any(|r| r.error), "ensure! marked the failed step as an error");
        let records = gpu_timed("record_at_most");
        assert_eq!(records.iter().filter(|r| r.error).count(), 1, "bail! marks only the failing call");
        gpu_timed("record");
        gpu_timed("step_async");
        // An encoder made in the body and handed over with `attach`: timed by its own query,
        // not by a bracket around the submission.
        for name in ["step_attached", "step_attached_async"] {
            for r in gpu_timed(name) {
                assert!(r.gpu.as_ref().is_some_and(|g| !g.bracketed), "{name} is timed by its query: {r:?}");
            }
        }
        let forward = gpu_timed("forward");
        // The async-trait body waits 20 ms before its work: the call's host interval covers it.
        assert!(
            forward[0].host.duration_ns() >= 20_000_000,
            "the #[async_trait] future is timed, not the boxing: {forward:?}"
        );
    }
}

/// The program, as its user runs it: `main` annotated, the block form in a loop, tokio tasks.
#[test]
fn the_program_prints_a_summary_and_respects_gpuspan_off() {
    if compute().is_none() {
        return;
    }
    let run = |off: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuspan-real-code"));
        cmd.env("GPUSPAN_TRACE_FILE", std::env::temp_dir().join("gpuspan-real-code-test.trace.json"));
        if off {
            cmd.env("GPUSPAN", "off");
        }
        let out = cmd.output().expect("run the program");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "the program failed: {stderr}");
        stderr
    };
    let on = run(false);
    let off = run(true);
    if cfg!(feature = "profile") {
        let row = |name: &str| on.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_default().to_owned();
        assert!(row("frame").contains("gpu_timestamp"), "the block form is GPU-timed:\n{on}");
        assert!(row("forward").contains("gpu_timestamp"), "{on}");
        assert!(on.contains("still running at shutdown") && on.contains("  main (kernel"), "{on}");
        assert!(!on.contains("never reached:\n  main"), "{on}");
        assert!(off.contains("gpuspan was off"), "{off}");
        assert!(!off.contains("never reached"), "{off}");
    } else {
        // Compiled out, the program says one line because GPUSPAN_TRACE_FILE asked for
        // something, and nothing when no GPUSPAN_* variable is set.
        let said: Vec<&str> = on.lines().filter(|l| l.contains("gpuspan")).collect();
        assert_eq!(said.len(), 1, "{on}");
        assert!(said[0].contains("GPUSPAN_TRACE_FILE set, but instrumentation is compiled out"), "{on}");
        let mut quiet = Command::new(env!("CARGO_BIN_EXE_gpuspan-real-code"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("GPUSPAN") {
                quiet.env_remove(k);
            }
        }
        let out = quiet.output().expect("run the program");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("gpuspan"), "nothing asked, nothing said: {stderr}");
    }
}
