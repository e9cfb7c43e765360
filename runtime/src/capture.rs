//! Capturing records in tests: every finished call, sampled or not, as it reaches the pipeline.

use crate::pipeline::{self, Sink};
use crate::record::Record;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct CaptureSink {
    records: Mutex<Vec<Record>>,
}

impl Sink for CaptureSink {
    fn accept(&self, record: &Record) {
        if let Ok(mut r) = self.records.lock() {
            r.push(record.clone());
        }
    }
    fn wants_all(&self) -> bool {
        true
    }
}

/// Collects every record finished while it is alive, for assertions in tests.
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
    /// Starts capturing: every call finished from now on, sampled or not, until it is dropped.
    pub fn start() -> Capture {
        let sink = Arc::new(CaptureSink::default());
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
