//! The only reader of `GPUSPAN_*` variables (and of `XDG_RUNTIME_DIR`, for where files go).
//!
//! One vocabulary for switches, case-insensitive: `on`, `1`, `true`, `yes` / `off`, `0`,
//! `false`, `no`. An empty value counts as unset. A value that cannot be used is said once,
//! naming the variable, the value and the default used instead, and the program runs on with
//! that default; a number below its sane minimum is raised to it, with a message.
//!
//! Each reader has one caller (the `read by` column; `tests::each_gpuspan_variable_is_read_in_one_place`
//! checks it from the sources). The run's settings are read by `Config` only: by
//! [`crate::Config::from_env`] for `init()`, and through [`crate::Config`]'s `settings_from_env`
//! (the threshold, trace-all and the span selection), which `settings.rs` calls once in a
//! program that uses gpuspan before or without `init()` (decision 70).
//!
//! | variable | read by | default |
//! |---|---|---|
//! | `GPUSPAN` | the run-time switch (`switch.rs`), at its first reading | on |
//! | `GPUSPAN_SUMMARY` | [`crate::Config::from_env`] | on |
//! | `GPUSPAN_TRACE_FILE` | [`crate::Config::from_env`]: a path, or a switch (off: no timeline) | a private per-user directory |
//! | `GPUSPAN_TRACE_FORMAT` | [`crate::Config::from_env`]: `json` or `perfetto` (Perfetto's native protobuf) | by the path's name, else json |
//! | `GPUSPAN_CAPTURE` | [`crate::Config::from_env`]: a path, or a switch (on: the private directory); a path another process is writing gets `<stem>.<pid>.<ext>` beside it (docs/cli.md) | off |
//! | `GPUSPAN_THRESHOLD_US` | `Config::settings_from_env` | 100 |
//! | `GPUSPAN_TRACE_ALL` | `Config::settings_from_env` | off |
//! | `GPUSPAN_ON_SIGNAL` | [`crate::Config::from_env`]: `flush` (or on) / off | flush |
//! | `GPUSPAN_LIVE` | [`crate::Config::from_env`]: the live feed for `gpuspan top` | off |
//! | `GPUSPAN_SPANS` | `Config::settings_from_env`: the spans `gpuspan::layer()` makes scopes, in `EnvFilter`'s directive syntax | none |
//! | `GPUSPAN_CUPTI` | CUDA timing (`cuda/mod.rs`) | on |
//! | `GPUSPAN_CUPTI_DUMP` | CUDA timing (`cuda/cupti/mod.rs`): a path | none |
//! | `GPUSPAN_MONITOR` | the NVML monitor (`monitor/mod.rs`) | on |
//! | `GPUSPAN_MONITOR_INTERVAL_MS` | the NVML monitor (`monitor/mod.rs`) | 100 (at least 10) |
//! | `GPUSPAN_MONITOR_HISTORY` | the NVML monitor (`monitor/mod.rs`) | 3000 (at least 1) |
//! | `GPUSPAN_MONITOR_CPU_PERCENT` | the NVML monitor (`monitor/mod.rs`) | 0.1 |
//! | `GPUSPAN_NVML_LIBRARY` | the device monitor (`monitor/library.rs`): NVML's path | the driver's library |
//! | `GPUSPAN_ROCM_SMI_LIBRARY` | the device monitor (`monitor/library.rs`): ROCm SMI's path | `librocm_smi64.so` on the loader's path, then `/opt/rocm/lib` |
//!
//! The readers only a backend or the device monitor uses are built with it (`cuda`; `_devices`,
//! which `nvml` turns on), so that dead code is checked in every feature set.

use crate::diagnostics::note_once;
use crate::sampling::state::DEFAULT_THRESHOLD_US;
use std::ffi::OsString;
use std::path::PathBuf;
use std::str::FromStr;

const VOCABULARY: &str = "on/off, 1/0, true/false or yes/no";

/// The raw value, trimmed; `None` when unset or empty. Not UTF-8 is a bad value (said once).
fn text(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) => Some(v.trim().to_owned()).filter(|v| !v.is_empty()),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(v)) => {
            note_once(format_args!("{name}={v:?} is not valid UTF-8; ignoring it"));
            None
        }
    }
}

