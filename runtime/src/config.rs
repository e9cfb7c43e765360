//! What `init()` sets up: [`Config`], read from the `GPUSPAN_*` variables and overridden in code.

use std::path::PathBuf;

// What only the instrumented build uses: the reading of the environment, paths' formats.
#[cfg(feature = "enabled")]
mod imp;

/// Where the timeline (or the capture) goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TraceFile {
    /// `<program>-<pid>.trace.json` in a private per-user directory: `$XDG_RUNTIME_DIR/gpuspan/`,
    /// else `gpuspan-<uid>/` in the temporary directory (created 0700).
    Default,
    Path(PathBuf),
    Off,
}

/// The timeline's file format ([`Config::trace_format`], `GPUSPAN_TRACE_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceFormat {
    /// Chrome Trace Event JSON, which Perfetto, chrome://tracing and most trace viewers open.
    Json,
    /// Perfetto's native protobuf trace (`TracePacket`s with track descriptors, interned names,
    /// flows and counters): Perfetto's own format, about 0.4× the JSON's size
    /// (docs/benchmarks.md).
    Perfetto,
}

/// The settings one collector holds for the whole run, as `init` was given them or (without
/// `init`) the environment says: resolved once (`settings.rs`, decision 70). `None`: the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Calls shorter than this many µs are aggregated only.
    pub(crate) threshold_us: Option<u64>,
    /// Export every call.
    pub(crate) trace_all: Option<bool>,
    /// The spans `layer()` selects, in `EnvFilter`'s directive syntax.
    pub(crate) spans: Option<String>,
}

/// What [`init`](crate::init()) sets up. [`Config::from_env`] reads the `GPUSPAN_*` variables; the methods
/// override them in code. Switches take `on`/`off`, `1`/`0`, `true`/`false` or `yes`/`no` in
/// any case; a value that cannot be used is said once and the default applies.
///
/// | variable | effect |
/// |---|---|
/// | `GPUSPAN=off` | no measurement at all (each call costs one atomic load); at exit only the summary's one line saying so |
/// | `GPUSPAN_TRACE_FILE=path` / `off` | where the timeline is written, or no timeline; a path ending in `.pftrace` or `.perfetto-trace` gets Perfetto's native format |
/// | `GPUSPAN_TRACE_FORMAT=json` / `perfetto` | the timeline's format, whatever its path; see [`Config::trace_format`] |
/// | `GPUSPAN_CAPTURE=path` / `on` | write a capture file for the `gpuspan` CLI there (`on`: next to the timeline, as `<program>-<pid>.gpuspan`); off by default |
/// | `GPUSPAN_SUMMARY=off` | no summary table at shutdown |
/// | `GPUSPAN_THRESHOLD_US=n` | calls shorter than `n` µs are aggregated only (default 100) |
/// | `GPUSPAN_TRACE_ALL=on` | export every call |
/// | `GPUSPAN_ON_SIGNAL=off` | leave SIGINT/SIGTERM alone (default `flush`: write everything as [`shutdown`](crate::shutdown) does, then end by the signal); see [`Config::flush_on_signal`] |
/// | `GPUSPAN_LIVE=on` | serve the live feed that `gpuspan top` shows; see [`Config::live`] |
/// | `GPUSPAN_SPANS=directives` | the `tracing` spans [`layer()`](crate::layer()) makes measurement scopes; see [`Config::spans`] |
/// | `OTEL_EXPORTER_OTLP_ENDPOINT=url` | (feature `otlp`) spans and metrics to that collector; see [`crate::otlp::OtlpConfig`] |
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) summary: bool,
    pub(crate) trace_file: TraceFile,
    /// `None`: by the path's name ([`TraceFormat::of_path`]), JSON for the default path.
    pub(crate) trace_format: Option<TraceFormat>,
    pub(crate) capture: TraceFile,
    /// What the collector holds for the whole run (the rest is what `init` starts).
    pub(crate) settings: Settings,
    /// `None`: the default (on where the platform has it).
    pub(crate) flush_on_signal: Option<bool>,
    pub(crate) live: bool,
    pub(crate) timeline_capacity: usize,
    /// The OTLP export to start (feature `otlp`; `()` without it, never read then).
    #[allow(dead_code)]
    pub(crate) otlp: crate::otlp_choice::OtlpChoice,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            summary: true,
            trace_file: TraceFile::Default,
            trace_format: None,
            capture: TraceFile::Off,
            settings: Settings::default(),
            flush_on_signal: None,
            live: false,
            timeline_capacity: 200_000,
            otlp: Default::default(),
        }
    }
}

impl Config {
    /// Defaults, then the `GPUSPAN_*` environment variables of the table above (`GPUSPAN`
    /// itself is read by the run-time switch, on the first annotated call or at [`init`](crate::init())).
    pub fn from_env() -> Self {
        let c = Config { otlp: crate::otlp_choice::from_env(), ..Config::default() };
        // Without `enabled` nothing else here would be used, so nothing else is read.
        #[cfg(feature = "enabled")]
        let c = c.with_env();
        c
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

    /// Write the timeline in `format` (default: Perfetto's native format for a path ending in
    /// `.pftrace` or `.perfetto-trace`, else Chrome JSON). The default path's extension follows
    /// the format (`.trace.json`, `.pftrace`). Both formats show the same slices, flows and
    /// counters; the native one lays them out as `gpuspan timeline` does, one process with the
    /// devices' tracks in it (docs/guide.md, "What happens to records").
    ///
    /// ```
    /// let config = gpuspan::Config::default().trace_file("run.trace").trace_format(gpuspan::TraceFormat::Perfetto);
    /// # drop(config);
    /// ```
    pub fn trace_format(mut self, format: TraceFormat) -> Self {
        self.trace_format = Some(format);
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
        self.settings.threshold_us = Some(us);
        self
    }

    /// Export every call whatever its duration.
    pub fn trace_all(mut self, on: bool) -> Self {
        self.settings.trace_all = Some(on);
        self
    }

    /// On SIGINT or SIGTERM, write everything as [`shutdown`](crate::shutdown) does (summary,
    /// timeline, capture, last exports; bounded in time), then end the program by that signal
    /// (its default action restored and the signal raised again: the exit status is the
    /// signal's). On by default; `false` (or `GPUSPAN_ON_SIGNAL=off`) installs no handler.
    /// gpuspan only takes a signal that would have ended the program: one the program handles
    /// (a handler installed before [`init`](crate::init()), or after it, `tokio::signal`
    /// included) is left to the program, whose own end then writes everything; an ignored
    /// signal stays ignored. A second signal during the flush ends the program at once. Unix
    /// only; elsewhere asking for it is said once and ignored.
    pub fn flush_on_signal(mut self, on: bool) -> Self {
        self.flush_on_signal = Some(on);
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

    /// Makes these application `tracing` spans measurement scopes, through the layer
    /// [`gpuspan::layer()`](crate::layer()) installed in the program's subscriber: the GPU work
    /// launched while a selected span is entered, on any thread, is that span's, and each span
    /// closed becomes a record named after it. `directives` are in `EnvFilter`'s syntax
    /// (`my_app::infer=info,candle=debug,[request]`); gpuspan's own spans are never selected.
    /// Overrides `GPUSPAN_SPANS`. docs/spans.md says how to read the result.
    pub fn spans(mut self, directives: impl Into<String>) -> Self {
        self.settings.spans = Some(directives.into());
        self
    }

    /// At most this many calls are kept for the timeline; later ones are counted as lost.
    pub fn timeline_capacity(mut self, events: usize) -> Self {
        self.timeline_capacity = events;
        self
    }
}
