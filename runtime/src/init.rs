//! The composition root: what `init()` starts (backends, sinks, monitor, live feed) and what
//! the guard, or `shutdown()`, ends. [`Config`](crate::Config) says what to start.

#[cfg_attr(not(feature = "enabled"), allow(unused_imports))]
use crate::config::{Config, TraceFile};

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
    #[cfg(feature = "enabled")]
    {
        crate::resolver::flush_within(std::time::Duration::from_secs(5))
    }
    #[cfg(not(feature = "enabled"))]
    {
        true
    }
}

impl Config {
    /// Starts gpuspan with this configuration. Keep the guard alive until the end of `main`.
    #[must_use = "dropping the guard at once ends the measurement and prints the summary"]
    pub fn init(self) -> Guard {
        imp::init(self)
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
    imp::shutdown();
}

#[cfg(feature = "enabled")]
pub use imp::Guard;

#[cfg(feature = "enabled")]
mod imp {
    use super::{Config, TraceFile};
    use crate::config::TraceFormat;
    use crate::export::capture_file::{self, CaptureFile};
    #[cfg(unix)]
    use crate::export::live::Live;
    use crate::export::timeline::Timeline;
    use crate::pipeline::Sink;
    use crate::running::{Run, Running};
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// How long the end waits for pending GPU work, and for the files to be written.
    const END_WITHIN: Duration = Duration::from_secs(5);

    /// Ends the measurement when dropped; see [`init`](super::init) and [`shutdown`](super::shutdown).
    #[derive(Debug)]
    pub struct Guard {
        id: u64,
        trace_file: Option<PathBuf>,
        capture_file: Option<PathBuf>,
        live_socket: Option<PathBuf>,
        #[cfg(feature = "otlp")]
        otlp: Option<Arc<crate::otlp::Otlp>>,
    }

    /// What one [`init`](super::init) started and its end must finish. Kept in the collector
    /// (`running.rs`), not in the guard, so that [`shutdown`](super::shutdown) (before
    /// `process::exit`) and the signal watcher can reach it; the guard's drop finishes its own.
    #[derive(Debug)]
    struct Started {
        id: u64,
        summary: bool,
        live: Option<Live>,
        /// What this init writes to, in the order the end finishes them: the capture, the
        /// timeline, the OTLP export.
        sinks: Vec<Arc<dyn Sink>>,
    }

    fn running() -> &'static Running {
        &crate::collector::collector().running
    }

