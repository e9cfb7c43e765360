//! Capturing records in tests (`gpuspan-testing`'s `Capture`): every finished call, sampled or
//! not, as it reaches the pipeline, of the calls made on the threads a capture watches
//! (docs/decisions.md, decision 22), so that tests running in parallel each see their own calls.
//!
//! Without the `enabled` feature no call produces a record: a capture starts, holds nothing and
//! ends, so that tests written against it compile either way.

// The sink a capture plugs into the collector: the instrumented build's.
#[cfg(feature = "enabled")]
mod imp;

use crate::record::Record;

/// Collects every record finished while it is alive: the calls made on the threads it watches
/// (decision 22). `gpuspan-testing`'s `Capture` is this, documented there. Made by
/// [`Capture::start`] only, in either build (its one field is the instrumented build's).
#[derive(Debug)]
#[non_exhaustive]
pub struct Capture {
    #[cfg(feature = "enabled")]
    sink: imp::Plugged,
}

impl Capture {
    /// Starts capturing the calls this thread makes from now on, sampled or not, until it is
    /// dropped.
    pub fn start() -> Capture {
        Self::with(true)
    }

    /// Starts capturing the calls every thread makes from now on (those of tests running at the
    /// same time included), until it is dropped.
    pub fn start_all_threads() -> Capture {
        Self::with(false)
    }

    /// A capture of this thread's calls (`only_this_thread`), else of every thread's.
    fn with(only_this_thread: bool) -> Capture {
        #[cfg(feature = "enabled")]
        return Capture { sink: imp::Plugged::new(only_this_thread) };
        #[cfg(not(feature = "enabled"))]
        {
            let _ = only_this_thread;
            Capture {}
        }
    }

    /// Everything captured so far (always empty without the `enabled` feature).
    pub fn records(&self) -> Vec<Record> {
        #[cfg(feature = "enabled")]
        return self.sink.records();
        #[cfg(not(feature = "enabled"))]
        Vec::new()
    }

    /// The records of the site with this display name.
    pub fn of(&self, name: &str) -> Vec<Record> {
        self.records().into_iter().filter(|r| r.site.desc.name == name).collect()
    }
}
