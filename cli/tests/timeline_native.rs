//! `gpuspan timeline --format perfetto` (issue 42): the native Perfetto trace decoded with
//! Perfetto's own compiled schema (`perfetto_trace_pb2` from its Python package, installed by
//! scripts/sql-clients) carries the same timeline as the JSON one, to the nanosecond: every
//! slice on its track under its process, every flow from a call to its GPU work, every counter
//! value; its names are interned and its packets say so.

mod common;

#[path = "common/perfetto.rs"]
mod perfetto;

use common::{gpuspan, scratch};
use perfetto::decode;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// Both timelines of the same captures: (JSON document, decoded native trace).
fn both(command: &str, captures: &[PathBuf], name: &str) -> (Value, Value) {
    let json_out = scratch(&format!("{name}.json"));
    let native_out = scratch(&format!("{name}.pftrace"));
    for (out, format) in [(&json_out, "json"), (&native_out, "perfetto")] {
        let mut args: Vec<String> = vec![command.into()];
        args.extend(captures.iter().map(|c| c.display().to_string()));
        args.extend(["-o".into(), out.display().to_string(), "--format".into(), format.into()]);
        let (code, _, stderr) = gpuspan(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
    }
    let json: Value = serde_json::from_slice(&std::fs::read(&json_out).unwrap()).unwrap();
    (json, decode(&native_out))
}

/// A slice as both formats can state it: (process name, track name, name, category, start
/// ns, end ns), the JSON's microseconds turned back to ns against its base.
type Key = (String, String, String, String, u64, u64);

/// A timeline as the tests compare it: slices with their arguments, flows as pairs of slice
/// keys, counter values as (process, "track [unit]", time, value).
type Timeline = (Vec<(Key, Value)>, Vec<(Key, Key)>, Vec<(String, String, u64, f64)>);

/// The JSON timeline's slices, flows (as pairs of slice keys) and counters.
fn from_json(doc: &Value) -> Timeline {
    let base = doc["otherData"]["epoch_base_ns"].as_u64().unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let mut process = BTreeMap::new();
    let mut thread = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let pid = e["pid"].as_u64().unwrap();
        match e["name"].as_str().unwrap() {
            "process_name" => drop(process.insert(pid, e["args"]["name"].as_str().unwrap().to_owned())),
            "thread_name" => {
                drop(thread.insert((pid, e["tid"].as_u64().unwrap()), e["args"]["name"].as_str().unwrap().to_owned()))
            }
            _ => {}
        }
    }
    // The JSON's times are microseconds as f64: ns to within rounding.
    let ns = |v: &Value| base + (v.as_f64().unwrap() * 1000.0).round() as u64;
    let mut slices = Vec::new();
    let mut by_place = BTreeMap::new();
    let mut starts = BTreeMap::new();
    let mut flows = Vec::new();
    for e in events {
        let pid = e["pid"].as_u64().unwrap_or(0);
        let track = || thread.get(&(pid, e["tid"].as_u64().unwrap())).cloned().unwrap_or_default();
        match e["ph"].as_str().unwrap() {
            "X" => {
                let start = ns(&e["ts"]);
                let key: Key = (
                    process[&pid].clone(),
                    track(),
                    e["name"].as_str().unwrap().to_owned(),
                    e["cat"].as_str().unwrap().to_owned(),
                    start,
                    start + (e["dur"].as_f64().unwrap() * 1000.0).round() as u64,
                );
                by_place.insert((pid, e["tid"].as_u64().unwrap(), e["ts"].to_string()), key.clone());
                slices.push((key, e["args"].clone()));
            }
            "s" => {
                drop(starts.insert(
                    e["id"].as_str().unwrap().to_owned(),
                    (pid, e["tid"].as_u64().unwrap(), e["ts"].to_string()),
                ))
            }
            "f" => {
                let from = &by_place[&starts[e["id"].as_str().unwrap()]];
                let to = &by_place[&(pid, e["tid"].as_u64().unwrap(), e["ts"].to_string())];
                flows.push((from.clone(), to.clone()));
            }
            _ => {}
        }
    }
    let counters = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            let (unit, v) = e["args"].as_object().unwrap().iter().next().unwrap();
            (
                process[&e["pid"].as_u64().unwrap()].clone(),
                format!("{} [{unit}]", e["name"].as_str().unwrap()),
                ns(&e["ts"]),
                v.as_f64().unwrap(),
            )
        })
        .collect();
    (slices, flows, counters)
}

