//! The capture's sink, plugged into the collector while its [`Capture`](super::Capture) lives.

use crate::pipeline::Sink;
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

/// A capture's sink while it is plugged into the collector: unplugged when dropped.
#[derive(Debug)]
pub(super) struct Plugged(Arc<CaptureSink>);

impl Plugged {
    /// Plugs a sink keeping the calls of this thread (`only_this_thread`), else of every thread.
    pub(super) fn new(only_this_thread: bool) -> Plugged {
        let threads = only_this_thread.then(|| vec![crate::thread::index()]);
        let sink = Arc::new(CaptureSink { records: Mutex::new(Vec::new()), threads });
        crate::collector::add_sink(sink.clone());
        Plugged(sink)
    }

    /// Everything captured so far.
    pub(super) fn records(&self) -> Vec<Record> {
        self.0.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Plugged {
    fn drop(&mut self) {
        let sink: Arc<dyn Sink> = self.0.clone();
        crate::collector::remove_sink(&sink);
    }
}
