//! Capturing records in tests: every finished call, sampled or not, as it reaches the pipeline,
//! of the calls made on the threads a capture watches (docs/decisions.md, decision 22), so that
//! tests running in parallel each see their own calls.

use crate::pipeline::{self, Sink};
use crate::record::Record;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
struct CaptureSink {
    records: Mutex<Vec<Record>>,
    /// The thread indices (`Record::thread`) of the calls it keeps; `None`: every thread.
    threads: Option<Vec<u32>>,
}

impl Sink for CaptureSink {
    fn accept(&self, record: &Record) {
        // Thread 0: GPU work that ran outside every call (CUPTI's `unattributed`), which no
        // thread owns; every capture sees it.
        let mine = record.thread == 0 || self.threads.as_ref().is_none_or(|t| t.contains(&record.thread));
        if !mine {
            return;
        }
        if let Ok(mut r) = self.records.lock() {
            r.push(record.clone());
        }
    }
    fn wants_all(&self) -> bool {
        true
    }
}

/// Collects every record finished while it is alive, for assertions in tests: the calls made
/// on the thread that started it (for an async call: a thread it ran on), so tests running in
/// parallel do not see one another's calls. A test whose calls run on threads of their own
/// (spawned threads, a multi-thread runtime) uses [`Capture::start_all_threads`].
///
/// ```
/// # #[cfg(feature = "enabled")] {
/// let capture = gpuspan::Capture::start();
/// // ... call annotated functions, then `gpuspan::flush()` for GPU backends ...
/// assert!(capture.records().is_empty());
/// # }
/// ```
#[derive(Debug)]
pub struct Capture {
    sink: Arc<CaptureSink>,
}

impl Capture {
    /// Starts capturing the calls this thread makes from now on, sampled or not, until it is
    /// dropped.
    pub fn start() -> Capture {
        Self::with(Some(vec![crate::thread::index()]))
    }

    /// Starts capturing the calls every thread makes from now on (those of tests running at the
    /// same time included), until it is dropped.
    pub fn start_all_threads() -> Capture {
        Self::with(None)
    }

    fn with(threads: Option<Vec<u32>>) -> Capture {
        let sink = Arc::new(CaptureSink { records: Mutex::new(Vec::new()), threads });
        pipeline::add_sink(sink.clone());
        Capture { sink }
    }

    /// Everything captured so far.
    pub fn records(&self) -> Vec<Record> {
        self.sink.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The records of the site with this display name.
    pub fn of(&self, name: &str) -> Vec<Record> {
        self.records().into_iter().filter(|r| r.site.desc.name == name).collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let sink: Arc<dyn Sink> = self.sink.clone();
        pipeline::remove_sink(&sink);
    }
}