/// The value as the OS gives it (paths need not be UTF-8); `None` when unset or empty.
fn os(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// `Some(true)` for on/1/true/yes, `Some(false)` for off/0/false/no, `None` for anything else.
pub(crate) fn parse_switch(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Some(true),
        "off" | "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// A switch: `None` when unset; a bad value is said once and gives `None` (the default).
fn switch(name: &str, default: bool) -> Option<bool> {
    let v = text(name)?;
    let parsed = parse_switch(&v);
    if parsed.is_none() {
        note_once(format_args!("{name}={v:?} is not {VOCABULARY}; using {} (the default)", on_off(default)));
    }
    parsed
}

/// A number of at least `min`: `None` when unset or unparsable (said once, with `default`);
/// a smaller one is raised to `min`, with a message.
fn number<T>(name: &str, what: &str, default: T, min: T) -> Option<T>
where
    T: FromStr + PartialOrd + Copy + std::fmt::Display,
{
    let v = text(name)?;
    match v.parse::<T>() {
        Ok(n) if n < min => {
            note_once(format_args!("{name}={v:?} is below the minimum of {min}; using {min}"));
            Some(min)
        }
        Ok(n) => Some(n),
        Err(_) => {
            note_once(format_args!("{name}={v:?} is not {what}; using {default} (the default)"));
            None
        }
    }
}

/// `GPUSPAN`: whether gpuspan measures at all (default on).
pub(crate) fn enabled() -> bool {
    switch("GPUSPAN", true).unwrap_or(true)
}

/// `GPUSPAN_SUMMARY`: whether the summary table is printed at shutdown.
pub(crate) fn summary() -> Option<bool> {
    switch("GPUSPAN_SUMMARY", true)
}

/// What `GPUSPAN_TRACE_FILE` or `GPUSPAN_CAPTURE` says: a switch word or a path (the settings
/// make it their `TraceFile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathOrSwitch {
    /// `on` (the default place) or `off` (none).
    Switch(bool),
    Path(std::path::PathBuf),
}

fn path_or_switch(name: &str) -> Option<PathOrSwitch> {
    let v = os(name)?;
    Some(match v.to_str().and_then(parse_switch) {
        Some(on) => PathOrSwitch::Switch(on),
        None => PathOrSwitch::Path(v.into()),
    })
}

/// `GPUSPAN_TRACE_FILE`: a path, or a switch word (`off`: no timeline, `on`: the default place).
pub(crate) fn trace_file() -> Option<PathOrSwitch> {
    path_or_switch("GPUSPAN_TRACE_FILE")
}

/// What `GPUSPAN_TRACE_FORMAT` names (the public `TraceFormat` is made from it in config/imp.rs, which
/// this file does not import).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimelineFormat {
    Json,
    Perfetto,
}

/// `GPUSPAN_TRACE_FORMAT`: `json` or `perfetto`, in any case; `None` when unset or not one of
/// them (said once: the path's name decides, as when unset).
pub(crate) fn trace_format() -> Option<TimelineFormat> {
    let v = text("GPUSPAN_TRACE_FORMAT")?;
    match v.to_ascii_lowercase().as_str() {
        "json" => Some(TimelineFormat::Json),
        "perfetto" => Some(TimelineFormat::Perfetto),
        _ => {
            note_once(format_args!(
                "GPUSPAN_TRACE_FORMAT={v:?} is not json or perfetto; using the format of the timeline's \
                 file name (the default: perfetto for .pftrace, else json)"
            ));
            None
        }
    }
}

/// `GPUSPAN_CAPTURE`: a path, or a switch word (`on`: the default place, `off`: no capture).
/// The same three answers as `GPUSPAN_TRACE_FILE`.
pub(crate) fn capture() -> Option<PathOrSwitch> {
    path_or_switch("GPUSPAN_CAPTURE")
}

/// `GPUSPAN_THRESHOLD_US`: calls shorter than this many µs are aggregated only.
pub(crate) fn threshold_us() -> Option<u64> {
    number("GPUSPAN_THRESHOLD_US", "a whole number of microseconds", DEFAULT_THRESHOLD_US, 0)
}

/// `GPUSPAN_TRACE_ALL`: export every call.
pub(crate) fn trace_all() -> Option<bool> {
    switch("GPUSPAN_TRACE_ALL", false)
}

/// `GPUSPAN_ON_SIGNAL`: `flush` (or a switch saying on) flushes and writes everything on
/// SIGINT/SIGTERM before the signal takes its course.
pub(crate) fn on_signal() -> Option<bool> {
    let v = text("GPUSPAN_ON_SIGNAL")?;
    if v.eq_ignore_ascii_case("flush") {
        return Some(true);
    }
    let parsed = parse_switch(&v);
    if parsed.is_none() {
        note_once(format_args!(
            "GPUSPAN_ON_SIGNAL={v:?} is not `flush` or {VOCABULARY}; using the default (`flush`: a signal that would end the program first writes the run)"
        ));
    }
    parsed
}