    pub(super) fn init(c: Config) -> Guard {
        // The run's settings, resolved once for the collector (decision 70).
        crate::settings::given(&c.settings);
        let id = running().next_id();
        // GPUSPAN=off: nothing starts (no timeline, no export, no CUDA or NVML), and the end says
        // only that gpuspan was off.
        if !crate::switch::is_on() {
            running().push(Box::new(Started { id, summary: c.summary, live: None, sinks: Vec::new() }));
            return Guard {
                id,
                trace_file: None,
                capture_file: None,
                live_socket: None,
                #[cfg(feature = "otlp")]
                otlp: None,
            };
        }
        // In a program that uses CUDA, start CUPTI now: work launched before the first annotated
        // call is recorded (as `unattributed`), and its start-up is not charged to that call.
        // A program that does not is told nothing about CUDA.
        #[cfg(feature = "cuda")]
        crate::cuda::start_at_init();
        // The spans `gpuspan::layer()` selects; with one, CUDA timing runs before the program's
        // first launch, which no annotated call announces.
        crate::span_scopes::select_from_init(c.settings.spans.as_deref());
        if crate::span_scopes::init_selects() {
            crate::backends::span_selected();
        }
        // The device monitor is a leaf: it adds to records, the summary, `track_memory` marks
        // and the metrics through the core's hooks, plugged in here before anything it adds to
        // starts. Then device discovery and the background sampler (GPUSPAN_NVML_* settings).
        #[cfg(feature = "nvml")]
        {
            crate::monitor::register_hooks();
            crate::monitor::start_from_env();
        }
        // The sampling in force (resolved above), for the capture's header.
        let (threshold_us, trace_all) = crate::sampling::in_force();
        let sampling = capture_file::Sampling { threshold_us, trace_all };
        // The timeline's format: as asked, else by its path's name; the default path's extension
        // follows it.
        let (path, format) = match c.trace_file {
            TraceFile::Off => (None, TraceFormat::Json),
            TraceFile::Path(p) => {
                let format = c.trace_format.unwrap_or_else(|| TraceFormat::of_path(&p));
                (Some(p), format)
            }
            TraceFile::Default => {
                let format = c.trace_format.unwrap_or(TraceFormat::Json);
                let extension = match format {
                    TraceFormat::Perfetto => "pftrace",
                    _ => "trace.json",
                };
                (default_path(extension, "timeline", "GPUSPAN_TRACE_FILE"), format)
            }
        };
        let timeline = path.map(|p| {
            let t = Arc::new(Timeline::to_file(c.timeline_capacity, p.clone(), format, sampling));
            crate::collector::add_sink(t.clone());
            (t, p)
        });
        let capture_path = match c.capture {
            TraceFile::Off => None,
            TraceFile::Path(p) => Some(p),
            TraceFile::Default => default_path("gpuspan", "capture", "GPUSPAN_CAPTURE"),
        };
        // A capture that cannot be created is said; measuring goes on without it.
        let capture = capture_path.and_then(|p| match CaptureFile::create(&p, sampling) {
            Ok(f) => {
                crate::collector::add_sink(f.clone());
                // Beside `p` where another process writes it.
                let p = f.path().to_owned();
                Some((f, p))
            }
            Err(e) => {
                crate::diagnostics::say(format_args!("gpuspan: could not write the capture to {}: {e}", p.display()));
                None
            }
        });
        // A collector that cannot be set up is said once; measuring goes on without it.
        #[cfg(feature = "otlp")]
        let otlp = c.otlp.and_then(|o| o.start().map_err(crate::diagnostics::note_once).ok()).map(Arc::new);
        // Likewise a live feed that cannot be served.
        let live = if c.live { start_live() } else { None };
        let guard = Guard {
            id,
            trace_file: timeline.as_ref().map(|(_, p)| p.clone()),
            capture_file: capture.as_ref().map(|(_, p)| p.clone()),
            live_socket: live.as_ref().map(|l| l.path().to_owned()),
            #[cfg(feature = "otlp")]
            otlp: otlp.clone(),
        };
        let mut sinks: Vec<Arc<dyn Sink>> = Vec::new();
        sinks.extend(capture.map(|(f, _)| f as Arc<dyn Sink>));
        sinks.extend(timeline.map(|(t, _)| t as Arc<dyn Sink>));
        #[cfg(feature = "otlp")]
        sinks.extend(otlp.map(|o| o as Arc<dyn Sink>));
        running().push(Box::new(Started { id, summary: c.summary, live, sinks }));
        // On by default (docs/decisions.md, 58): a run ended by Ctrl-C or SIGTERM keeps its files.
        if c.flush_on_signal != Some(false) {
            crate::signal::flush_on_signal(c.flush_on_signal == Some(true), shutdown_then);
        }
        // `process::exit` runs no destructors: the exit hook ends the run instead.
        crate::signal::on_exit(super::shutdown);
        guard
    }

    /// The live feed, in the private directory (said once when it cannot be served).
    #[cfg(unix)]
    fn start_live() -> Option<Live> {
        let dir = crate::export::file::private_dir()
            .map_err(|e| {
                crate::diagnostics::note_once(format_args!(
                    "no live feed: there is no private directory for its socket ({e})"
                ))
            })
            .ok()?;
        Live::start(&dir).map_err(crate::diagnostics::note_once).ok()
    }

    /// No Unix socket, no feed: a type with no value, so `Started` needs no `cfg` of its own.
    #[cfg(not(unix))]
    #[derive(Debug)]
    enum Live {}

    #[cfg(not(unix))]
    impl Live {
        fn path(&self) -> &std::path::Path {
            match *self {}
        }

        fn stop(self) {
            match self {}
        }
    }

    #[cfg(not(unix))]
    fn start_live() -> Option<Live> {
        crate::diagnostics::note_once("no live feed: it is served on a Unix socket, which this platform does not have");
        None
    }

    /// `<program>-<pid>.<extension>` in the private directory; `None` (said once) when there is
    /// no private directory to be had.
    fn default_path(extension: &str, what: &str, variable: &str) -> Option<PathBuf> {
        let program = capture_file::program_name();
        match crate::export::file::private_dir() {
            Ok(dir) => Some(dir.join(format!("{program}-{}.{extension}", std::process::id()))),
            Err(e) => {
                crate::diagnostics::note_once(format_args!(
                    "no {what}: there is no private directory to write it to ({e}); set {variable} to a path"
                ));
                None
            }
        }
    }

    /// Finishes everything running (see [`super::shutdown`]).
    pub(super) fn shutdown() {
        shutdown_then(&|| {});
    }

    /// Finishes everything running, then runs `then` before any other shutdown can proceed (the
    /// signal watcher re-raises the signal there, so the guard's drop cannot exit normally first).
    fn shutdown_then(then: &dyn Fn()) {
        let _one = running().ending();
        let all = running().take_all();
        let ended = !all.is_empty();
        for r in all {
            r.finish();
        }
        if ended {
            crate::resolver::stop(Instant::now() + END_WITHIN);
        }
        then();
    }

    impl Run for Started {
        fn id(&self) -> u64 {
            self.id
        }

