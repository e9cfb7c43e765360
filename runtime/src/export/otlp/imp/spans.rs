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
use crate::record::{Activity, Record, Value};
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

/// An attribute value as OpenTelemetry takes it.
pub(super) fn value(v: Value) -> opentelemetry::Value {
    match v {
        Value::Str(s) => opentelemetry::Value::String(StringValue::from(s.into_owned())),
        Value::I64(i) => i.into(),
        Value::F64(f) => f.into(),
        Value::Bool(b) => b.into(),
        Value::I64Array(v) => opentelemetry::Value::Array(v.into()),
    }
}

impl SpansSink {
    pub(super) fn new(tracer: SdkTracer, queue: Arc<Queue>, process_parent: Option<Context>) -> Self {
        SpansSink { tracer, queue, process_parent }
    }

    /// The attributes of the record: the mapping every sink uses.
    fn record_attributes(record: &Record) -> Vec<KeyValue> {
        record.attributes().into_iter().map(|(k, v)| KeyValue::new(k, value(v))).collect()
    }

    /// The attributes of one kernel or copy (the mapping every sink uses) plus its role.
    fn activity_attributes(record: &Record, act: &Activity) -> Vec<KeyValue> {
        let mut a = vec![KeyValue::new(ROLE, "activity")];
        a.extend(act.attributes(record).into_iter().map(|(k, v)| KeyValue::new(k, value(v))));
        a
    }

    /// Ends the spans of one record. They are admitted to the export queue together or not
    /// at all, so the collector never gets a GPU span without its host span.
    ///
    /// A selected span's record (`span_scopes.rs`) makes no host span: the application's span
    /// is the host span (the OpenTelemetry layer exports it), so its GPU span and kernels are
    /// children of the user's span. A host-timed one makes no span at all.
    pub(super) fn export(&self, record: &Record) {
        let own_host = !record.site.is_span();
        let n = usize::from(own_host) + usize::from(record.gpu.is_some()) + record.activities.len();
        if n == 0 || !self.queue.reserve(n) {
            return;
        }
        let parent = record.parent.clone().or_else(|| self.process_parent.clone()).unwrap_or_default();
        let time = WallClock::now();
        let name = record.site.desc.name;
        let attrs = Self::record_attributes(record);

        let host_cx = if own_host {
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
            host_cx
        } else {
            parent
        };

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
        if own_host {
            host_cx.span().end_with_timestamp(time.at(record.host.end_ns));
        }
        self.queue.release_unused();
    }
}

