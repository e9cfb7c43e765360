//! How bytes reach the collector: the exporters of `opentelemetry-otlp` (tonic for gRPC,
//! reqwest for HTTP/protobuf), TLS with the system's roots plus an optional CA, and the small
//! tokio runtime they run on.
//!
//! Both exporters need tokio, and the SDK's export threads are plain threads. Rather than ask
//! users for a runtime, gpuspan keeps one of its own (one worker thread, started with the first
//! export pipeline and kept for the life of the process, so that a late export can never meet
//! a runtime that is shutting down). Every export runs on it through [`Io::run`], which also
//! bounds it in time: the exporters' own timeouts do not cover every path (connecting, retry
//! sleeps), and shutdown must end within its deadline.

use crate::otlp::{OtlpConfig, OtlpError, Protocol};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::Temporality;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

/// The runtime exports run on, and the deadline shutdown imposes on them.
#[derive(Debug)]
pub(super) struct Io {
    handle: tokio::runtime::Handle,
    /// Set when shutdown begins: no export, not even one already in flight, outlasts it.
    deadline: tokio::sync::watch::Sender<Option<Instant>>,
    /// The shutdown bound the deadline comes from, for messages about exports it cut off.
    bound: std::sync::Mutex<Duration>,
}

// process-wide because a tokio runtime cannot be dropped from within an asynchronous
// context (an export thread): one is started for the process and never dropped.
static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

impl Io {
    pub(super) fn new() -> Result<Arc<Io>, OtlpError> {
        let rt = match RUNTIME.get() {
            Some(rt) => rt,
            None => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("gpuspan-otlp-io")
                    .on_thread_start(super::layer::mark_export_thread)
                    .enable_all()
                    .build()
                    .map_err(OtlpError::Runtime)?;
                RUNTIME.get_or_init(|| rt)
            }
        };
        Ok(Arc::new(Io {
            handle: rt.handle().clone(),
            deadline: tokio::sync::watch::Sender::new(None),
            bound: std::sync::Mutex::new(Duration::ZERO),
        }))
    }

    /// Every export, those in flight included, ends by `deadline`, which the shutdown bound
    /// `bound` set.
    pub(super) fn set_deadline(&self, deadline: Instant, bound: Duration) {
        if let Ok(mut b) = self.bound.lock() {
            *b = bound;
        }
        self.deadline.send_replace(Some(deadline));
    }

    /// Why an export did not finish: shutdown's bound cut it off. Says the bound that applied,
    /// not the per-export timeout (which did not).
    fn cut_off(&self) -> OTelSdkError {
        let bound = self.bound.lock().map_or(Duration::ZERO, |b| *b);
        OTelSdkError::InternalFailure(format!(
            "cut off by the shutdown bound ({:.1} s; OtlpConfig::shutdown_timeout)",
            bound.as_secs_f64()
        ))
    }

    /// Runs one export on the runtime, for at most `timeout`, and never past the shutdown
    /// deadline (even when shutdown begins while it runs).
    pub(super) fn run<F: Future<Output = OTelSdkResult>>(&self, timeout: Duration, export: F) -> OTelSdkResult {
        let mut deadline = self.deadline.subscribe();
        if deadline.borrow().is_some_and(|d| d <= Instant::now()) {
            return Err(self.cut_off());
        }
        let _quiet = opentelemetry::Context::enter_telemetry_suppressed_scope();
        let _exporting = super::layer::Exporting::enter();
        self.handle.block_on(async move {
            let export = std::pin::pin!(tokio::time::timeout(timeout, export));
            let cut = std::pin::pin!(async move {
                loop {
                    let at = *deadline.borrow_and_update();
                    if let Some(at) = at {
                        tokio::time::sleep_until(at.into()).await;
                        return;
                    }
                    if deadline.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            });
            // `None`: the shutdown deadline came first; `Some(Err(_))`: the export's own timeout.
            first_of(export, cut)
                .await
                .map_or_else(|| Err(self.cut_off()), |r| r.unwrap_or(Err(OTelSdkError::Timeout(timeout))))
        })
    }

    /// Builds an exporter where it can find the runtime (tonic spawns its connection task).
    fn enter<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.handle.enter();
        let _exporting = super::layer::Exporting::enter();
        f()
    }
}

/// `Some` of `main`'s output if it finishes first, `None` if `cut` does.
async fn first_of<T>(
    mut main: Pin<&mut impl Future<Output = T>>,
    mut cut: Pin<&mut impl Future<Output = ()>>,
) -> Option<T> {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = main.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if cut.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

/// TLS material, read once for both signals.
pub(super) struct Tls {
    ca_pem: Option<Vec<u8>>,
}

impl Tls {
    /// Reads the CA file. A file that cannot be used is said once and left out: the system's
    /// roots still apply, so verification is never weakened.
    pub(super) fn load(config: &OtlpConfig, report: &mut dyn FnMut(String)) -> Tls {
        let Some(path) = &config.ca_certificate else { return Tls { ca_pem: None } };
        let checked = std::fs::read(path).map_err(|e| e.to_string()).and_then(|pem| {
            let n = CertificateDer::pem_slice_iter(&pem).filter(Result::is_ok).count();
            if n == 0 {
                Err("it holds no PEM certificate".to_owned())
            } else {
                Ok(pem)
            }
        });
        match checked {
            Ok(pem) => Tls { ca_pem: Some(pem) },
            Err(why) => {
                report(format!(
                    "cannot use the CA certificate {} (OTEL_EXPORTER_OTLP_CERTIFICATE): {why}; trusting the system's roots only",
                    path.display()
                ));
                Tls { ca_pem: None }
            }
        }
    }

    fn tonic(&self) -> tonic::transport::ClientTlsConfig {
        let tls = tonic::transport::ClientTlsConfig::new().with_native_roots();
        match &self.ca_pem {
            Some(pem) => tls.ca_certificate(tonic::transport::Certificate::from_pem(pem)),
            None => tls,
        }
    }

    /// A rustls configuration with gpuspan's own crypto provider, so that no process-wide
    /// provider has to be installed (that choice belongs to the application).
    fn rustls(&self) -> Result<rustls::ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let extra: Vec<CertificateDer<'static>> = match &self.ca_pem {
            Some(pem) => CertificateDer::pem_slice_iter(pem).filter_map(Result::ok).collect(),
            None => Vec::new(),
        };
        let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
            .map_err(|e| format!("cannot load the system's root certificates: {e}"))?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(config)
    }
}