        fn finish(self: Box<Self>) {
            // First: `gpuspan top` sees the program end (its socket goes) rather than a feed
            // that stops changing while the rest is written.
            if let Some(live) = self.live {
                live.stop();
            }
            if crate::switch::is_on() && !crate::resolver::flush_within(END_WITHIN) {
                crate::diagnostics::note_once(format_args!(
                    "some GPU measurements were still pending at shutdown (flush timed out after {} s)",
                    END_WITHIN.as_secs()
                ));
            }
            // Stop the sampler (bounded: 1 s) so the summary's device lines are final.
            #[cfg(feature = "nvml")]
            crate::monitor::stop();
            crate::collector::finish_sinks(&self.sinks, Instant::now() + END_WITHIN);
            #[cfg(feature = "cuda")]
            crate::cuda::at_shutdown();
            if self.summary {
                crate::diagnostics::say(format_args!("{}", crate::summary().to_string().trim_end()));
            }
        }
    }

    impl Guard {
        /// [`flush`](crate::flush) with a deadline of `timeout` instead of five seconds.
        /// Returns `true` when nothing is left pending.
        pub fn flush(&self, timeout: Duration) -> bool {
            crate::resolver::flush_within(timeout)
        }

        /// The path the timeline will be written to, if any.
        pub fn trace_file(&self) -> Option<&std::path::Path> {
            self.trace_file.as_deref()
        }

        /// The path the capture file is being written to, if any.
        pub fn capture_file(&self) -> Option<&std::path::Path> {
            self.capture_file.as_deref()
        }

        /// The live feed's socket, if one is served ([`Config::live`](super::Config::live)).
        pub fn live_socket(&self) -> Option<&std::path::Path> {
            self.live_socket.as_deref()
        }

        /// The running OTLP export, if any.
        #[cfg(feature = "otlp")]
        pub fn otlp(&self) -> Option<&crate::otlp::Otlp> {
            self.otlp.as_deref()
        }

        /// The `tracing` layer exporting the application's own spans through the OTLP export
        /// (`None`, a layer that does nothing, when there is no export).
        #[cfg(feature = "otlp")]
        pub fn otlp_layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S>>
        where
            S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
        {
            self.otlp.as_ref().and_then(|o| o.layer())
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            let _one = running().ending();
            let mine = running().take(self.id);
            // Already finished by `shutdown()`: nothing left to do.
            if let Some(r) = mine {
                r.finish();
                crate::resolver::stop(Instant::now() + END_WITHIN);
            }
        }
    }
}

#[cfg(not(feature = "enabled"))]
pub use off::Guard;

#[cfg(not(feature = "enabled"))]
mod imp {
    pub(super) fn init(_: super::Config) -> super::Guard {
        if let Some(line) = compiled_out_line(std::env::vars_os().map(|(k, _)| k)) {
            use std::io::Write;
            // A closed or full stderr is no reason to fail the program: the line is dropped.
            let _ = writeln!(std::io::stderr(), "{line}");
        }
        super::Guard { _private: () }
    }

    /// The one line `init()` says in a build without `enabled` when the environment asks
    /// gpuspan for something (any `GPUSPAN_*` variable): otherwise that build is silent, and a
    /// user who set `GPUSPAN_TRACE_ALL=1` on a release build saw nothing and no reason.
    pub(super) fn compiled_out_line(names: impl Iterator<Item = std::ffi::OsString>) -> Option<String> {
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

    pub(super) fn shutdown() {}
}

#[cfg(not(feature = "enabled"))]
mod off {
    /// Does nothing: gpuspan was built without its `enabled` feature.
    #[derive(Debug)]
    pub struct Guard {
        pub(super) _private: (),
    }

    impl Guard {
        /// Always `true` without the `enabled` feature: nothing is ever pending.
        pub fn flush(&self, _timeout: std::time::Duration) -> bool {
            true
        }

        /// Always `None`: no timeline is written with instrumentation compiled out.
        pub fn trace_file(&self) -> Option<&std::path::Path> {
            None
        }

        /// Always `None`: no capture is written with instrumentation compiled out.
        pub fn capture_file(&self) -> Option<&std::path::Path> {
            None
        }

        /// Always `None`: no live feed is served with instrumentation compiled out.
        pub fn live_socket(&self) -> Option<&std::path::Path> {
            None
        }

        /// Always `None` without the `enabled` feature: no export runs.
        #[cfg(feature = "otlp")]
        pub fn otlp(&self) -> Option<&crate::otlp::Otlp> {
            None
        }

        /// Always `None` without the `enabled` feature (a `None` layer does nothing).
        #[cfg(feature = "otlp")]
        pub fn otlp_layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S>>
        where
            S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
        {
            None::<tracing_subscriber::layer::Identity>
        }
    }
}

#[cfg(all(test, not(feature = "enabled")))]
mod compiled_out_tests {
    use super::imp::compiled_out_line;

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
