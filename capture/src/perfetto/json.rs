//! The timeline as Chrome Trace Event JSON, streamed one event per line.

use super::{Flow, Sink, Slice};
use serde_json::{json, Number, Value};
use std::io::{self, Write};

/// Writes the events as they come; times are microseconds since the earliest instant.
pub struct Json<W: Write> {
    out: W,
    first: bool,
    base: u64,
}

impl<W: Write> Json<W> {
    pub fn new(out: W) -> Json<W> {
        Json { out, first: true, base: 0 }
    }

    fn push(&mut self, event: &Value) -> io::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.out.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut self.out, event).map_err(io::Error::from)
    }

    /// Microseconds since the earliest instant, as the format wants (f64 keeps ns precision
    /// for hours).
    fn us(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.base) as f64 / 1000.0
    }
}

impl<W: Write> Sink for Json<W> {
    fn start(&mut self, base: u64) -> io::Result<()> {
        self.base = base;
        self.out.write_all(b"{\"traceEvents\":[\n")
    }

    fn process(&mut self, pid: u64, name: &str, labels: &str) -> io::Result<()> {
        self.push(&json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}))?;
        self.push(&json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}))?;
        self.push(&json!({"ph": "M", "name": "process_labels", "pid": pid, "args": {"labels": labels}}))
    }

    fn slice(&mut self, s: Slice<'_>) -> io::Result<()> {
        let ts = self.us(s.start_ns);
        let dur = s.end_ns.saturating_sub(s.start_ns) as f64 / 1000.0;
        let mut args = s.args;
        if let Value::Object(map) = &mut args {
            for (k, v) in s.extra {
                map.entry(k.as_str()).or_insert_with(|| v.clone());
            }
        }
        self.push(&json!({"ph": "X", "name": s.name, "cat": s.category, "pid": s.pid, "tid": s.tid,
            "ts": ts, "dur": dur, "args": args}))?;
        match s.flow {
            Flow::None => Ok(()),
            Flow::Start((pid, scope)) => self
                .push(&json!({"ph": "s", "id": format!("{pid}:{scope}"), "name": "launch",
                "cat": "gpuspan.flow", "pid": s.pid, "tid": s.tid, "ts": ts})),
            Flow::End((pid, scope)) => self.push(&json!({"ph": "f", "bp": "e", "id": format!("{pid}:{scope}"),
                "name": "launch", "cat": "gpuspan.flow", "pid": s.pid, "tid": s.tid, "ts": ts})),
        }
    }

    fn track_name(&mut self, pid: u64, tid: u64, name: &str) -> io::Result<()> {
        self.push(&json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}))
    }

    fn counter(&mut self, pid: u64, name: &str, unit: &str, time_ns: u64, value: Number) -> io::Result<()> {
        self.push(&json!({"ph": "C", "name": name, "pid": pid, "ts": self.us(time_ns), "args": {unit: value}}))
    }

    fn finish(&mut self, sources: Vec<Value>) -> io::Result<()> {
        self.out.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        let other = json!({"generator": "gpuspan", "epoch_base_ns": self.base, "captures": sources});
        serde_json::to_writer(&mut self.out, &other)?;
        self.out.write_all(b"}\n")?;
        self.out.flush()
    }
}
