//! The one owner of the runtime's state: what `init()` starts writes into it, the scopes and the
//! resolver read from it. Each part belongs to the module that uses it (`pipeline::Sinks`,
//! `sampling::Settings`, `hooks::Leaves`, ...) and is built by a `const fn new()`, so the
//! process's collector is a plain static that costs the hot path no load of its own: its
//! address is a constant, as the address of each static it replaces was (docs/decisions.md,
//! "One owner"). Tests build private collectors, which share nothing with the process's.
//!
//! That holds while no code that other crates may compile names the collector: a generic
//! function, or an `#[inline]` one reachable from the public API (a scope's opening), that calls
//! [`collector()`] makes its symbol exported, and every access to it, the close path's floor
//! included, a load through the GOT (one more instruction per scope: `scripts/count-window`).
//! Such code calls a non-generic, non-inlined function instead (`diagnostics::note_once`,
//! `diagnostics::losses`, `thread::register`); the OTLP export's flag, read where a scope
//! opens, stays a static of its own.

use crate::pipeline::Sink;
use crate::record::Record;
use std::sync::Arc;
use std::time::Instant;

/// The runtime's state; see the module's documentation.
pub(crate) struct Collector {
    pub(crate) sinks: crate::pipeline::Sinks,
    pub(crate) sampling: crate::sampling::state::Settings,
    /// Whether the run's settings were resolved (`settings.rs`): by `init`, else from the
    /// environment at the first use; once per collector.
    pub(crate) settled: std::sync::Once,
    pub(crate) leaves: crate::hooks::state::Leaves,
    /// What the `init()`s started, for their end.
    pub(crate) running: crate::running::Running,
    /// Site indices and the per-thread shards of their aggregates.
    pub(crate) registry: crate::aggregate::state::Registry,
    /// Sites registered at run time (selected application spans).
    pub(crate) sites: crate::site::imp::AtRunTime,
    /// The span selection `init` made, and the sites of selected spans.
    pub(crate) selected: crate::span_scopes::Selected,
    /// Thread indices and names.
    pub(crate) names: crate::thread::state::Names,
    /// Every live thread's ring of counted calls.
    pub(crate) rings: crate::ring::state::Rings,
    /// Who wants application span chains.
    pub(crate) spans: crate::spans::state::Chains,
    /// The causality check's counts.
    pub(crate) checks: crate::causality::imp::Checks,
    /// Measurements lost, by cause.
    pub(crate) losses: crate::diagnostics::state::Losses,
    /// The one-time notes said so far.
    pub(crate) notes: crate::diagnostics::state::Notes,
    /// Whether the live feed runs (one at a time).
    #[cfg(unix)]
    pub(crate) live_feed: std::sync::atomic::AtomicBool,
    /// The thread that resolves the backends' pending GPU work.
    pub(crate) resolver: crate::resolver::state::Resolver,
    /// The SIGINT/SIGTERM handlers and the exit hook (`signal.rs`), read in signal context.
    pub(crate) signals: crate::signal::state::Signals,
    /// Numbers the output files' temporary names: they differ within the process (its pid is in
    /// the name) because there is one counter.
    pub(crate) temporary_names: std::sync::atomic::AtomicU32,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("sinks", &self.sinks)
            .field("sampling", &self.sampling)
            .field("leaves", &self.leaves)
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl Collector {
    pub(crate) const fn new() -> Self {
        Collector {
            sinks: crate::pipeline::Sinks::new(),
            sampling: crate::sampling::state::Settings::new(),
            settled: std::sync::Once::new(),
            leaves: crate::hooks::state::Leaves::new(),
            running: crate::running::Running::new(),
            registry: crate::aggregate::state::Registry::new(),
            sites: crate::site::imp::AtRunTime::new(),
            selected: crate::span_scopes::Selected::new(),
            names: crate::thread::state::Names::new(),
            rings: crate::ring::state::Rings::new(),
            spans: crate::spans::state::Chains::new(),
            checks: crate::causality::imp::Checks::new(),
            losses: crate::diagnostics::state::Losses::new(),
            notes: crate::diagnostics::state::Notes::new(),
            #[cfg(unix)]
            live_feed: std::sync::atomic::AtomicBool::new(false),
            resolver: crate::resolver::state::Resolver::new(),
            signals: crate::signal::state::Signals::new(),
            temporary_names: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Installs `sink`; the sampling floor follows when it wants every record.
    pub(crate) fn add_sink(&self, sink: Arc<dyn Sink>) {
        if self.sinks.add(sink) {
            self.sampling.refresh_floor(&self.sinks);
        }
    }

    /// Takes `sink` out; the sampling floor follows when it wanted every record.
    pub(crate) fn remove_sink(&self, sink: &Arc<dyn Sink>) {
        if self.sinks.remove(sink) {
            self.sampling.refresh_floor(&self.sinks);
        }
    }

    /// Whether a call of `site` lasting `duration_ns` would reach any sink: it is sampled, or a
    /// capture wants every record.
    #[inline]
    pub(crate) fn wants(&self, site: &crate::Site, duration_ns: u64) -> bool {
        self.sinks.wants_every_call() || self.sampling.is_sampled_duration(site, duration_ns)
    }

    /// Takes a finished record: the causality check, the site's aggregates, then, when sampled
    /// or wanted, what the leaves add and every sink that takes it. The one submission: the
    /// process's goes through [`submit`].
    pub(crate) fn submit(&self, mut record: Record) {
        self.checks.enforce(&mut record);
        record.site.state.stats.add(&record);
        let sampled = self.sampling.is_sampled_duration(record.site, record.duration_ns());
        if !sampled && !self.sinks.wants_every_call() {
            return;
        }
        // Once, here, so that every sink shows the same values.
        record.extra = self.leaves.record_attributes(&record);
        self.sinks.accept(&record, sampled);
    }

    /// Ends `sinks` in their order: each is taken out and finished, and its line said.
    pub(crate) fn finish_sinks(&self, sinks: &[Arc<dyn Sink>], deadline: Instant) {
        for sink in sinks {
            self.remove_sink(sink);
            if let Some(line) = sink.finish(deadline) {
                crate::diagnostics::state::say(format_args!("{line}"));
            }
        }
    }
}

/// The process's collector.
// process-wide because the scopes the macros expand reach it from any thread without a
// handle, and a const static costs them no load (its address is a constant).
static COLLECTOR: Collector = Collector::new();

/// The process's collector (a constant address: no load).
#[inline(always)]
pub(crate) fn collector() -> &'static Collector {
    &COLLECTOR
}

// The process's entry points. Not inlined (but `wants`, on the close path), so that code other
// crates inline (a backend's `finish`) calls them instead of naming the collector (see above).

/// Installs `sink` in the process's collector.
pub(crate) fn add_sink(sink: Arc<dyn Sink>) {
    collector().add_sink(sink);
}

/// Takes `sink` out of the process's collector.
pub(crate) fn remove_sink(sink: &Arc<dyn Sink>) {
    collector().remove_sink(sink);
}

/// Ends `sinks` in their order: each is taken out of the process's collector and finished, and
/// its line said.
pub(crate) fn finish_sinks(sinks: &[Arc<dyn Sink>], deadline: Instant) {
    collector().finish_sinks(sinks, deadline);
}

/// Whether a call of `site` lasting `duration_ns` would reach any sink: it is sampled, or a
/// capture wants every record. When not, the caller may count the call without building a record.
#[inline]
pub(crate) fn wants(site: &crate::Site, duration_ns: u64) -> bool {
    collector().wants(site, duration_ns)
}

/// Hands a finished record to the process's collector ([`Collector::submit`]).
pub(crate) fn submit(record: Record) {
    collector().submit(record);
}
