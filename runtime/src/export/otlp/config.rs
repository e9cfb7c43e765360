//! What the OTLP export is told: the standard `OTEL_*` variables, overridable in code.
//!
//! A bad value never stops the program: it is said once (naming the variable, never a header
//! value), and the default is used instead.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The OTLP wire protocol (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// `grpc`: OTLP over gRPC, usually port 4317.
    Grpc,
    /// `http/protobuf`: OTLP over HTTP with protobuf bodies, usually port 4318. The
    /// specification's default.
    HttpProtobuf,
}

impl Protocol {
    /// The name `OTEL_EXPORTER_OTLP_PROTOCOL` uses: `grpc` or `http/protobuf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// The endpoint a collector listens on for this protocol when none is given.
    fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::Grpc => "http://localhost:4317",
            Protocol::HttpProtobuf => "http://localhost:4318",
        }
    }
}

/// Defaults of the OpenTelemetry specification, except the shutdown bound, which is gpuspan's.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_QUEUE: usize = 2048;
const DEFAULT_BATCH: usize = 512;
const DEFAULT_SCHEDULE_DELAY: Duration = Duration::from_secs(5);
const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_SHUTDOWN: Duration = Duration::from_secs(5);
/// Metric exports come at most this often: `OTEL_METRIC_EXPORT_INTERVAL=0` sent ~700 exports a
/// second, a busy loop against the collector.
pub(super) const MIN_METRIC_INTERVAL: Duration = Duration::from_millis(100);

/// Where and how spans and metrics are sent. [`OtlpConfig::from_env`] reads the standard
/// variables; the methods override them in code.
///
/// | variable | effect |
/// |---|---|
/// | `OTEL_EXPORTER_OTLP_ENDPOINT` | collector base URL (gRPC: as is; HTTP: `/v1/traces`, `/v1/metrics` appended) |
/// | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._METRICS_ENDPOINT` | per-signal URL, used as is |
/// | `OTEL_EXPORTER_OTLP_PROTOCOL` | `grpc` or `http/protobuf` (default) |
/// | `OTEL_EXPORTER_OTLP_HEADERS` | `key=value,key2=value2` sent with every export (values never printed) |
/// | `OTEL_EXPORTER_OTLP_TIMEOUT` | milliseconds one export may take (default 10000) |
/// | `OTEL_EXPORTER_OTLP_CERTIFICATE` | PEM file of the CA that signed the collector's certificate |
/// | `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | the resource (default service name: the binary's) |
/// | `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_SCHEDULE_DELAY` | span queue (2048), batch (512), delay in ms (5000) |
/// | `OTEL_METRIC_EXPORT_INTERVAL` | milliseconds between metric exports (60000) |
/// | `OTEL_TRACES_EXPORTER=none`, `OTEL_METRICS_EXPORTER=none` | turn one signal off |
#[derive(Clone)]
pub struct OtlpConfig {
    pub(super) endpoint: Option<String>,
    pub(super) traces_endpoint: Option<String>,
    pub(super) metrics_endpoint: Option<String>,
    pub(super) protocol: Protocol,
    pub(super) headers: Vec<(String, String)>,
    pub(super) timeout: Duration,
    pub(super) ca_certificate: Option<PathBuf>,
    pub(super) service_name: Option<String>,
    pub(super) resource: Vec<(String, String)>,
    pub(super) max_queue_size: usize,
    pub(super) max_export_batch_size: usize,
    pub(super) schedule_delay: Duration,
    pub(super) metric_interval: Duration,
    pub(super) shutdown_timeout: Duration,
    pub(super) traces: bool,
    pub(super) metrics: bool,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            endpoint: None,
            traces_endpoint: None,
            metrics_endpoint: None,
            protocol: Protocol::HttpProtobuf,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            ca_certificate: None,
            service_name: None,
            resource: Vec::new(),
            max_queue_size: DEFAULT_QUEUE,
            max_export_batch_size: DEFAULT_BATCH,
            schedule_delay: DEFAULT_SCHEDULE_DELAY,
            metric_interval: DEFAULT_METRIC_INTERVAL,
            shutdown_timeout: DEFAULT_SHUTDOWN,
            traces: true,
            metrics: true,
        }
    }
}

/// Header values are credentials: only their names are shown.
impl fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<String> = self.headers.iter().map(|(k, _)| format!("{k}=<redacted>")).collect();
        f.debug_struct("OtlpConfig")
            .field("traces_endpoint", &self.traces_url())
            .field("metrics_endpoint", &self.metrics_url())
            .field("protocol", &self.protocol)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .field("ca_certificate", &self.ca_certificate)
            .field("service_name", &self.service_name)
            .field("resource", &self.resource)
            .field("max_queue_size", &self.max_queue_size)
            .field("max_export_batch_size", &self.max_export_batch_size)
            .field("schedule_delay", &self.schedule_delay)
            .field("metric_interval", &self.metric_interval)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("traces", &self.traces)
            .field("metrics", &self.metrics)
            .finish()
    }
}

