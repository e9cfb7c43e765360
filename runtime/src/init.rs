//! The embedded default: `let _guard = gpuspan::init();` and, at shutdown, a summary table on
//! stderr and a timeline file that Perfetto opens.

use std::path::PathBuf;

/// Where the timeline (or the capture) goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TraceFile {
    /// `<program>-<pid>.trace.json` in a private per-user directory: `$XDG_RUNTIME_DIR/gpuspan/`,
    /// else `gpuspan-<uid>/` in the temporary directory (created 0700).
    Default,
    Path(PathBuf),
    Off,
}

/// What [`init`] sets up. [`Config::from_env`] reads the `GPUSPAN_*` variables; the methods
/// override them in code. Switches take `on`/`off`, `1`/`0`, `true`/`false` or `yes`/`no` in
/// any case; a value that cannot be used is said once and the default applies.
///
/// | variable | effect |
/// |---|---|
/// | `GPUSPAN=off` | no measurement at all (each call costs one atomic load); at exit only the summary's one line saying so |
/// | `GPUSPAN_TRACE_FILE=path` / `off` | where the timeline is written, or no timeline |
/// | `GPUSPAN_CAPTURE=path` / `on` | write a capture file for the `gpuspan` CLI there (`on`: next to the timeline, as `<program>-<pid>.gpuspan`); off by default |
/// | `GPUSPAN_SUMMARY=off` | no summary table at shutdown |
/// | `GPUSPAN_THRESHOLD_US=n` | calls shorter than `n` µs are aggregated only (default 100) |
/// | `GPUSPAN_TRACE_ALL=on` | export every call |
/// | `GPUSPAN_ON_SIGNAL=flush` | on SIGINT/SIGTERM, write everything as [`shutdown`] does, then let the signal take its course |
/// | `GPUSPAN_LIVE=on` | serve the live feed that `gpuspan top` shows; see [`Config::live`] |
/// | `OTEL_EXPORTER_OTLP_ENDPOINT=url` | (feature `otlp`) spans and metrics to that collector; see [`crate::otlp::OtlpConfig`] |
#[derive(Debug, Clone)]
pub struct Config {
    summary: bool,
    trace_file: TraceFile,
    capture: TraceFile,
    threshold_us: Option<u64>,
    trace_all: Option<bool>,
    flush_on_signal: bool,
    live: bool,
    timeline_capacity: usize,
    #[cfg(feature = "otlp")]
    otlp: Option<crate::otlp::OtlpConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            summary: true,
            trace_file: TraceFile::Default,
            capture: TraceFile::Off,
            threshold_us: None,
            trace_all: None,
            flush_on_signal: false,
            live: false,
            timeline_capacity: 200_000,
            #[cfg(feature = "otlp")]
            otlp: None,
        }
    }
}

impl Config {
    /// Defaults, then the `GPUSPAN_*` environment variables of the table above (`GPUSPAN`
    /// itself is read by the run-time switch, on the first annotated call or at [`init`]).
    pub fn from_env() -> Self {
        // Without `enabled` nothing here would be used, so nothing is read.
        #[cfg_attr(not(feature = "enabled"), allow(unused_mut))]
        let mut c = Config::default();
        #[cfg(feature = "enabled")]
        {
            use crate::env;
            if let Some(on) = env::summary() {
                c.summary = on;
            }
            match env::trace_file() {
                Some(env::TraceFile::Off) => c.trace_file = TraceFile::Off,
                Some(env::TraceFile::Default) => c.trace_file = TraceFile::Default,
                Some(env::TraceFile::Path(p)) => c.trace_file = TraceFile::Path(p),
                None => {}
            }
            match env::capture() {
                Some(env::TraceFile::Off) => c.capture = TraceFile::Off,
                Some(env::TraceFile::Default) => c.capture = TraceFile::Default,
                Some(env::TraceFile::Path(p)) => c.capture = TraceFile::Path(p),
                None => {}
            }
            c.threshold_us = env::threshold_us();
            c.trace_all = env::trace_all();
            if let Some(on) = env::on_signal() {
                c.flush_on_signal = on;
            }
            if let Some(on) = env::live() {
                c.live = on;
            }
        }
        #[cfg(feature = "otlp")]
        if crate::otlp::OtlpConfig::env_requests_export() {
            c.otlp = Some(crate::otlp::OtlpConfig::from_env());
        }
        c
    }

