//! The instrumented build's part of [`Config`]: the `GPUSPAN_*` variables it reads through
//! env.rs's readers (the only caller of those of the run's settings), and what a path says.

use super::{Config, Settings, TraceFile, TraceFormat};
use crate::env;

impl From<env::PathOrSwitch> for TraceFile {
    fn from(v: env::PathOrSwitch) -> Self {
        match v {
            env::PathOrSwitch::Switch(true) => TraceFile::Default,
            env::PathOrSwitch::Switch(false) => TraceFile::Off,
            env::PathOrSwitch::Path(p) => TraceFile::Path(p),
        }
    }
}

impl TraceFormat {
    /// The format a timeline path asks for: Perfetto's for a name ending in `.pftrace` or
    /// `.perfetto-trace` (the extensions Perfetto's own tools write), JSON for any other.
    pub(crate) fn of_path(path: &std::path::Path) -> TraceFormat {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        if name.ends_with(".pftrace") || name.ends_with(".perfetto-trace") {
            TraceFormat::Perfetto
        } else {
            TraceFormat::Json
        }
    }
}

impl Config {
    /// The `GPUSPAN_*` variables of [`Config::from_env`]'s table over `self`.
    pub(super) fn with_env(self) -> Config {
        let mut c = self;
        if let Some(on) = env::summary() {
            c.summary = on;
        }
        if let Some(t) = env::trace_file() {
            c.trace_file = t.into();
        }
        if let Some(f) = env::trace_format() {
            c.trace_format = Some(match f {
                env::TimelineFormat::Json => TraceFormat::Json,
                env::TimelineFormat::Perfetto => TraceFormat::Perfetto,
            });
        }
        if let Some(t) = env::capture() {
            c.capture = t.into();
        }
        c.settings = Config::settings_from_env();
        if let Some(on) = env::on_signal() {
            c.flush_on_signal = Some(on);
        }
        if let Some(on) = env::live() {
            c.live = on;
        }
        c
    }

    /// The part of [`Config::from_env`] the collector holds for the whole run: also what a
    /// program that never calls `init` runs with (`settings.rs` reads it once, at the first use).
    pub(crate) fn settings_from_env() -> Settings {
        Settings { threshold_us: env::threshold_us(), trace_all: env::trace_all(), spans: env::spans() }
    }
}

#[cfg(test)]
mod tests {
    use super::TraceFormat;
    use std::path::Path;

    /// Perfetto's extensions ask for its format, in any case; every other name (and a name
    /// that only contains one) is JSON.
    #[test]
    fn a_path_ending_in_a_perfetto_extension_asks_for_the_native_format() {
        for p in ["run.pftrace", "/tmp/a/run.PFTRACE", "x.perfetto-trace"] {
            assert_eq!(TraceFormat::of_path(Path::new(p)), TraceFormat::Perfetto, "{p}");
        }
        for p in ["run.json", "run.trace.json", "pftrace", "run.pftrace.json", "dir.pftrace/run", ""] {
            assert_eq!(TraceFormat::of_path(Path::new(p)), TraceFormat::Json, "{p}");
        }
    }
}