/// Reads the environment (through `var`: the process's, or a test's own), reporting each bad
/// value once through `report`.
struct Env<'a> {
    var: &'a dyn Fn(&str) -> Option<String>,
    report: &'a mut dyn FnMut(String),
}

impl Env<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.var)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    fn millis(&mut self, name: &str, default: Duration) -> Duration {
        match self.get(name) {
            None => default,
            Some(v) => match v.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => {
                    (self.report)(format!(
                        "{name}={v:?} is not a whole number of milliseconds; using {}",
                        default.as_millis()
                    ));
                    default
                }
            },
        }
    }

    fn count(&mut self, name: &str, default: usize) -> usize {
        match self.get(name) {
            None => default,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    (self.report)(format!("{name}={v:?} is not a positive whole number; using {default}"));
                    default
                }
            },
        }
    }

    fn url(&mut self, name: &str) -> Option<String> {
        let v = self.get(name)?;
        match check_url(&v) {
            Ok(()) => Some(v),
            Err(why) => {
                (self.report)(format!("{name}={v:?} {why}; using the default endpoint instead"));
                None
            }
        }
    }

    /// `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER`: `otlp` (default) or `none`.
    fn exporter_on(&mut self, name: &str) -> bool {
        match self.get(name).map(|v| v.to_ascii_lowercase()) {
            None => true,
            Some(v) if v.split(',').any(|x| x.trim() == "otlp") => true,
            Some(v) if v == "none" => false,
            Some(v) => {
                (self.report)(format!("{name}={v:?}: gpuspan exports only `otlp` (or `none`); using otlp"));
                true
            }
        }
    }
}

/// Why an endpoint is unusable, or `Ok`.
fn check_url(url: &str) -> Result<(), &'static str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("must start with http:// or https://")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err("has no host");
    }
    Ok(())
}

/// Decodes `%XX` escapes (W3C baggage octets, as `OTEL_RESOURCE_ATTRIBUTES` and
/// `OTEL_EXPORTER_OTLP_HEADERS` use them); `None` when an escape is malformed.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses `key=value,key=value`. Bad entries are reported by position and key only, since
/// header values are secrets.
fn key_values(name: &str, input: &str, report: &mut dyn FnMut(String)) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, entry) in input.split(',').enumerate().filter(|(_, e)| !e.trim().is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            report(format!("{name}: entry {} has no `=`; ignoring it (write key=value)", i + 1));
            continue;
        };
        let key = k.trim();
        match (key.is_empty(), percent_decode(v.trim())) {
            (false, Some(value)) => out.push((key.to_owned(), value)),
            (true, _) => report(format!("{name}: entry {} has an empty key; ignoring it", i + 1)),
            (false, None) => report(format!(
                "{name}: the value of {key:?} has a malformed %-escape; ignoring that entry (write %XX with two hex digits)"
            )),
        }
    }
    out
}

/// Header names and values the transports accept; anything else is reported by name and left
/// out, so the exporter never fails on it later.
fn valid_headers(headers: Vec<(String, String)>, report: &mut dyn FnMut(String)) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter_map(|(k, v)| {
            let k = k.to_ascii_lowercase();
            let name_ok = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.!#$%&'*+^`|~".contains(&b));
            let value_ok = v.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
            match (name_ok, value_ok) {
                (true, true) => Some((k, v)),
                (false, _) => {
                    report(format!("OTLP header name {k:?} is not a valid HTTP header name; leaving it out"));
                    None
                }
                (true, false) => {
                    report(format!(
                        "the value of OTLP header {k:?} has characters HTTP headers cannot carry; leaving that header out"
                    ));
                    None
                }
            }
        })
        .collect()
}

impl OtlpConfig {
    /// Defaults only: `http/protobuf` to `http://localhost:4318`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Defaults, then the standard `OTEL_*` variables (see the table above). Bad values are
    /// said once each and replaced by defaults.
    pub fn from_env() -> Self {
        Self::from_vars_reporting(&|n| std::env::var(n).ok(), &mut |m| crate::diagnostics::note_once(m))
    }

