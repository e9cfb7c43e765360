//! A capture window: `capture <seconds>` on the live socket. While it is open, a sink that wants
//! every record (trace-all, through the pipeline's `wants_all`) encodes each call made in the
//! window as capture frames into a bounded queue, which the feed's thread moves to the client's
//! connection. Nothing else changes: the aggregates count every call as always, the other
//! sinks see what they saw, and when the window closes the sink leaves the pipeline, so the
//! sampling floor is what it was.
//!
//! The sink runs where records are submitted (the resolver's thread; a host-timed call's own
//! thread) and never waits for the client: it encodes the record's frames into the queue under
//! a lock that the feed's thread holds only to take bytes from the queue's front (no I/O under
//! it), and a record that finds the queue over [`MAX_QUEUE`] bytes is dropped and counted, in
//! the capture's end frame (its losses) and in the snapshot's `capture_window`.

use crate::aggregate::{bucket_of, quantile_of, BUCKETS};
use crate::export::imp::capture_encoder::{self as frames, Encoder, SpanMarks};
use crate::pipeline::Sink;
use crate::record::Record;
use gpuspan_capture as cap;
use std::collections::{HashSet, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// Encoded bytes the client has not taken yet, at most; records past it are dropped.
pub(super) const MAX_QUEUE: usize = 8 << 20;

/// What the loss of a record the client did not take is called in the capture's end.
const DROPPED: &str = "records dropped by the capture window (its client did not take them in time)";

/// The sink of one window.
#[derive(Debug)]
pub(super) struct WindowSink {
    state: Mutex<Window>,
}

/// Every call of one site made in the window (the window's aggregate frame).
#[derive(Debug)]
struct SiteCalls {
    calls: u64,
    errors: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
    host_total_ns: u64,
    bytes: u64,
    sources: Vec<cap::TimingSource>,
    bracketed: bool,
    buckets: Vec<u64>,
}

impl Default for SiteCalls {
    fn default() -> SiteCalls {
        SiteCalls {
            calls: 0,
            errors: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            host_total_ns: 0,
            bytes: 0,
            sources: Vec::new(),
            bracketed: false,
            buckets: Vec::new(),
        }
    }
}

impl SiteCalls {
    fn add(&mut self, r: &Record) {
        let d = r.duration_ns();
        self.calls += 1;
        self.errors += u64::from(r.error);
        self.total_ns = self.total_ns.saturating_add(d);
        self.min_ns = self.min_ns.min(d);
        self.max_ns = self.max_ns.max(d);
        self.host_total_ns = self.host_total_ns.saturating_add(r.host.duration_ns());
        self.bytes = self.bytes.saturating_add(r.bytes.unwrap_or(0));
        let s = r.source();
        if !self.sources.contains(&s) {
            self.sources.push(s);
        }
        self.bracketed |= r.gpu.as_ref().is_some_and(|g| g.bracketed);
        // Allocated with the first call: a window lists every site, most never called in it.
        if self.buckets.is_empty() {
            self.buckets.resize(BUCKETS, 0);
        }
        if let Some(b) = self.buckets.get_mut(bucket_of(d)) {
            *b += 1;
        }
    }

    fn frame(&self, site: u32) -> cap::Aggregate {
        let q = |q| quantile_of(&self.buckets, q).map_or(0, |v| v.clamp(self.min_ns, self.max_ns));
        cap::Aggregate {
            site,
            calls: self.calls,
            errors: self.errors,
            total_ns: self.total_ns,
            min_ns: self.min_ns,
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            max_ns: self.max_ns,
            host_total_ns: self.host_total_ns,
            bytes: self.bytes,
            sources: self.sources.clone(),
            bracketed: self.bracketed,
        }
    }
}

/// The window's capture and counts.
#[derive(Debug)]
struct Window {
    /// Frames not yet taken by the feed's thread (taken from the front: nothing else moves).
    encoder: Encoder<VecDeque<u8>, SiteCalls>,
    /// Calls that started before this are not the window's.
    start_ns: u64,
    /// Accepting records (until the window closes).
    open: bool,
    /// The first encoding error (none is expected: the frames go into memory).
    error: Option<String>,
    /// The queue's bound ([`MAX_QUEUE`]; a test's is smaller).
    limit: usize,
    /// Records encoded, and dropped for want of room.
    records: u64,
    dropped: u64,
    /// The losses the runtime had counted when the window opened (the end states the window's).
    losses_at_open: Vec<(&'static str, u64)>,
}

fn lock(m: &Mutex<Window>) -> MutexGuard<'_, Window> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl WindowSink {
    /// A window starting now: the header and every site compiled in are queued at once (the
    /// report lists the sites not called in the window).
    pub(super) fn open() -> io::Result<(Arc<WindowSink>, u64)> {
        let header = frames::header(0, true);
        let start_ns = header.start_ns;
        let out = VecDeque::with_capacity(64 * 1024);
        // The marks on the spans are the capture file's: the window keeps its own.
        let encoder = Encoder::new(out, &header, SpanMarks::Own(HashSet::new()))?;
        let e = Window {
            encoder,
            start_ns,
            open: true,
            error: None,
            limit: MAX_QUEUE,
            records: 0,
            dropped: 0,
            losses_at_open: crate::diagnostics::losses().snapshot(),
        };
        Ok((Arc::new(WindowSink { state: Mutex::new(e) }), start_ns))
    }

    /// Moves at most `room` queued bytes to `out`.
    pub(super) fn take(&self, room: usize, out: &mut Vec<u8>) {
        let mut e = lock(&self.state);
        let queued = e.encoder.out_mut();
        let n = room.min(queued.len());
        out.extend(queued.drain(..n));
    }

    /// Bytes queued and not taken.
    pub(super) fn queued(&self) -> usize {
        lock(&self.state).encoder.out().len()
    }

    /// (records encoded, records dropped) so far.
    pub(super) fn counts(&self) -> (u64, u64) {
        let e = lock(&self.state);
        (e.records, e.dropped)
    }

    /// Stops accepting and queues the window's aggregates and the end frame (past the queue's
    /// bound: the end is small and the client needs it). Call after the sink left the pipeline.
    pub(super) fn close(&self, end_ns: u64) {
        let mut e = lock(&self.state);
        if !e.open {
            return;
        }
        e.open = false;
        if let Err(err) = e.write_end(end_ns) {
            e.error.get_or_insert(err.to_string());
        }
    }
}

impl Sink for WindowSink {
    fn accept(&self, record: &Record) {
        let mut e = lock(&self.state);
        // A call that began before the window opened is not the window's (the resolver hands
        // over GPU work late).
        if !e.open || record.host.start_ns < e.start_ns || e.error.is_some() {
            return;
        }
        if e.encoder.out().len() >= e.limit {
            e.dropped += 1;
            e.count(record);
            return;
        }
        match e.write_record(record) {
            Ok(()) => e.records += 1,
            Err(err) => {
                e.dropped += 1;
                e.error.get_or_insert(err.to_string());
            }
        }
    }

    fn wants_all(&self) -> bool {
        true
    }
}

impl Window {
    /// Counts a call in its site's aggregate.
    fn count(&mut self, r: &Record) {
        if let Ok(id) = self.encoder.site_id(r.site) {
            self.count_at(id, r);
        }
    }

    fn count_at(&mut self, site: u32, r: &Record) {
        if let Some((_, calls)) = self.encoder.sites_mut().get_mut(site as usize) {
            calls.add(r);
        }
    }

    fn write_record(&mut self, r: &Record) -> io::Result<()> {
        let site = self.encoder.write_record(r)?;
        self.count_at(site, r);
        Ok(())
    }

    fn write_end(&mut self, end_ns: u64) -> io::Result<()> {
        let aggregates: Vec<cap::Aggregate> = self
            .encoder
            .sites()
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| c.calls > 0)
            .map(|(id, (_, c))| c.frame(u32::try_from(id).unwrap_or(u32::MAX)))
            .collect();
        // The window's losses: what the runtime lost meanwhile, and what the client did not take.
        let mut losses: Vec<cap::Loss> = crate::diagnostics::losses()
            .snapshot()
            .into_iter()
            .map(|(what, count)| {
                let before = self.losses_at_open.iter().find(|(w, _)| *w == what).map_or(0, |(_, c)| *c);
                cap::Loss { what: what.to_owned(), count: count.saturating_sub(before) }
            })
            .filter(|l| l.count > 0)
            .collect();
        if self.dropped > 0 {
            losses.push(cap::Loss { what: DROPPED.into(), count: self.dropped });
        }
        let end = cap::End { end_ns, records: self.records, losses, notes: crate::diagnostics::notes() };
        self.encoder.write_end(aggregates, Vec::new(), Vec::new(), end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Interval;
    use crate::site::{Backend, Site, SiteKind};

    static WINDOW_SITE: Site = Site::new(crate::site::site_desc!("window_site", SiteKind::Kernel, Backend::Host));

    fn record(start_ns: u64) -> Record {
        Record::new(&WINDOW_SITE, 1, 0, Interval { start_ns, end_ns: start_ns + 1_000 })
    }

    /// The window's sink in the pipeline: the site's aggregates count every call as they do
    /// without it (the summary is unchanged), the window holds only its own calls, and a full
    /// queue drops records (counted in the end) instead of waiting.
    #[test]
    fn a_window_sees_its_calls_and_changes_no_count() {
        let before = WINDOW_SITE.state.stats.totals().calls;
        for _ in 0..10 {
            crate::collector::submit(record(crate::clock::now_ns()));
        }
        let (sink, start_ns) = WindowSink::open().unwrap();
        let as_sink: Arc<dyn Sink> = sink.clone();
        crate::collector::add_sink(as_sink.clone());
        assert!(crate::collector::collector().sinks.wants_every_call(), "trace-all while the window is open");
        // A call that began before the window: counted as always, not the window's.
        crate::collector::submit(record(start_ns - 1));
        for _ in 0..20 {
            crate::collector::submit(record(crate::clock::now_ns()));
        }
        crate::collector::remove_sink(&as_sink);
        let end_ns = crate::clock::now_ns();
        sink.close(end_ns);
        for _ in 0..5 {
            crate::collector::submit(record(crate::clock::now_ns()));
        }
        assert_eq!(WINDOW_SITE.state.stats.totals().calls - before, 36, "every call counted, window or not");

        let mut bytes = Vec::new();
        sink.take(usize::MAX, &mut bytes);
        let c = cap::Capture::from_reader(&bytes[..]).unwrap();
        assert!(c.header.trace_all);
        let id = c.sites.iter().find(|s| s.name == "window_site").unwrap().id;
        let mine: Vec<_> = c.records.iter().filter(|r| r.site == id).collect();
        assert_eq!(mine.len(), 20);
        assert!(mine.iter().all(|r| r.host.start_ns >= c.header.start_ns && r.host.end_ns <= end_ns + 1_000));
        assert_eq!(c.aggregates.iter().find(|a| a.site == id).map(|a| a.calls), Some(20));
        assert_eq!(c.end.as_ref().map(|e| (e.records, e.end_ns)), Some((c.records.len() as u64, end_ns)));

        // A queue the client does not empty: records are dropped and counted, never waited for.
        let (full, _) = WindowSink::open().unwrap();
        lock(&full.state).limit = full.queued();
        full.accept(&record(crate::clock::now_ns()));
        assert_eq!(full.counts(), (0, 1));
        full.close(crate::clock::now_ns());
        let mut bytes = Vec::new();
        full.take(usize::MAX, &mut bytes);
        let c = cap::Capture::from_reader(&bytes[..]).unwrap();
        let end = c.end.unwrap();
        assert_eq!(end.records, 0);
        assert_eq!(end.losses.iter().find(|l| l.what == DROPPED).map(|l| l.count), Some(1));
        let id = c.sites.iter().find(|s| s.name == "window_site").unwrap().id;
        assert_eq!(c.aggregates.iter().find(|a| a.site == id).map(|a| a.calls), Some(1), "a dropped call still counts");
    }
}
