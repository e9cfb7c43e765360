//! What a scope hands its backend when it ends: the call as the scope saw it, before it becomes
//! a record (on the resolver thread, for CUPTI).

use crate::clock;
use crate::record::{Interval, Record};
use crate::site::Site;

/// A finished call as its scope saw it, before it becomes a [`Record`]: small (the clock still
/// raw, memory marks boxed), so that a backend that resolves records on another thread (CUPTI)
/// hands over ~100 bytes instead of a whole record and does the conversion there.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub site: &'static Site,
    pub scope_id: u64,
    pub thread: u32,
    pub error: bool,
    /// `host_start` and `host_end` are on the backend's own clock (a CUPTI window's ends, in
    /// nanoseconds), which the backend maps onto the host clock; otherwise raw host clock
    /// readings. Read only by a backend with its own clock (`BackendScope::own_clock`).
    #[allow(dead_code)] // a build without such a backend never reads it
    pub on_own_clock: bool,
    pub host_start: u64,
    pub host_end: u64,
    pub bytes: Option<u64>,
    pub memory: Option<Box<(crate::memory::MemoryMark, crate::memory::MemoryMark)>>,
    pub parent: crate::parent::Parent,
    pub spans: crate::spans::Chain,
    /// A selected span's fields (`span_scopes.rs`); boxed, as few calls have any.
    pub fields: Option<Box<crate::record::Fields>>,
    /// Dropped by its backend if no GPU work came: another backend timed it (`backends.rs`,
    /// a span's two parts).
    pub only_if_gpu: bool,
}

impl Call {
    /// The record of a call timed by the host clock.
    pub(crate) fn into_record(self) -> Record {
        let host = Interval { start_ns: clock::raw_to_ns(self.host_start), end_ns: clock::raw_to_ns(self.host_end) };
        self.into_record_at(host)
    }

    /// The record, with the call's ends already on the host clock (a CUDA window's, mapped).
    pub(crate) fn into_record_at(self, host: Interval) -> Record {
        let mut record = Record::new(self.site, self.scope_id, self.thread, host);
        record.error = self.error;
        record.bytes = self.bytes;
        record.memory = self.memory.map(|m| *m);
        record.parent = self.parent;
        record.spans = self.spans;
        record.only_if_gpu = self.only_if_gpu;
        if let Some(f) = self.fields {
            record.fields = *f;
        }
        record
    }
}
