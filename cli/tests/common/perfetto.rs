//! Decoding a native Perfetto trace with Perfetto's own schema, for the CLI's tests and the
//! runtime's (`tests/tests/wgpu/timeline_perfetto.rs` loads this file by path).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The Python with Perfetto's package (scripts/sql-clients' venv, or GPUSPAN_TEST_PYTHON).
pub fn python() -> String {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/sql-clients/venv/bin/python");
    let p = std::env::var("GPUSPAN_TEST_PYTHON").unwrap_or_else(|_| venv.to_owned());
    let ok = Command::new(&p)
        .args(["-c", "from perfetto.protos.perfetto.trace import perfetto_trace_pb2"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Python with Perfetto's package at {p}: run scripts/sql-clients install (or set GPUSPAN_TEST_PYTHON)"
    );
    p
}

/// The decoder: slices `[process, track, name, [categories], start, end, args]`, flows as
/// pairs of slice indexes, counters `[process, track, unit, time, value]`, the sequence's facts.
const DECODE: &str = include_str!("perfetto_decode.py");

/// Decodes a native trace into the decoder's JSON.
pub fn decode(trace: &Path) -> Value {
    let out = Command::new(python()).args(["-c", DECODE]).arg(trace).output().expect("python runs");
    assert!(out.status.success(), "decoding {}: {}", trace.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the decoder printed JSON")
}
