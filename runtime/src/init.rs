//! The composition root: what `init()` starts (backends, sinks, monitor, live feed) and what
//! the guard, or `shutdown()`, ends. [`Config`](crate::Config) says what to start.

use crate::config::Config;
use std::path::{Path, PathBuf};
use std::time::Duration;

// Everything only the instrumented build uses: what `init` starts and its end.
#[cfg(feature = "enabled")]
mod imp;

/// Starts gpuspan from the environment; see [`Config`]. Keep the guard until the end of `main`:
/// dropping it flushes pending GPU work (bounded by five seconds), prints the summary and writes
/// the timeline.
#[must_use = "dropping the guard at once ends the measurement and prints the summary"]
pub fn init() -> Guard {
    Config::from_env().init()
}

/// Resolves pending GPU measurements (waiting at most five seconds; [`Guard::flush`](crate::Guard::flush)
/// takes another deadline) and hands them to the aggregates and exporters. Returns `true` when
/// nothing is left pending: always without the `enabled` feature, where nothing ever is.
pub fn flush() -> bool {
    flush_within(Duration::from_secs(5))
}

/// Resolves pending GPU measurements, waiting at most `timeout`: `true` when nothing is left.
fn flush_within(timeout: Duration) -> bool {
    #[cfg(feature = "enabled")]
    return crate::resolver::flush_within(timeout);
    #[cfg(not(feature = "enabled"))]
    {
        let _ = timeout;
        true
    }
}

impl Config {
    /// Starts gpuspan with this configuration. Keep the guard alive until the end of `main`.
    #[must_use = "dropping the guard at once ends the measurement and prints the summary"]
    pub fn init(self) -> Guard {
        #[cfg(feature = "enabled")]
        return imp::init(self);
        #[cfg(not(feature = "enabled"))]
        {
            let _ = self;
            if let Some(line) = compiled_out_line(std::env::vars_os().map(|(k, _)| k)) {
                use std::io::Write;
                // A closed or full stderr is no reason to fail the program: the line is dropped.
                let _ = writeln!(std::io::stderr(), "{line}");
            }
            Guard {
                trace_file: None,
                capture_file: None,
                live_socket: None,
                #[cfg(feature = "otlp")]
                otlp: None,
            }
        }
    }
}

#[cfg(feature = "otlp")]
impl Config {
    /// Export spans and metrics over OTLP with this configuration (instead of the one the
    /// `OTEL_*` variables give).
    pub fn otlp(mut self, config: crate::otlp::OtlpConfig) -> Self {
        self.otlp = Some(config);
        self
    }

    /// No OTLP export, whatever the environment says.
    pub fn no_otlp(mut self) -> Self {
        self.otlp = None;
        self
    }
}

/// Ends every measurement [`init`] started, now: flushes pending GPU work (bounded by five
/// seconds), writes the timeline, ends OTLP export (bounded by its shutdown timeout) and prints
/// the summary, as dropping the guard would. For programs that leave by
/// [`std::process::exit`], which runs no destructors:
///
/// ```no_run
/// let _guard = gpuspan::init();
/// // ... work ...
/// gpuspan::shutdown();
/// std::process::exit(3);
/// ```
///
/// Calling it again does nothing, and so does the guard's drop afterwards. Calls made after it
/// are still counted, but no longer written anywhere.
pub fn shutdown() {
    #[cfg(feature = "enabled")]
    imp::shutdown();
}

/// Ends the measurement when dropped; see [`init`] and [`shutdown`]. Without the `enabled`
/// feature it does nothing: gpuspan was built without instrumentation.
#[derive(Debug)]
pub struct Guard {
    /// The run (of `init`'s) this guard ends.
    #[cfg(feature = "enabled")]
    run: u64,
    trace_file: Option<PathBuf>,
    capture_file: Option<PathBuf>,
    live_socket: Option<PathBuf>,
    #[cfg(feature = "otlp")]
    otlp: Option<std::sync::Arc<crate::otlp::Otlp>>,
}

impl Guard {
    /// [`flush`](crate::flush) with a deadline of `timeout` instead of five seconds.
    /// Returns `true` when nothing is left pending (always without the `enabled` feature).
    pub fn flush(&self, timeout: Duration) -> bool {
        flush_within(timeout)
    }

    /// The path the timeline will be written to, if any (`None` without the `enabled` feature).
    pub fn trace_file(&self) -> Option<&Path> {
        self.trace_file.as_deref()
    }

    /// The path the capture file is being written to, if any (`None` without the `enabled`
    /// feature).
    pub fn capture_file(&self) -> Option<&Path> {
        self.capture_file.as_deref()
    }

    /// The live feed's socket, if one is served ([`Config::live`]; `None` without the `enabled`
    /// feature).
    pub fn live_socket(&self) -> Option<&Path> {
        self.live_socket.as_deref()
    }
}

/// The OTLP export's (feature `otlp`).
#[cfg(feature = "otlp")]
impl Guard {
    /// The running OTLP export, if any (`None` without the `enabled` feature: no export runs).
    pub fn otlp(&self) -> Option<&crate::otlp::Otlp> {
        self.otlp.as_deref()
    }

    /// The `tracing` layer exporting the application's own spans through the OTLP export
    /// (`None`, a layer that does nothing, when there is no export, and always without the
    /// `enabled` feature).
    pub fn otlp_layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S>>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        self.otlp.as_ref().and_then(|o| o.layer())
    }
}

/// The one line `init()` says in a build without `enabled` when the environment asks
/// gpuspan for something (any `GPUSPAN_*` variable): otherwise that build is silent, and a
/// user who set `GPUSPAN_TRACE_ALL=1` on a release build saw nothing and no reason.
#[cfg(not(feature = "enabled"))]
fn compiled_out_line(names: impl Iterator<Item = std::ffi::OsString>) -> Option<String> {
    let mut asked: Vec<String> =
        names.filter_map(|k| k.into_string().ok()).filter(|k| k.starts_with("GPUSPAN_")).collect();
    if asked.is_empty() {
        return None;
    }
    asked.sort();
    Some(format!(
        "gpuspan: {} set, but instrumentation is compiled out: this program was built without gpuspan's \
         `enabled` feature (add it, e.g. through a feature of your own that forwards `gpuspan/enabled`)",
        asked.join(", ")
    ))
}

#[cfg(all(test, not(feature = "enabled")))]
mod compiled_out_tests {
    use super::compiled_out_line;

    #[test]
    fn a_build_without_enabled_says_once_what_was_asked_and_why_nothing_happens() {
        let names = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>().into_iter();
        assert_eq!(compiled_out_line(names(&["HOME", "OTEL_SERVICE_NAME"])), None, "silent when nothing is asked");
        let line = compiled_out_line(names(&["PATH", "GPUSPAN_TRACE_ALL", "GPUSPAN_CAPTURE"])).expect("a line");
        assert!(
            line.starts_with("gpuspan: GPUSPAN_CAPTURE, GPUSPAN_TRACE_ALL set, but instrumentation is compiled out")
        );
        assert!(line.contains("`enabled` feature") && !line.contains('\n'), "{line}");
    }
}
