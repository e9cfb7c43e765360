//! Device monitoring where no device library is there (CI, machines without a GPU driver): the
//! program runs on, says so in one message naming NVML and ROCm SMI, and nothing panics or
//! blocks. On a GPU machine the libraries are made missing on purpose (`GPUSPAN_NVML_LIBRARY` and
//! `GPUSPAN_ROCM_SMI_LIBRARY` pointing nowhere), so the test means the same everywhere.
#![cfg(feature = "nvml")]

use gpuspan::gpu_transfer;
use gpuspan::monitor::{self, MonitorConfig, MonitorError};
use gpuspan_testing::Capture;
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "GPUSPAN_MONITOR_TEST_CHILD";
const NOWHERE: &str = "/nonexistent/gpuspan-test/libnvidia-ml.so.1";
const NO_ROCM: &str = "/nonexistent/gpuspan-test/librocm_smi64.so";

#[gpu_transfer(direction = cpu_to_gpu, trace_all)]
fn upload(data: &[u8]) -> usize {
    data.len()
}

/// Runs in a child process (NVML is loaded once per process, so the missing library must be
/// the first thing this process tries).
#[test]
fn child_without_nvml() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let guard = gpuspan::Config::from_env().no_trace_file().init();
    let t = Instant::now();
    // `init()` already started the sampler (from the environment); a second start is refused.
    match MonitorConfig::from_env().interval(Duration::from_millis(10)).start() {
        Ok(()) | Err(MonitorError::AlreadyRunning) => {}
        Err(e) => panic!("the sampler does not start: {e}"),
    }
    println!("start returned after {:?}", t.elapsed());
    let e = monitor::ready(Duration::from_secs(10)).expect_err("no NVML here");
    assert!(matches!(e, MonitorError::LibraryMissing { .. }), "{e:?}");
    assert!(e.to_string().contains(NOWHERE) && e.to_string().contains(NO_ROCM), "both are named: {e}");
    // Asking again, or starting again, says nothing new.
    assert_eq!(gpuspan_testing::monitor::discover(), Err(e.clone()));
    let _ = MonitorConfig::from_env().start();
    let _ = monitor::ready(Duration::from_secs(10));
    assert!(monitor::ready(Duration::ZERO).is_err(), "no devices without NVML");
    assert!(monitor::latest(0).is_none() && monitor::history(0).is_empty());
    assert!(!gpuspan::summary().to_string().contains("devices (NVML"), "no device section without NVML");
    let capture = Capture::start();
    assert_eq!(upload(&[0u8; 4096]), 4096);
    gpuspan::flush();
    let record = capture.of("upload").pop().expect("recorded");
    assert!(record.attributes().iter().all(|(k, _)| !k.starts_with("gpu.device.") && !k.contains("link_efficiency")));
    // The sampler ends on its own when NVML is missing: stopping it finds it finished (within
    // `stop`'s own bound; no wall-clock assertion, which a busy machine could break).
    assert!(monitor::stop(), "the sampler had ended already");
    let stats = gpuspan_testing::monitor::sampler_stats().expect("a sampler was started");
    assert_eq!((stats.rounds, stats.devices, stats.running), (0, 0, false));
    drop(guard); // prints the summary, whose notes hold the message
}

#[test]
fn without_nvml_there_is_one_message_and_the_program_goes_on() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            &gpuspan_tests::test_path(module_path!(), "child_without_nvml"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("GPUSPAN_NVML_LIBRARY", NOWHERE)
        .env("GPUSPAN_ROCM_SMI_LIBRARY", NO_ROCM)
        .env_remove("GPUSPAN_MONITOR")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the child test did not run:\n{stdout}");
    assert!(!stderr.contains("panicked") && !stdout.contains("panicked"), "{stdout}\n{stderr}");
    let said = stderr.lines().filter(|l| l.starts_with("gpuspan: no GPU device library could be loaded")).count();
    assert_eq!(said, 1, "the absence is said once:\n{stderr}");
    assert!(stderr.contains("note: no GPU device library could be loaded"), "the summary keeps it:\n{stderr}");
    assert!(stderr.contains("LD_LIBRARY_PATH"), "the message says what to do:\n{stderr}");
    assert!(stderr.contains("GPUSPAN_ROCM_SMI_LIBRARY"), "for AMD GPUs too:\n{stderr}");
}

#[test]
fn a_second_sampler_is_refused_while_one_runs() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    // Whatever this machine has, the first start succeeds (the thread finds NVML or not), and
    // while its thread has not ended a second start is refused.
    MonitorConfig::default().start().expect("first start");
    match MonitorConfig::default().start() {
        Err(MonitorError::AlreadyRunning) | Ok(()) => {} // Ok: the first ended already (no NVML)
        Err(e) => panic!("unexpected {e}"),
    }
    assert!(monitor::stop());
    let stats = gpuspan_testing::monitor::sampler_stats().expect("started");
    assert!(!stats.running);
}