    /// Whether the environment asks for OTLP export: an endpoint is set and the SDK is not
    /// disabled (`OTEL_SDK_DISABLED=true`).
    pub fn env_requests_export() -> bool {
        let set = |n: &str| std::env::var(n).is_ok_and(|v| !v.trim().is_empty());
        let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        !disabled
            && (set("OTEL_EXPORTER_OTLP_ENDPOINT")
                || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
    }

    /// [`OtlpConfig::from_env`] with the variables `var` gives.
    fn from_vars_reporting(var: &dyn Fn(&str) -> Option<String>, report: &mut dyn FnMut(String)) -> Self {
        let mut c = OtlpConfig::default();
        let mut env = Env { var, report };
        match env.get("OTEL_EXPORTER_OTLP_PROTOCOL").map(|v| v.to_ascii_lowercase()) {
            None => {}
            Some(p) if p == "grpc" => c.protocol = Protocol::Grpc,
            Some(p) if p == "http/protobuf" => c.protocol = Protocol::HttpProtobuf,
            Some(p) => (env.report)(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={p:?} is not supported (use grpc or http/protobuf); using http/protobuf"
            )),
        }
        c.endpoint = env.url("OTEL_EXPORTER_OTLP_ENDPOINT");
        c.traces_endpoint = env.url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        c.metrics_endpoint = env.url("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
        if let Some(h) = env.get("OTEL_EXPORTER_OTLP_HEADERS") {
            let parsed = key_values("OTEL_EXPORTER_OTLP_HEADERS", &h, env.report);
            c.headers = valid_headers(parsed, env.report);
        }
        c.timeout = env.millis("OTEL_EXPORTER_OTLP_TIMEOUT", DEFAULT_TIMEOUT);
        if c.timeout.is_zero() {
            (env.report)(format!(
                "OTEL_EXPORTER_OTLP_TIMEOUT=0 would fail every export; using {}",
                DEFAULT_TIMEOUT.as_millis()
            ));
            c.timeout = DEFAULT_TIMEOUT;
        }
        c.ca_certificate = env.get("OTEL_EXPORTER_OTLP_CERTIFICATE").map(PathBuf::from);
        c.service_name = env.get("OTEL_SERVICE_NAME");
        if let Some(r) = env.get("OTEL_RESOURCE_ATTRIBUTES") {
            c.resource = key_values("OTEL_RESOURCE_ATTRIBUTES", &r, env.report);
        }
        c.max_queue_size = env.count("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE);
        c.max_export_batch_size = env.count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH);
        c.schedule_delay = env.millis("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY);
        c.metric_interval = env.millis("OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_METRIC_INTERVAL);
        if c.metric_interval < MIN_METRIC_INTERVAL {
            (env.report)(format!(
                "OTEL_METRIC_EXPORT_INTERVAL={} is below the minimum of {} ms; using {} ms",
                c.metric_interval.as_millis(),
                MIN_METRIC_INTERVAL.as_millis(),
                MIN_METRIC_INTERVAL.as_millis()
            ));
            c.metric_interval = MIN_METRIC_INTERVAL;
        }
        c.traces = env.exporter_on("OTEL_TRACES_EXPORTER");
        c.metrics = env.exporter_on("OTEL_METRICS_EXPORTER");
        c
    }

    /// The collector's base URL (gRPC: used as is; HTTP: `/v1/traces` and `/v1/metrics` are
    /// appended). An unusable URL is said once and the default is kept.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        let url = url.into();
        match check_url(&url) {
            Ok(()) => self.endpoint = Some(url),
            Err(why) => {
                crate::diagnostics::note_once(format_args!("OTLP endpoint {url:?} {why}; keeping the previous one"))
            }
        }
        self
    }

    /// Sends over this protocol (default: `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Adds a header sent with every export (an API key, say). Its value is never printed.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let mut report = |m: String| crate::diagnostics::note_once(m);
        let name = name.into().to_ascii_lowercase();
        self.headers.retain(|(k, _)| *k != name);
        self.headers.extend(valid_headers(vec![(name, value.into())], &mut report));
        self
    }

    /// How long one export may take before it counts as failed (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = if timeout.is_zero() { DEFAULT_TIMEOUT } else { timeout };
        self
    }

    /// A PEM file with the CA certificate(s) the collector's certificate is checked against,
    /// in addition to the system's roots.
    pub fn ca_certificate(mut self, pem_file: impl Into<PathBuf>) -> Self {
        self.ca_certificate = Some(pem_file.into());
        self
    }