/// The decoded native trace's slices, flows and counters in the same shapes.
fn from_native(t: &Value) -> Timeline {
    let s = |v: &Value| v.as_str().unwrap().to_owned();
    let slices: Vec<(Key, Value)> = t["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let cats = x[3].as_array().unwrap();
            assert_eq!(cats.len(), 1, "one category per slice: {x}");
            ((s(&x[0]), s(&x[1]), s(&x[2]), s(&cats[0]), x[4].as_u64().unwrap(), x[5].as_u64().unwrap()), x[6].clone())
        })
        .collect();
    let flows = t["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (slices[f[0].as_u64().unwrap() as usize].0.clone(), slices[f[1].as_u64().unwrap() as usize].0.clone()))
        .collect();
    let counters = t["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (s(&c[0]), format!("{} [{}]", s(&c[1]), s(&c[2])), c[3].as_u64().unwrap(), c[4].as_f64().unwrap()))
        .collect();
    (slices, flows, counters)
}

/// The JSON's arguments as the native trace states them (null values are left out there).
fn without_nulls(args: &Value) -> Value {
    match args {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        other => other.clone(),
    }
}

/// Asserts that the two timelines are the same; the JSON's times may be off by the rounding of
/// its microseconds (≤ 1 ns), the native trace's are exact.
fn assert_same(json: &Value, native: &Value) {
    let (mut js, mut jf, mut jc) = from_json(json);
    let (mut ns, mut nf, mut nc) = from_native(native);
    assert!(!js.is_empty(), "the capture has slices");
    assert_eq!(native["unmatched_flows"], 0, "every flow that starts ends");
    let close = |a: u64, b: u64| a.abs_diff(b) <= 1;
    for v in [&mut js, &mut ns] {
        v.sort_by(|a, b| a.0.cmp(&b.0));
    }
    assert_eq!(js.len(), ns.len(), "as many slices");
    for ((jk, ja), (nk, na)) in js.iter().zip(&ns) {
        assert_eq!((&jk.0, &jk.1, &jk.2, &jk.3), (&nk.0, &nk.1, &nk.2, &nk.3), "same slice in place");
        assert!(close(jk.4, nk.4) && close(jk.5, nk.5), "same times: {jk:?} vs {nk:?}");
        let ja = without_nulls(ja);
        for (k, v) in ja.as_object().unwrap() {
            let n = &na[k];
            let same = match (v.as_f64(), n.as_f64()) {
                (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                _ => v == n,
            };
            assert!(same, "argument {k} of {jk:?}: {v} vs {n}");
        }
        assert_eq!(
            ja.as_object().unwrap().len(),
            na.as_object().unwrap().len(),
            "same arguments of {jk:?}: {ja} vs {na}"
        );
    }
    let coarse = |k: &Key| (k.0.clone(), k.1.clone(), k.2.clone(), k.4 / 1000);
    let mut jf: Vec<_> = jf.drain(..).map(|(a, b)| (coarse(&a), coarse(&b))).collect();
    let mut nf: Vec<_> = nf.drain(..).map(|(a, b)| (coarse(&a), coarse(&b))).collect();
    jf.sort();
    nf.sort();
    assert_eq!(jf, nf, "the same flows");
    for v in [&mut jc, &mut nc] {
        v.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)).then(a.3.total_cmp(&b.3)));
    }
    assert_eq!(jc.len(), nc.len(), "as many counter values");
    for (j, n) in jc.iter().zip(&nc) {
        assert!(j.0 == n.0 && j.1 == n.1 && close(j.2, n.2) && j.3 == n.3, "counter {j:?} vs {n:?}");
    }
}

#[test]
fn the_native_trace_decodes_with_perfettos_schema_and_equals_the_json_timeline() {
    for fixture in ["lavapipe_demo.gpuspan", "h100_cuda_saxpy.gpuspan", "h100_multi_gpu_nvml.gpuspan"] {
        let path = Path::new(FIXTURES).join(fixture);
        let (json, native) = both("timeline", &[path], fixture);
        assert_same(&json, &native);
        let facts = &native["facts"];
        assert_eq!(facts["sequences"], serde_json::json!([1]), "one packet sequence");
        assert_eq!(facts["first_flags"], 1, "the first event packet clears the incremental state");
        let names: std::collections::BTreeSet<&str> =
            native["slices"].as_array().unwrap().iter().map(|s| s[2].as_str().unwrap()).collect();
        assert_eq!(facts["interned_names"], names.len(), "each name interned once");
        let labels = native["process_labels"].as_object().unwrap();
        assert!(labels.values().all(|l| l[0].as_str().unwrap().starts_with("GPU clock mapping error")), "{labels:?}");
    }
}

#[test]
fn the_cuda_capture_has_flows_counters_and_device_tracks_in_the_native_trace() {
    let path = Path::new(FIXTURES).join("h100_multi_gpu_nvml.gpuspan");
    let (_, native) = both("timeline", &[path], "multi-flows");
    assert!(!native["flows"].as_array().unwrap().is_empty(), "flows from calls to their GPU work");
    let counters = native["counters"].as_array().unwrap();
    assert!(counters.iter().any(|c| c[1].as_str().unwrap().contains("work in flight")), "derived counters");
    assert!(counters.iter().any(|c| c[1].as_str().unwrap().contains("utilization")), "the monitor's readings");
    let tracks: std::collections::BTreeSet<&str> =
        native["slices"].as_array().unwrap().iter().map(|s| s[1].as_str().unwrap()).collect();
    assert!(tracks.iter().any(|t| t.contains("stream")), "stream tracks: {tracks:?}");
    assert!(tracks.iter().any(|t| t.ends_with("calls")), "device call tracks: {tracks:?}");
}

#[test]
fn a_merge_of_two_captures_is_two_processes_in_the_native_trace_too() {
    let a = Path::new(FIXTURES).join("lavapipe_demo.gpuspan");
    let b = Path::new(FIXTURES).join("h100_cuda_saxpy.gpuspan");
    let (json, native) = both("merge", &[a, b], "merged");
    assert_same(&json, &native);
    assert_eq!(native["process_labels"].as_object().unwrap().len(), 2);
}

/// An instrumented wgpu device's memory (capture format 9) is one counter track, named as the
/// runtime's own timeline names it, with every sample, in both formats alike.
#[test]
fn a_wgpu_memory_account_is_a_counter_track_in_both_formats() {
    let c = common::memory_capture();
    let path = common::save(&c, "memory-timeline.gpuspan");
    let (json, native) = both("timeline", &[path], "memory-timeline");
    assert_same(&json, &native);
    let name = gpuspan_capture::MemoryAccount::track_name(2);
    assert_eq!(name, "GPU memory, logical bytes (wgpu device 2)");
    let values: Vec<u64> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == name.as_str())
        .map(|e| e["args"]["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(values, c.memory[0].samples.iter().map(|s| s.bytes).collect::<Vec<_>>());
}
