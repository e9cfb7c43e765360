//! What `init()` starts and its end finishes, in the instrumented build: the sinks, the live
//! feed, the signal and exit hooks, and the backends' start and end.

use super::Guard;
use crate::config::{Config, TraceFile, TraceFormat};
use crate::export::capture_file::{self, CaptureFile};
use crate::export::timeline::Timeline;
use crate::pipeline::Sink;
use crate::running::{Run, Running};
use live::{start_live, Live};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the end waits for pending GPU work, and for the files to be written.
const END_WITHIN: Duration = Duration::from_secs(5);

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
    // The guard names what starts below, as it starts.
    let mut guard = Guard {
        run: id,
        trace_file: None,
        capture_file: None,
        live_socket: None,
        #[cfg(feature = "otlp")]
        otlp: None,
    };
    // GPUSPAN=off: nothing starts (no timeline, no export, no CUDA or NVML), and the end says
    // only that gpuspan was off.
    if !crate::switch::is_on() {
        running().push(Box::new(Started { id, summary: c.summary, live: None, sinks: Vec::new() }));
        return guard;
    }
    // In a program that uses CUDA, start CUPTI now: work launched before the first annotated
    // call is recorded (as `unattributed`), and its start-up is not charged to that call.
    // A program that does not is told nothing about CUDA.
    crate::backends::at_init();
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
    let mut sinks: Vec<Arc<dyn Sink>> = Vec::new();
    if let Some((f, p)) = capture {
        guard.capture_file = Some(p);
        sinks.push(f);
    }
    if let Some((t, p)) = timeline {
        guard.trace_file = Some(p);
        sinks.push(t);
    }
    // A collector that cannot be set up is said once; measuring goes on without it.
    #[cfg(feature = "otlp")]
    if let Some(otlp) = c.otlp.and_then(|o| o.start().map_err(crate::diagnostics::note_once).ok()).map(Arc::new) {
        guard.otlp = Some(otlp.clone());
        sinks.push(otlp);
    }
    // Likewise a live feed that cannot be served.
    let live = if c.live { start_live() } else { None };
    guard.live_socket = live.as_ref().map(|l| l.path().to_owned());
    running().push(Box::new(Started { id, summary: c.summary, live, sinks }));
    // On by default (docs/decisions.md, 58): a run ended by Ctrl-C or SIGTERM keeps its files.
    if c.flush_on_signal != Some(false) {
        crate::signal::flush_on_signal(c.flush_on_signal == Some(true), shutdown_then);
    }
    // `process::exit` runs no destructors: the exit hook ends the run instead.
    crate::signal::on_exit(super::shutdown);
    guard
}

/// The live feed on Unix, in the private directory (said once when it cannot be served).
#[cfg(unix)]
mod live {
    pub(super) use crate::export::live::Live;

    pub(super) fn start_live() -> Option<Live> {
        let dir = crate::export::file::private_dir()
            .map_err(|e| {
                crate::diagnostics::note_once(format_args!(
                    "no live feed: there is no private directory for its socket ({e})"
                ))
            })
            .ok()?;
        Live::start(&dir).map_err(crate::diagnostics::note_once).ok()
    }
}

/// No Unix socket, no feed: a type with no value, so `Started` needs no `cfg` of its own.
#[cfg(not(unix))]
mod live {
    #[derive(Debug)]
    pub(super) enum Live {}

    impl Live {
        pub(super) fn path(&self) -> &std::path::Path {
            match *self {}
        }

        pub(super) fn stop(self) {
            match self {}
        }
    }

    pub(super) fn start_live() -> Option<Live> {
        crate::diagnostics::note_once("no live feed: it is served on a Unix socket, which this platform does not have");
        None
    }
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
        // The leaves stop what they run (the device monitor's sampler, bounded: 1 s), so that
        // the summary's device lines are final.
        if let Some(devices) = crate::hooks::leaves().devices() {
            devices.end_of_run();
        }
        crate::collector::finish_sinks(&self.sinks, Instant::now() + END_WITHIN);
        crate::backends::at_shutdown();
        if self.summary {
            crate::diagnostics::say(format_args!("{}", crate::summary().to_string().trim_end()));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _one = running().ending();
        let mine = running().take(self.run);
        // Already finished by `shutdown()`: nothing left to do.
        if let Some(r) = mine {
            r.finish();
            crate::resolver::stop(Instant::now() + END_WITHIN);
        }
    }
}