    /// `service.name` (default: `OTEL_SERVICE_NAME`, else the binary's name).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Adds a resource attribute, replacing one of the same key.
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.resource.retain(|(k, _)| *k != key);
        self.resource.push((key, value.into()));
        self
    }

    /// At most this many spans wait for export; more are dropped and counted (default 2048).
    pub fn max_queue_size(mut self, spans: usize) -> Self {
        self.max_queue_size = spans.max(1);
        self
    }

    /// Spans per export request (default 512).
    pub fn max_export_batch_size(mut self, spans: usize) -> Self {
        self.max_export_batch_size = spans.max(1);
        self
    }

    /// Longest a span waits before its batch is sent (default 5 s).
    pub fn schedule_delay(mut self, delay: Duration) -> Self {
        self.schedule_delay = delay;
        self
    }

    /// Time between metric exports (default 60 s, at least 100 ms).
    pub fn metric_interval(mut self, interval: Duration) -> Self {
        self.metric_interval = interval.max(MIN_METRIC_INTERVAL);
        self
    }

    /// The longest shutdown may take, pending exports included (default 5 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Export spans (default on).
    pub fn traces(mut self, on: bool) -> Self {
        self.traces = on;
        self
    }

    /// Export metrics (default on).
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }

    /// The URL spans are posted to.
    pub fn traces_url(&self) -> String {
        self.signal_url(self.traces_endpoint.as_deref(), "v1/traces")
    }

    /// The URL metrics are posted to.
    pub fn metrics_url(&self) -> String {
        self.signal_url(self.metrics_endpoint.as_deref(), "v1/metrics")
    }

    fn signal_url(&self, specific: Option<&str>, path: &str) -> String {
        if let Some(url) = specific {
            return url.to_owned();
        }
        let base = self.endpoint.as_deref().unwrap_or(self.protocol.default_endpoint());
        match self.protocol {
            Protocol::Grpc => base.to_owned(),
            Protocol::HttpProtobuf => format!("{}/{path}", base.trim_end_matches('/')),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> (OtlpConfig, Vec<String>) {
        // The test's own variables, not the process's: tests run in parallel.
        let var = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
        let mut msgs = Vec::new();
        let c = OtlpConfig::from_vars_reporting(&var, &mut |m| msgs.push(m));
        (c, msgs)
    }

    #[test]
    fn bad_values_give_one_message_each_and_defaults() {
        let (c, msgs) = parse(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "-1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
        ]);
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.max_queue_size, DEFAULT_QUEUE);
        assert_eq!(c.endpoint, None);
        assert_eq!(msgs.len(), 4, "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("OTEL_EXPORTER_OTLP_TIMEOUT") && m.contains("10000")));
    }

    #[test]
    fn a_metric_interval_of_zero_is_raised_to_the_minimum_with_a_message() {
        let (c, msgs) = parse(&[("OTEL_METRIC_EXPORT_INTERVAL", "0")]);
        assert_eq!(c.metric_interval, MIN_METRIC_INTERVAL);
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert!(msgs[0].contains("OTEL_METRIC_EXPORT_INTERVAL=0") && msgs[0].contains("100 ms"), "{msgs:?}");
        assert_eq!(OtlpConfig::new().metric_interval(Duration::ZERO).metric_interval, MIN_METRIC_INTERVAL);
        let (c, msgs) = parse(&[("OTEL_METRIC_EXPORT_INTERVAL", "250")]);
        assert_eq!((c.metric_interval, msgs.len()), (Duration::from_millis(250), 0));
    }

    #[test]
    fn header_values_are_never_in_messages_or_debug() {
        let (c, msgs) = parse(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20s3cret-token,broken-entry-s3cret,x-bad=%zz-s3cret,x-ok=1",
        )]);
        assert_eq!(
            c.headers,
            [("authorization".to_owned(), "Bearer s3cret-token".to_owned()), ("x-ok".into(), "1".into())]
        );
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs.iter().all(|m| !m.contains("s3cret")), "{msgs:?}");
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn http_endpoints_get_signal_paths_grpc_endpoints_do_not() {
        let c = OtlpConfig::new().endpoint("http://127.0.0.1:4318/");
        assert_eq!(c.traces_url(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(c.metrics_url(), "http://127.0.0.1:4318/v1/metrics");
        let c = c.protocol(Protocol::Grpc).endpoint("http://127.0.0.1:4317");
        assert_eq!(c.traces_url(), "http://127.0.0.1:4317");
        let (c, _) = parse(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:2/custom"),
        ]);
        assert_eq!(c.traces_url(), "http://t:2/custom");
        assert_eq!(c.metrics_url(), "http://h:1/v1/metrics");
    }

    #[test]
    fn resource_attributes_are_percent_decoded() {
        let (c, msgs) = parse(&[("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,team=gpu%20infra,=x")]);
        assert_eq!(c.resource, [("deployment.environment".into(), "prod".into()), ("team".into(), "gpu infra".into())]);
        assert_eq!(msgs.len(), 1);
    }
}
