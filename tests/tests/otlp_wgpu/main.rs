//! A selected span's GPU span under the user's span, exported over OTLP (features `otlp` and
//! `wgpu-suite`).

#[path = "../otlp_common/mod.rs"]
mod otlp_common;
mod spans_otlp;
