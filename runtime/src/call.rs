//! What a scope hands its backend when it ends: the call as the scope saw it, before it becomes
//! a record (on the resolver thread, for CUPTI).

use crate::clock;
use crate::record::{Interval, Record};
use crate::site::Site;

/// A finished call as its scope saw it, before it becomes a [`Record`]: small (the clock still
/// raw, memory marks boxed), so that a backend that resolves records on another thread (CUPTI)
/// hands over ~100 bytes instead of a whole record and does the conversion there.
#[derive(Debug)]
pub(crate) struct Call {
    pub site: &'static Site,
    pub scope_id: u64,
    pub thread: u32,
    pub error: bool,
    /// Raw host clock readings.
    pub host_start: u64,
    pub host_end: u64,
    pub bytes: Option<u64>,
    pub memory: Option<Box<(crate::memory::MemoryMark, crate::memory::MemoryMark)>>,
    pub parent: crate::parent::Parent,
    pub spans: crate::spans::Chain,
}

impl Call {
    pub(crate) fn into_record(self) -> Record {
        let host = Interval { start_ns: clock::raw_to_ns(self.host_start), end_ns: clock::raw_to_ns(self.host_end) };
        let mut record = Record::new(self.site, self.scope_id, self.thread, host);
        record.error = self.error;
        record.bytes = self.bytes;
        record.memory = self.memory.map(|m| *m);
        record.parent = self.parent;
        record.spans = self.spans;
        record
    }
}