    /// Export spans and metrics over OTLP with this configuration (instead of the one the
    /// `OTEL_*` variables give).
    #[cfg(feature = "otlp")]
    pub fn otlp(mut self, config: crate::otlp::OtlpConfig) -> Self {
        self.otlp = Some(config);
        self
    }

    /// No OTLP export, whatever the environment says.
    #[cfg(feature = "otlp")]
    pub fn no_otlp(mut self) -> Self {
        self.otlp = None;
        self
    }

    /// Print the summary table at shutdown (default on).
    pub fn summary(mut self, on: bool) -> Self {
        self.summary = on;
        self
    }

    /// Write the timeline to `path` at shutdown. Whatever is at `path` must be a regular file
    /// (it is replaced whole) or nothing: a symbolic link, a FIFO or a device is left alone and
    /// the timeline is not written (said once).
    pub fn trace_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.trace_file = TraceFile::Path(path.into());
        self
    }

    /// Write no timeline.
    pub fn no_trace_file(mut self) -> Self {
        self.trace_file = TraceFile::Off;
        self
    }

    /// Write a capture file to `path` as the program runs, for the `gpuspan` CLI (`gpuspan report
    /// <path>`): every sampled call with its host and GPU intervals and activities, then at the
    /// end every site's aggregates and what was lost. It is written as records arrive (flushed
    /// every 100 ms), so a killed program leaves a readable capture. The same rules as for
    /// [`Config::trace_file`] apply to what is at `path`.
    pub fn capture(mut self, path: impl Into<PathBuf>) -> Self {
        self.capture = TraceFile::Path(path.into());
        self
    }

    /// Write no capture file (the default, unless `GPUSPAN_CAPTURE` asks for one).
    pub fn no_capture(mut self) -> Self {
        self.capture = TraceFile::Off;
        self
    }

    /// Calls shorter than this are aggregated but not exported (default 100 µs).
    pub fn threshold_us(mut self, us: u64) -> Self {
        self.threshold_us = Some(us);
        self
    }

    /// Export every call whatever its duration.
    pub fn trace_all(mut self, on: bool) -> Self {
        self.trace_all = Some(on);
        self
    }

    /// On SIGINT or SIGTERM, write everything as [`shutdown`] does (summary, timeline, last
    /// exports; bounded in time), then let the signal take its course: the program's own handler
    /// if it installed one before [`init`] (it runs at once, as before), else the default action
    /// (the process ends by that signal). A second signal during the flush acts at once. Off by
    /// default: gpuspan installs no signal handler unless asked (`GPUSPAN_ON_SIGNAL=flush`).
    /// Unix only; elsewhere it is said once and ignored.
    pub fn flush_on_signal(mut self, on: bool) -> Self {
        self.flush_on_signal = on;
        self
    }

    /// Serve the live feed that `gpuspan top` attaches to (default off; `GPUSPAN_LIVE=on`): a
    /// Unix socket `<program>-<pid>.live.sock` in the private directory (mode 0600, directory
    /// 0700, answering only this user), removed at shutdown. A thread of its own answers it from
    /// the aggregates gpuspan keeps anyway, so an annotated call costs nothing more, and a client
    /// that stops reading is disconnected, never waited for. Unix only; elsewhere it is said
    /// once and ignored. docs/live.md describes what it serves.
    pub fn live(mut self, on: bool) -> Self {
        self.live = on;
        self
    }

    /// At most this many calls are kept for the timeline; later ones are counted as lost.
    pub fn timeline_capacity(mut self, events: usize) -> Self {
        self.timeline_capacity = events;
        self
    }

    /// Starts gpuspan with this configuration. Keep the guard alive until the end of `main`.
    #[must_use = "dropping the guard at once ends the measurement and prints the summary"]
    pub fn init(self) -> Guard {
        imp::init(self)
    }
}

