//! NVTX end to end, the way Nsight attaches: a tool compiled from C (`tests/fixtures/nvtx/
//! stub_tool.c`, with the `cc` that links Rust here) is named by `NVTX_INJECTION64_PATH`;
//! gpuspan loads it at the first scope and every call of an annotated function becomes a range
//! in the `gpuspan` domain, an async one a range per poll. Its own binary: the variable is read
//! once per process.
#![cfg(feature = "nvtx")]

use gpuspan::gpu_kernel;
use std::path::PathBuf;
use std::process::Command;

#[gpu_kernel]
fn step(x: u64) -> u64 {
    x + 1
}

#[gpu_kernel(name = "later")]
async fn later(x: u64) -> u64 {
    tokio::task::yield_now().await;
    x * 2
}

/// The stub tool, built into a fresh directory.
fn build_tool() -> Result<(PathBuf, PathBuf), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("gpuspan-nvtx-tool-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/nvtx/stub_tool.c");
    let library = dir.join("libstub_tool.so");
    let status = Command::new("cc").arg("-shared").arg("-fPIC").arg("-o").arg(&library).arg(&source).status()?;
    if !status.success() {
        return Err(format!("cc failed on {}: {status}", source.display()).into());
    }
    Ok((library, dir.join("calls.log")))
}

#[test]
fn a_tool_named_by_nvtx_injection64_path_sees_every_call_as_a_range() -> Result<(), Box<dyn std::error::Error>> {
    let (library, log) = build_tool()?;
    std::env::set_var("NVTX_INJECTION64_PATH", &library);
    std::env::set_var("STUB_LOG", &log);
    let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
    assert_eq!(step(1) + step(2), 5);
    let lines = std::fs::read_to_string(&log)?;
    let lines: Vec<&str> = lines.lines().collect();
    let push = "push gpuspan v3 size 48 type 3 step";
    assert_eq!(
        lines,
        ["init ok", "create gpuspan", "register gpuspan step", push, "pop gpuspan", push, "pop gpuspan"],
        "attached once, the name registered once, one range a call"
    );

    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    assert_eq!(runtime.block_on(later(4)), 8);
    drop(guard);
    let all = std::fs::read_to_string(&log)?;
    let ranges: Vec<&str> = all.lines().skip(lines.len()).filter(|l| *l != "register gpuspan later").collect();
    // The future is polled twice (it yields once); its range is pushed and popped around each
    // poll, and never left open while it is suspended.
    let pushes = ranges.iter().filter(|l| **l == "push gpuspan v3 size 48 type 3 later").count();
    assert!(pushes >= 2, "{ranges:?}");
    for pair in ranges.chunks(2) {
        assert_eq!(pair, ["push gpuspan v3 size 48 type 3 later", "pop gpuspan"], "{ranges:?}");
    }
    let notes = gpuspan::summary().notes;
    assert!(!notes.iter().any(|n| n.contains("NVTX")), "{notes:?}");
    let _ = std::fs::remove_dir_all(library.parent().unwrap_or(&library));
    Ok(())
}
