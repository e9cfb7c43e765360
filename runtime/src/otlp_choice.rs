//! The OTLP export a `Config` asks for, chosen at compile time (as `parent.rs`) so that
//! `config.rs` names no exporter: OpenTelemetry's configuration with the `otlp` feature, nothing
//! without.

#[cfg(feature = "otlp")]
pub(crate) type OtlpChoice = Option<crate::otlp::OtlpConfig>;
#[cfg(not(feature = "otlp"))]
pub(crate) type OtlpChoice = ();

/// The export the `OTEL_*` variables ask for.
#[cfg(feature = "otlp")]
pub(crate) fn from_env() -> OtlpChoice {
    crate::otlp::OtlpConfig::env_requests_export().then(crate::otlp::OtlpConfig::from_env)
}

/// No export to ask for.
#[cfg(not(feature = "otlp"))]
pub(crate) fn from_env() -> OtlpChoice {}
