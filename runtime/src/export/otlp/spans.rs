//! Sampled records as OpenTelemetry spans with their own clocks: the host span (when the
//! function ran on the CPU), its child the GPU span (when the GPU ran the work, from GPU
//! timestamps), and one grandchild per kernel or copy.
//!
//! gpuspan builds these itself, with explicit start and end times, instead of letting a
//! tracing-opentelemetry layer export its host `tracing` spans: the layer would export every
//! call (a million fast calls, a million spans) and would close the host span before the GPU
//! timing is known, so sampling on GPU time could leave GPU spans without their parent.

use super::queue::Queue;
use crate::pipeline::Sink;
use crate::record::{Activity, ActivityKind, Record, Value};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, StringValue};
use opentelemetry_sdk::trace::SdkTracer;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `gpuspan.role` of each span: lets a query pick the GPU spans without parsing names.
const ROLE: &str = "gpuspan.role";

pub(super) struct SpansSink {
    tracer: SdkTracer,
    queue: Arc<Queue>,
    /// The parent of spans with no enclosing exported span: the `TRACEPARENT` context.
    process_parent: Option<Context>,
}

impl std::fmt::Debug for SpansSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpansSink").field("process_parent", &self.process_parent.is_some()).finish()
    }
}

/// Maps gpuspan's clock onto the wall clock.
///
/// Records are on gpuspan's clock: Unix-epoch nanoseconds advanced by the monotonic clock from
/// one reading of the wall clock at start, so intervals never go backwards. OpenTelemetry time
/// is wall-clock time, and so are the application's spans (tracing-opentelemetry reads
/// `SystemTime`): once the wall clock has been slewed or stepped (NTP), unmapped spans would
/// drift out of their parents. The offset is taken when the record is exported, moments after
/// it was measured, and shifts all of a record's times alike, so every duration and every gap
/// between host, GPU and activity times stays exactly as measured.
#[derive(Debug, Clone, Copy)]
struct WallClock {
    offset_ns: i128,
}

impl WallClock {
    fn now() -> Self {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        WallClock { offset_ns: wall - i128::from(crate::clock::now_ns()) }
    }

    fn at(self, ns: u64) -> SystemTime {
        let mapped = (i128::from(ns) + self.offset_ns).clamp(0, i128::from(u64::MAX)) as u64;
        UNIX_EPOCH + Duration::from_nanos(mapped)
    }
}

