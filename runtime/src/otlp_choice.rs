//! The OTLP export a `Config` asks for, chosen at compile time (as `parent.rs`) so that
//! `config.rs` names no exporter: OpenTelemetry's configuration with the `otlp` feature, nothing
//! without.

pub(crate) use choice::{from_env, OtlpChoice};

/// With `otlp`: the configuration asked for, if any.
#[cfg(feature = "otlp")]
mod choice {
    pub(crate) type OtlpChoice = Option<crate::otlp::OtlpConfig>;

    /// The export the `OTEL_*` variables ask for.
    pub(crate) fn from_env() -> OtlpChoice {
        crate::otlp::OtlpConfig::env_requests_export().then(crate::otlp::OtlpConfig::from_env)
    }
}

/// Without `otlp`: nothing to choose.
#[cfg(not(feature = "otlp"))]
mod choice {
    pub(crate) type OtlpChoice = ();

    /// No export to ask for.
    pub(crate) fn from_env() -> OtlpChoice {}
}
