//! OTLP export against a real collector (feature `otlp`; scripts/test starts one).

#[path = "../otlp_common/mod.rs"]
mod otlp_common;
mod otlp_example;
mod otlp_export;
mod otlp_failures;