fn metadata(config: &OtlpConfig) -> tonic::metadata::MetadataMap {
    let mut map = tonic::metadata::MetadataMap::new();
    for (k, v) in &config.headers {
        // Both were validated in config.rs; a failure here only leaves the header out.
        if let (Ok(key), Ok(mut value)) = (
            tonic::metadata::AsciiMetadataKey::from_bytes(k.as_bytes()),
            tonic::metadata::AsciiMetadataValue::try_from(v.as_str()),
        ) {
            value.set_sensitive(true);
            map.insert(key, value);
        }
    }
    map
}

fn http_client(config: &OtlpConfig, tls: &Tls) -> Result<reqwest::Client, OtlpError> {
    let rustls = tls.rustls().map_err(OtlpError::Tls)?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(rustls)
        .connect_timeout(config.timeout)
        .timeout(config.timeout)
        .build()
        .map_err(|e| OtlpError::Tls(e.to_string()))
}

fn is_https(url: &str) -> bool {
    url.starts_with("https://")
}

pub(super) fn span_exporter(
    config: &OtlpConfig,
    tls: &Tls,
    io: &Io,
) -> Result<opentelemetry_otlp::SpanExporter, OtlpError> {
    let url = config.traces_url();
    let built = match config.protocol {
        Protocol::Grpc => io.enter(|| {
            tonic_endpoint(opentelemetry_otlp::SpanExporter::builder().with_tonic(), config, &url, tls).build()
        }),
        Protocol::HttpProtobuf => {
            let client = http_client(config, tls)?;
            io.enter(|| {
                http_endpoint(opentelemetry_otlp::SpanExporter::builder().with_http(), config, &url, client).build()
            })
        }
    };
    built.map_err(|source| OtlpError::Exporter { signal: "span", url, source })
}

/// A gRPC exporter's builder (either signal) pointed at `url`, with the configured timeout,
/// metadata and, for `https`, TLS.
fn tonic_endpoint<B: WithExportConfig + WithTonicConfig>(b: B, config: &OtlpConfig, url: &str, tls: &Tls) -> B {
    let b = b.with_endpoint(url).with_timeout(config.timeout).with_metadata(metadata(config));
    if is_https(url) {
        b.with_tls_config(tls.tonic())
    } else {
        b
    }
}

/// An http/protobuf exporter's builder (either signal) pointed at `url` through `client`, with
/// the configured timeout and headers.
fn http_endpoint<B: WithExportConfig + WithHttpConfig>(
    b: B,
    config: &OtlpConfig,
    url: &str,
    client: reqwest::Client,
) -> B {
    b.with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(config.timeout)
        .with_headers(config.headers.iter().cloned().collect())
        .with_http_client(client)
}

pub(super) fn metric_exporter(
    config: &OtlpConfig,
    tls: &Tls,
    io: &Io,
) -> Result<opentelemetry_otlp::MetricExporter, OtlpError> {
    let url = config.metrics_url();
    // Cumulative: a failed export loses no counts, the next successful one carries them.
    let temporality = Temporality::Cumulative;
    let built = match config.protocol {
        Protocol::Grpc => io.enter(|| {
            let b = opentelemetry_otlp::MetricExporter::builder().with_tonic();
            tonic_endpoint(b, config, &url, tls).with_temporality(temporality).build()
        }),
        Protocol::HttpProtobuf => {
            let client = http_client(config, tls)?;
            io.enter(|| {
                let b = opentelemetry_otlp::MetricExporter::builder().with_http();
                http_endpoint(b, config, &url, client).with_temporality(temporality).build()
            })
        }
    };
    built.map_err(|source| OtlpError::Exporter { signal: "metric", url, source })
}

/// An export error as said to the user: what failed, where, with the configured header values
/// cut out of the error text (a server may echo them back), and what to check.
pub(super) fn describe_failure(config: &OtlpConfig, signal: &str, url: &str, error: &str) -> String {
    let mut error = error.to_owned();
    // Values of fewer than 3 characters stay: cutting them would cut ordinary words.
    let secrets = config.headers.iter().map(|(_, v)| v.as_str()).filter(|v| v.len() >= 3);
    for secret in secrets {
        error = error.replace(secret, "<redacted>");
    }
    format!(
        "OTLP {signal} export to {url} ({}) failed: {error}. Losses are counted in the summary. Is the collector running there? \
         Collectors usually take gRPC on port 4317 and http/protobuf on 4318 (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL)",
        config.protocol.as_str()
    )
}