/// Starts gpuspan from the environment; see [`Config`]. Keep the guard until the end of `main`:
/// dropping it flushes pending GPU work (bounded by five seconds), prints the summary and writes
/// the timeline.
#[must_use = "dropping the guard at once ends the measurement and prints the summary"]
pub fn init() -> Guard {
    Config::from_env().init()
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
pub(crate) use imp::shutdown_then;
#[cfg(feature = "enabled")]
pub use imp::Guard;

#[cfg(feature = "enabled")]
mod imp {
    use super::{Config, TraceFile};
    use crate::export::capture_file::{self, CaptureFile};
    #[cfg(unix)]
    use crate::export::live::Live;
    use crate::export::timeline::Timeline;
    use crate::pipeline::{self, Sink};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};

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

    /// What one [`init`](super::init) started and its end must finish. Kept process-wide, not in
    /// the guard, so that [`shutdown`](super::shutdown) (before `process::exit`) and the signal
    /// watcher can reach it; the guard's drop finishes its own.
    #[derive(Debug)]
    struct Running {
        id: u64,
        summary: bool,
        timeline: Option<(Arc<Timeline>, PathBuf)>,
        capture: Option<(Arc<CaptureFile>, PathBuf)>,
        live: Option<Live>,
        #[cfg(feature = "otlp")]
        otlp: Option<Arc<crate::otlp::Otlp>>,
    }

    static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    /// Held for a whole shutdown: a second caller (the guard's drop while the signal watcher is
    /// writing) waits until the files are complete instead of letting the process exit under it.
    static ENDING: Mutex<()> = Mutex::new(());

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn init(c: Config) -> Guard {
        crate::sampling::load_env();
        if let Some(us) = c.threshold_us {
            crate::sampling::set_threshold_us(us);
        }
        if let Some(on) = c.trace_all {
            crate::sampling::set_trace_all(on);
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        // GPUSPAN=off: nothing starts (no timeline, no export, no CUDA or NVML), and the end says
        // only that gpuspan was off.
        if !crate::switch::is_on() {
            lock(&RUNNING).push(Running {
                id,
                summary: c.summary,
                timeline: None,
                capture: None,
                live: None,
                #[cfg(feature = "otlp")]
                otlp: None,
            });
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
        // The device monitor is a leaf: it adds to records, the summary, `track_memory` marks
        // and the metrics through the core's hooks, plugged in here before anything it adds to
        // starts. Then device discovery and the background sampler (GPUSPAN_NVML_* settings).
        #[cfg(feature = "nvml")]
        {
            crate::monitor::register_hooks();
            crate::monitor::start_from_env();
        }
        let path = match c.trace_file {
            TraceFile::Off => None,
            TraceFile::Path(p) => Some(p),
            TraceFile::Default => default_path("trace.json", "timeline", "GPUSPAN_TRACE_FILE"),
        };
        let timeline = path.map(|p| {
            let t = Arc::new(Timeline::new(c.timeline_capacity));
            pipeline::add_sink(t.clone());
            (t, p)
        });
        let capture_path = match c.capture {
            TraceFile::Off => None,
            TraceFile::Path(p) => Some(p),
            TraceFile::Default => default_path("gpuspan", "capture", "GPUSPAN_CAPTURE"),
        };
        // The sampling in force, for the capture's header: what was set here, else the environment.
        let sampling = capture_file::Sampling {
            threshold_us: c
                .threshold_us
                .or_else(crate::env::threshold_us)
                .unwrap_or(crate::sampling::DEFAULT_THRESHOLD_US),
            trace_all: c.trace_all.or_else(crate::env::trace_all).unwrap_or(false),
        };
        // A capture that cannot be created is said; measuring goes on without it.
        let capture = capture_path.and_then(|p| match CaptureFile::create(&p, sampling) {
            Ok(f) => {
                pipeline::add_sink(f.clone());
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
        lock(&RUNNING).push(Running {
            id,
            summary: c.summary,
            timeline,
            capture,
            live,
            #[cfg(feature = "otlp")]
            otlp,
        });
        if c.flush_on_signal {
            crate::signal::flush_on_signal();
        }
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

    /// No Unix socket, no feed: a type with no value, so `Running` needs no `cfg` of its own.
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
        shutdown_then(|| {});
    }

    /// Finishes everything running, then runs `then` before any other shutdown can proceed (the
    /// signal watcher re-raises the signal there, so the guard's drop cannot exit normally first).
    pub(crate) fn shutdown_then(then: impl FnOnce()) {
        let _one = lock(&ENDING);
        let all = std::mem::take(&mut *lock(&RUNNING));
        for r in all {
            r.finish();
        }
        then();
    }

    impl Running {
        fn finish(self) {
            // First: `gpuspan top` sees the program end (its socket goes) rather than a feed
            // that stops changing while the rest is written.
            if let Some(live) = self.live {
                live.stop();
            }
            let off = !crate::switch::is_on();
            if !off && !crate::flush() {
                crate::diagnostics::note_once(
                    "some GPU measurements were still pending at shutdown (flush timed out after 5 s)",
                );
            }
            // Stop the sampler (bounded: 1 s) so the summary's device lines are final.
            #[cfg(feature = "nvml")]
            crate::monitor::stop();
            if let Some((f, path)) = self.capture {
                let sink: Arc<dyn Sink> = f.clone();
                pipeline::remove_sink(&sink);
                let w = f.finish();
                let lost = if w.lost > 0 { format!(" ({} not written)", w.lost) } else { String::new() };
                match w.error {
                    None => crate::diagnostics::say(format_args!(
                        "gpuspan: capture with {} calls{lost} written to {} (read it with `gpuspan report {}`)",
                        w.records,
                        path.display(),
                        path.display()
                    )),
                    Some(e) => crate::diagnostics::say(format_args!(
                        "gpuspan: the capture at {} stopped after {} calls{lost}: {e}",
                        path.display(),
                        w.records
                    )),
                }
            }
            if let Some((t, path)) = self.timeline {
                let sink: Arc<dyn Sink> = t.clone();
                pipeline::remove_sink(&sink);
                let calls = t.len();
                // Switched off before anything was recorded: an empty file would say nothing.
                if !(off && calls == 0) {
                    match t.write_file(&path) {
                        Ok(()) => crate::diagnostics::say(format_args!(
                            "gpuspan: timeline with {calls} calls written to {} (open it in https://ui.perfetto.dev)",
                            path.display()
                        )),
                        Err(e) => crate::diagnostics::say(format_args!(
                            "gpuspan: could not write the timeline to {}: {e}",
                            path.display()
                        )),
                    }
                }
            }
            #[cfg(feature = "otlp")]
            if let Some(o) = self.otlp {
                let to = o.destination();
                crate::diagnostics::say(format_args!("gpuspan: OTLP export to {to}: {}", o.shutdown_shared()));
            }
            #[cfg(feature = "cuda")]
            crate::cuda::at_shutdown();
            if self.summary {
                crate::diagnostics::say(format_args!("{}", crate::summary().to_string().trim_end()));
            }
        }
    }

    impl Guard {
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
            let _one = lock(&ENDING);
            let mine = {
                let mut running = lock(&RUNNING);
                running.iter().position(|r| r.id == self.id).map(|i| running.remove(i))
            };
            // Already finished by `shutdown()`: nothing left to do.
            if let Some(r) = mine {
                r.finish();
            }
        }
    }
}

#[cfg(not(feature = "enabled"))]
pub use off::Guard;

#[cfg(not(feature = "enabled"))]
mod imp {
    pub(super) fn init(_: super::Config) -> super::Guard {
        super::Guard { _private: () }
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