impl Sink for SpansSink {
    fn accept(&self, record: &Record) {
        self.export(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::timeline::tests::write_events;
    use crate::record::{ActivityKind, DeviceLabel, GpuTiming, Interval, KernelGeometry, MemoryKind, TimingSource};
    use crate::site::{Backend, Direction, Site, SiteDesc, SiteKind};
    use serde_json::{json, Value as Json};
    use std::collections::BTreeMap;

    static SITE: Site = Site::new(SiteDesc {
        threshold_us: Some(50),
        trace_all: true,
        ..crate::site::site_desc!("step", SiteKind::Kernel, Backend::Cuda)
    });

    /// A CUDA call with a kernel on a stream and a copy that names no device of its own.
    fn record() -> Record {
        let t = 1_763_000_000_000_000_000;
        let dev = DeviceLabel::new(3, "Test GPU");
        let mut r = Record::new(&SITE, 9, 1, Interval { start_ns: t, end_ns: t + 20_000 });
        let mut gpu = GpuTiming::new(Interval { start_ns: t + 30_000, end_ns: t + 230_000 }, TimingSource::Cupti);
        gpu.busy_ns = 190_000;
        gpu.device = Some(dev.clone());
        r.gpu = Some(gpu);
        let mut geometry = KernelGeometry::default();
        (geometry.grid, geometry.block, geometry.registers_per_thread) = ([64, 32, 1], [256, 1, 1], 96);
        (geometry.static_shared_bytes, geometry.dynamic_shared_bytes) = (16384, 1024);
        let mut kernel = Activity::new(
            "sgemm_128x64",
            Interval { start_ns: t + 30_000, end_ns: t + 170_000 },
            ActivityKind::Kernel(geometry),
        );
        (kernel.stream, kernel.device) = (Some(7), Some(dev));
        let copy = ActivityKind::Copy {
            bytes: 1 << 20,
            direction: Some(Direction::GpuToCpu),
            src: MemoryKind::Device,
            dst: MemoryKind::Pinned,
        };
        r.activities =
            vec![kernel, Activity::new("memcpy DtoH", Interval { start_ns: t + 180_000, end_ns: t + 230_000 }, copy)];
        r
    }

    fn json_of(v: &opentelemetry::Value) -> Json {
        match v {
            opentelemetry::Value::Bool(b) => json!(b),
            opentelemetry::Value::I64(i) => json!(i),
            opentelemetry::Value::F64(f) => json!(f),
            opentelemetry::Value::String(s) => json!(s.as_str()),
            opentelemetry::Value::Array(opentelemetry::Array::I64(a)) => json!(a),
            other => panic!("no attribute of this type is made: {other:?}"),
        }
    }

    /// The span's attributes as the timeline writes them, without the span's role.
    fn span_args(attributes: Vec<KeyValue>) -> BTreeMap<String, Json> {
        attributes
            .iter()
            .filter(|kv| kv.key.as_str() != ROLE)
            .map(|kv| (kv.key.to_string(), json_of(&kv.value)))
            .collect()
    }

    #[test]
    fn the_timeline_and_the_spans_carry_the_same_attributes_for_the_same_record() {
        let r = record();
        let mut out = Vec::new();
        write_events(std::slice::from_ref(&r), &mut out).expect("timeline");
        let json: Json = serde_json::from_slice(&out).expect("valid JSON");
        let events = json["traceEvents"].as_array().expect("events");
        let args = |cat: &str, name: &str| -> BTreeMap<String, Json> {
            let e = events.iter().find(|e| e["ph"] == "X" && e["cat"] == cat && e["name"] == name);
            let e = e.unwrap_or_else(|| panic!("a {cat} event named {name}"));
            e["args"].as_object().expect("args").iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };

        let call = span_args(SpansSink::record_attributes(&r));
        assert_eq!(args("kernel", "step"), call, "host event vs host span");
        assert_eq!(args("gpu.kernel", "step"), call, "GPU event vs GPU span");
        for act in &r.activities {
            let span = span_args(SpansSink::activity_attributes(&r, act));
            assert_eq!(args("gpu.activity", &act.name), span, "{}", act.name);
        }

        // What the timeline used to leave out of its activity events.
        let kernel = args("gpu.activity", "sgemm_128x64");
        assert_eq!(kernel["gpu.kernel"], json!("sgemm_128x64"));
        assert_eq!(kernel["gpu.duration_us"], json!(140.0));
        assert_eq!(kernel["gpu.backend"], json!("cuda"));
        assert_eq!(kernel["gpu.timing.source"], json!("cupti"));
        assert_eq!(kernel["gpu.cuda.grid_dim"], json!([64, 32, 1]));
        assert_eq!(kernel["gpu.cuda.shared_mem_bytes"], json!(17408));
        assert_eq!((&kernel["gpu.device.id"], &kernel["gpu.device.name"]), (&json!(3), &json!("Test GPU")));
        let copy = args("gpu.activity", "memcpy DtoH");
        assert_eq!(copy["gpu_transfer.bandwidth_bytes_per_s"], json!((1u64 << 20) as f64 * 1e9 / 50_000.0));
        assert_eq!(copy["gpu.device.id"], json!(3), "the call's device when the copy names none");
        assert_eq!((&call["gpu.threshold_us"], &call["gpu.is_slow"]), (&json!(50.0), &json!(true)));
    }
}