fn value(v: Value) -> opentelemetry::Value {
    match v {
        Value::Str(s) => opentelemetry::Value::String(StringValue::from(s.into_owned())),
        Value::I64(i) => i.into(),
        Value::F64(f) => f.into(),
        Value::Bool(b) => b.into(),
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn dims(d: [u32; 3]) -> opentelemetry::Value {
    opentelemetry::Value::Array(d.iter().map(|x| i64::from(*x)).collect::<Vec<_>>().into())
}

impl SpansSink {
    pub(super) fn new(tracer: SdkTracer, queue: Arc<Queue>, process_parent: Option<Context>) -> Self {
        SpansSink { tracer, queue, process_parent }
    }

    /// The attributes of the record (DESIGN.md names) plus the sampling verdict.
    fn record_attributes(record: &Record) -> Vec<KeyValue> {
        let mut a: Vec<KeyValue> = record.attributes().into_iter().map(|(k, v)| KeyValue::new(k, value(v))).collect();
        let threshold = crate::sampling::threshold_ns(record.site);
        a.push(KeyValue::new("gpu.threshold_us", us(threshold)));
        a.push(KeyValue::new("gpu.is_slow", record.duration_ns() >= threshold));
        a
    }

    fn activity_attributes(record: &Record, act: &Activity) -> Vec<KeyValue> {
        let mut a = vec![
            KeyValue::new(ROLE, "activity"),
            KeyValue::new("gpu.backend", record.backend().as_str()),
            KeyValue::new("gpu.timing.source", record.source().as_str()),
        ];
        let d = act.interval.duration_ns();
        match &act.kind {
            ActivityKind::Kernel(g) => {
                a.push(KeyValue::new("gpu.kernel", act.name.to_string()));
                a.push(KeyValue::new("gpu.duration_us", us(d)));
                a.push(KeyValue::new("gpu.cuda.grid_dim", dims(g.grid)));
                a.push(KeyValue::new("gpu.cuda.block_dim", dims(g.block)));
                a.push(KeyValue::new("gpu.cuda.registers_per_thread", i64::from(g.registers_per_thread)));
                a.push(KeyValue::new(
                    "gpu.cuda.shared_mem_bytes",
                    i64::from(g.static_shared_bytes) + i64::from(g.dynamic_shared_bytes),
                ));
            }
            ActivityKind::Copy { bytes, direction, src, dst } => {
                a.push(KeyValue::new("gpu_transfer.bytes", *bytes as i64));
                a.push(KeyValue::new("gpu_transfer.duration_us", us(d)));
                if d > 0 {
                    a.push(KeyValue::new("gpu_transfer.bandwidth_bytes_per_s", *bytes as f64 * 1e9 / d as f64));
                }
                if let Some(dir) = direction {
                    a.push(KeyValue::new("gpu_transfer.direction", dir.as_str()));
                }
                a.push(KeyValue::new("gpu_transfer.src_kind", src.as_str()));
                a.push(KeyValue::new("gpu_transfer.dst_kind", dst.as_str()));
            }
            ActivityKind::Set { bytes } => {
                a.push(KeyValue::new("gpu_transfer.bytes", *bytes as i64));
                a.push(KeyValue::new("gpu_transfer.duration_us", us(d)));
            }
        }
        if let Some(s) = act.stream {
            a.push(KeyValue::new("gpu.cuda.stream_id", s as i64));
        }
        let device = act.device.as_ref().or_else(|| record.gpu.as_ref().and_then(|g| g.device.as_ref()));
        if let Some(dev) = device {
            a.push(KeyValue::new("gpu.device.id", i64::from(dev.id)));
            a.push(KeyValue::new("gpu.device.name", dev.name.to_string()));
        }
        a
    }

    /// Ends the spans of one record. They are admitted to the export queue together or not
    /// at all, so the collector never gets a GPU span without its host span.
    pub(super) fn export(&self, record: &Record) {
        let n = 1 + usize::from(record.gpu.is_some()) + record.activities.len();
        if !self.queue.reserve(n) {
            return;
        }
        let parent = record.parent.clone().or_else(|| self.process_parent.clone()).unwrap_or_default();
        let time = WallClock::now();
        let name = record.site.desc.name;
        let attrs = Self::record_attributes(record);

        let mut host_attrs = attrs.clone();
        host_attrs.push(KeyValue::new(ROLE, "host"));
        let host = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(time.at(record.host.start_ns))
            .with_attributes(host_attrs)
            .start_with_context(&self.tracer, &parent);
        let host_cx = parent.with_span(host);
        if record.error {
            host_cx.span().set_status(Status::error("the call returned an error or panicked"));
        }

        let gpu_cx = record.gpu.as_ref().map(|g| {
            let mut gpu_attrs = attrs;
            gpu_attrs.push(KeyValue::new(ROLE, "gpu"));
            let span = self
                .tracer
                .span_builder(format!("{name} [gpu]"))
                .with_kind(SpanKind::Internal)
                .with_start_time(time.at(g.interval.start_ns))
                .with_attributes(gpu_attrs)
                .start_with_context(&self.tracer, &host_cx);
            host_cx.with_span(span)
        });

        let activity_parent = gpu_cx.as_ref().unwrap_or(&host_cx);
        for act in &record.activities {
            let mut span = self
                .tracer
                .span_builder(act.name.to_string())
                .with_kind(SpanKind::Internal)
                .with_start_time(time.at(act.interval.start_ns))
                .with_attributes(Self::activity_attributes(record, act))
                .start_with_context(&self.tracer, activity_parent);
            span.end_with_timestamp(time.at(act.interval.end_ns));
        }
        if let (Some(cx), Some(g)) = (&gpu_cx, &record.gpu) {
            cx.span().end_with_timestamp(time.at(g.interval.end_ns));
        }
        host_cx.span().end_with_timestamp(time.at(record.host.end_ns));
        self.queue.release_unused();
    }
}

impl Sink for SpansSink {
    fn accept(&self, record: &Record) {
        self.export(record);
    }
}
