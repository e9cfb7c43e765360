//! Who is exporting: the OpenTelemetry resource (service, host, process, GPUs, rank) and the
//! W3C `TRACEPARENT` this process was started under.

use crate::otlp::OtlpConfig;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::resource::{ResourceDetector, TelemetryResourceDetector};
use opentelemetry_sdk::Resource;
use std::collections::HashMap;

/// The resource every span and metric of this process carries.
///
/// Precedence, lowest first: what gpuspan detects, then `OTEL_RESOURCE_ATTRIBUTES` and
/// [`OtlpConfig::resource_attribute`], then the service name from the builder or
/// `OTEL_SERVICE_NAME`.
pub(super) fn build(config: &OtlpConfig, report: &mut dyn FnMut(String)) -> Resource {
    let mut attrs: Vec<KeyValue> =
        TelemetryResourceDetector.detect().iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
    attrs.extend(host());
    attrs.extend(process());
    attrs.extend(gpus());
    attrs.extend(rank(report));
    let mut service = config.service_name.clone();
    for (k, v) in &config.resource {
        if k == "service.name" && service.is_none() {
            service = Some(v.clone());
        } else {
            attrs.push(KeyValue::new(k.clone(), v.clone()));
        }
    }
    let service = service.unwrap_or_else(program_name);
    Resource::builder_empty().with_attributes(attrs).with_service_name(service).build()
}

/// The binary's file name, which is what a person looking for this process would search for.
fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown_service:gpuspan".to_owned())
}

fn host() -> Vec<KeyValue> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .filter(|s| !s.is_empty());
    // Semantic-convention spelling of the architectures.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "x86",
        other => other,
    };
    let mut v = vec![KeyValue::new("host.arch", arch), KeyValue::new("os.type", std::env::consts::OS)];
    if let Some(name) = name {
        v.push(KeyValue::new("host.name", name));
    }
    v
}

/// The process, without its arguments: they can hold secrets.
fn process() -> Vec<KeyValue> {
    let mut v = vec![
        KeyValue::new("process.pid", i64::from(std::process::id())),
        KeyValue::new("process.runtime.name", "rust"),
    ];
    if let Ok(exe) = std::env::current_exe() {
        if let Some(name) = exe.file_name() {
            v.push(KeyValue::new("process.executable.name", name.to_string_lossy().into_owned()));
        }
        v.push(KeyValue::new("process.executable.path", exe.to_string_lossy().into_owned()));
    }
    v
}

/// GPUs the NVIDIA driver reports on this host, read from `/proc` so that no GPU library is
/// loaded just to name them. Spans also carry the device they ran on (`gpu.device.*`).
fn gpus() -> Vec<KeyValue> {
    let Ok(dir) = std::fs::read_dir("/proc/driver/nvidia/gpus") else { return Vec::new() };
    let mut found: Vec<(String, String)> = dir
        .filter_map(Result::ok)
        .filter_map(|e| {
            let info = std::fs::read_to_string(e.path().join("information")).ok()?;
            let model = info.lines().find_map(|l| l.strip_prefix("Model:"))?.trim().to_owned();
            Some((e.file_name().to_string_lossy().into_owned(), model))
        })
        .collect();
    if found.is_empty() {
        return Vec::new();
    }
    found.sort();
    let names: Vec<opentelemetry::StringValue> = found.iter().map(|(_, m)| m.clone().into()).collect();
    let buses: Vec<opentelemetry::StringValue> = found.iter().map(|(b, _)| b.clone().into()).collect();
    vec![
        KeyValue::new("gpu.device.count", found.len() as i64),
        KeyValue::new("gpu.device.names", Value::Array(names.into())),
        KeyValue::new("gpu.device.pci_bus_ids", Value::Array(buses.into())),
    ]
}

/// The rank of this process in a distributed job, from the launcher's variables (torchrun,
/// Open MPI, Slurm), so that the spans of every rank of one job can be told apart.
fn rank(report: &mut dyn FnMut(String)) -> Vec<KeyValue> {
    let mut out = Vec::new();
    let mut first = |attr: &'static str, vars: &[&str], out: &mut Vec<KeyValue>| {
        for var in vars {
            let Ok(v) = std::env::var(var) else { continue };
            match v.trim().parse::<i64>() {
                Ok(n) if n >= 0 => {
                    out.push(KeyValue::new(attr, n));
                    return;
                }
                _ => report(format!(
                    "{var}={v:?} is not a rank (a whole number ≥ 0); leaving `{attr}` out of the resource"
                )),
            }
        }
    };
    first("job.rank", &["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"], &mut out);
    first("job.local_rank", &["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"], &mut out);
    first("job.world_size", &["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"], &mut out);
    out
}

/// The remote parent named by `TRACEPARENT` (and `TRACESTATE`), if any: every root span this
/// process exports becomes its child, so that the processes of one job share one trace.
pub(super) fn traceparent(report: &mut dyn FnMut(String)) -> Option<Context> {
    let value = std::env::var("TRACEPARENT").ok().filter(|v| !v.trim().is_empty())?;
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_owned(), value.trim().to_owned());
    if let Ok(state) = std::env::var("TRACESTATE") {
        carrier.insert("tracestate".to_owned(), state);
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        Some(cx)
    } else {
        report(format!(
            "TRACEPARENT={value:?} is not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>); spans start their own traces"
        ));
        None
    }
}

/// `cx`'s span as a W3C `traceparent` value.
pub(super) fn traceparent_of(cx: &Context) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::Key;

    #[test]
    fn service_name_prefers_the_builder_then_the_resource_variable_then_the_binary() {
        let r = build(&OtlpConfig::new().resource_attribute("service.name", "from-attrs"), &mut |_| {});
        assert_eq!(r.get(&Key::new("service.name")), Some(Value::from("from-attrs")));
        let r =
            build(&OtlpConfig::new().resource_attribute("service.name", "from-attrs").service_name("svc"), &mut |_| {});
        assert_eq!(r.get(&Key::new("service.name")), Some(Value::from("svc")));
        let r = build(&OtlpConfig::new(), &mut |_| {});
        assert_eq!(r.get(&Key::new("service.name")), Some(Value::from(program_name())));
        assert_eq!(r.get(&Key::new("process.pid")), Some(Value::from(i64::from(std::process::id()))));
    }
}
