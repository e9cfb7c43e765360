//! Capturing records in tests (`gpuspan-testing`'s `Capture`): every finished call, sampled or
//! not, as it reaches the pipeline, of the calls made on the threads a capture watches
//! (docs/decisions.md, decision 22), so that tests running in parallel each see their own calls.
//!
//! Without the `enabled` feature no call produces a record: a capture starts, holds nothing and
//! ends, so that tests written against it compile either way.

#[cfg(feature = "enabled")]
use crate::pipeline::Sink;
use crate::record::Record;
#[cfg(feature = "enabled")]
use std::sync::{Arc, Mutex};

#[cfg(feature = "enabled")]
#[derive(Debug)]
struct CaptureSink {
    records: Mutex<Vec<Record>>,
    /// The thread indices (`Record::thread`) of the calls it keeps; `None`: every thread.
    threads: Option<Vec<u32>>,
}

#[cfg(feature = "enabled")]
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

/// Collects every record finished while it is alive: the calls made on the threads it watches
/// (decision 22). `gpuspan-testing`'s `Capture` is this, documented there.
#[derive(Debug)]
pub struct Capture {
    #[cfg(feature = "enabled")]
    sink: Arc<CaptureSink>,
    #[cfg(not(feature = "enabled"))]
    _private: (),
}

impl Capture {
    /// Starts capturing the calls this thread makes from now on, sampled or not, until it is
    /// dropped.
    pub fn start() -> Capture {
        #[cfg(feature = "enabled")]
        {
            Self::with(Some(vec![crate::thread::index()]))
        }
        #[cfg(not(feature = "enabled"))]
        {
            Capture { _private: () }
        }
    }

    /// Starts capturing the calls every thread makes from now on (those of tests running at the
    /// same time included), until it is dropped.
    pub fn start_all_threads() -> Capture {
        #[cfg(feature = "enabled")]
        {
            Self::with(None)
        }
        #[cfg(not(feature = "enabled"))]
        {
            Capture { _private: () }
        }
    }

    #[cfg(feature = "enabled")]
    fn with(threads: Option<Vec<u32>>) -> Capture {
        let sink = Arc::new(CaptureSink { records: Mutex::new(Vec::new()), threads });
        crate::collector::add_sink(sink.clone());
        Capture { sink }
    }

    /// Everything captured so far (always empty without the `enabled` feature).
    pub fn records(&self) -> Vec<Record> {
        #[cfg(feature = "enabled")]
        {
            self.sink.records.lock().map(|r| r.clone()).unwrap_or_default()
        }
        #[cfg(not(feature = "enabled"))]
        {
            Vec::new()
        }
    }

    /// The records of the site with this display name.
    pub fn of(&self, name: &str) -> Vec<Record> {
        self.records().into_iter().filter(|r| r.site.desc.name == name).collect()
    }
}

#[cfg(feature = "enabled")]
impl Drop for Capture {
    fn drop(&mut self) {
        let sink: Arc<dyn Sink> = self.sink.clone();
        crate::collector::remove_sink(&sink);
    }
}