/// `GPUSPAN_LIVE`: serve the live feed (`gpuspan top`) on a socket in the private directory.
pub(crate) fn live() -> Option<bool> {
    switch("GPUSPAN_LIVE", false)
}

/// `GPUSPAN_SPANS`: the application spans that are measurement scopes (`span_scopes.rs`), in
/// `EnvFilter`'s directive syntax; parsed there.
pub(crate) fn spans() -> Option<String> {
    text("GPUSPAN_SPANS")
}

/// `GPUSPAN_CUPTI`: CUDA timing through CUPTI (default on; off: CUDA events).
#[cfg(feature = "cuda")]
pub(crate) fn cupti() -> bool {
    switch("GPUSPAN_CUPTI", true).unwrap_or(true)
}

/// `GPUSPAN_CUPTI_DUMP`: where to dump every CUPTI buffer, if anywhere.
#[cfg(feature = "cuda")]
pub(crate) fn cupti_dump() -> Option<OsString> {
    os("GPUSPAN_CUPTI_DUMP")
}

#[cfg(feature = "_devices")]
pub(crate) use devices::*;

/// The device monitor's readers, built with a device reader (`_devices`).
#[cfg(feature = "_devices")]
mod devices {
    use super::{note_once, number, os, switch, text};
    use std::ffi::OsString;
    use std::time::Duration;

    /// `GPUSPAN_MONITOR`: whether `init` starts the NVML monitor (default on).
    pub(crate) fn monitor() -> bool {
        switch("GPUSPAN_MONITOR", true).unwrap_or(true)
    }

    /// `GPUSPAN_MONITOR_INTERVAL_MS`, at least `min`.
    pub(crate) fn monitor_interval(default: Duration, min: Duration) -> Option<Duration> {
        let min_ms = u64::try_from(min.as_millis()).unwrap_or(u64::MAX);
        let default_ms = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
        number("GPUSPAN_MONITOR_INTERVAL_MS", "a whole number of milliseconds", default_ms, min_ms)
            .map(Duration::from_millis)
    }

    /// `GPUSPAN_MONITOR_HISTORY`: samples kept per device, at least 1.
    pub(crate) fn monitor_history(default: usize) -> Option<usize> {
        number("GPUSPAN_MONITOR_HISTORY", "a whole number of samples", default, 1)
    }

    /// `GPUSPAN_MONITOR_CPU_PERCENT`: the sampler's CPU budget in percent of one core (> 0).
    pub(crate) fn monitor_cpu_percent(default: f64) -> Option<f64> {
        let v = text("GPUSPAN_MONITOR_CPU_PERCENT")?;
        match v.parse::<f64>() {
            Ok(p) if p > 0.0 && p.is_finite() => Some(p),
            _ => {
                note_once(format_args!(
                    "GPUSPAN_MONITOR_CPU_PERCENT={v:?} is not a positive number; using {default} (the default)"
                ));
                None
            }
        }
    }

    /// `GPUSPAN_NVML_LIBRARY`: the NVML library to load instead of the driver's.
    pub(crate) fn nvml_library() -> Option<OsString> {
        os("GPUSPAN_NVML_LIBRARY")
    }

    /// `GPUSPAN_ROCM_SMI_LIBRARY`: the ROCm SMI library to load instead of ROCm's.
    pub(crate) fn rocm_smi_library() -> Option<OsString> {
        os("GPUSPAN_ROCM_SMI_LIBRARY")
    }
}

/// `XDG_RUNTIME_DIR`, where the per-user runtime directory is (not checked here).
pub(crate) fn runtime_dir() -> Option<PathBuf> {
    os("XDG_RUNTIME_DIR").map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::parse_switch;

    #[test]
    fn one_vocabulary_for_switches_in_any_case() {
        for on in ["on", "1", "true", "yes", "ON", " True ", "Yes"] {
            assert_eq!(parse_switch(on), Some(true), "{on:?}");
        }
        for off in ["off", "0", "false", "no", "OFF", " False", "NO "] {
            assert_eq!(parse_switch(off), Some(false), "{off:?}");
        }
        for bad in ["", "2", "maybe", "enabled", "y", "onn"] {
            assert_eq!(parse_switch(bad), None, "{bad:?}");
        }
    }
}
