//! The capture file: every sampled record, written as it arrives, in the versioned format of
//! the `gpuspan-capture` crate, which the `gpuspan` CLI reads (docs/decisions.md, decision 20).
//!
//! Written incrementally so that a process killed mid-run leaves a readable file: frames go into
//! a 64 KiB buffer under a lock on the resolver's thread (never the caller's), and a small
//! thread flushes that buffer every [`FLUSH_EVERY`] when something was added, so at most that
//! much of the run is lost to a kill. At the end come the aggregates of every call and the
//! losses, then the file is complete. The file is opened as every gpuspan output is (never
//! through a link, never blocking, only a regular file: see [`super::file`]); it cannot be
//! written under a temporary name and renamed, since a killed process must leave it in place.
//!
//! One writer per file: the file is locked for this process while it writes
//! ([`super::file::create_exclusive`]); a process that finds the path held by another (every
//! rank of a job launched with one `GPUSPAN_CAPTURE`) writes `<stem>.<pid>.<ext>` beside it, and
//! its end-of-run line names that file. The file stops short of the file-size limit
//! (`ulimit -f`) instead of raising SIGXFSZ ([`super::file::Bounded`]). A record counts as
//! written once every byte of its frame is in the file (a reader can read it); those still
//! buffered when a write fails count as not written.
//!
//! While a capture is written, scopes take the application `tracing` spans they were made in
//! (`crate::spans`); each span instance is written once, before the first record made in it. The
//! device monitor's readings, where one runs, are pulled through the core's hooks at each flush,
//! with each device's link peaks: written once per device, right after its device frame when
//! known by then (the first pull is at the start), else as soon as a pull brings them.

use super::capture_encoder::{self as frames, Encoder, SpanMarks};
use super::file::Bounded;
use crate::hooks::{Leaves, Readings};
use crate::pipeline::Sink;
use crate::record::{DeviceLabel, Record};
use gpuspan_capture as cap;
use std::collections::VecDeque;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) use super::capture_encoder::program_name;

/// How long a written record may sit in the buffer before it reaches the file.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// How the run sampled, for the header (readers need it to know what the records are a sample of).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampling {
    pub threshold_us: u64,
    pub trace_all: bool,
}

/// The sink writing the capture.
#[derive(Debug)]
pub(crate) struct CaptureFile {
    path: PathBuf,
    state: Mutex<State>,
    /// Wakes the flusher early to stop.
    wake: Condvar,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// Records that reached the sink after the file failed or was closed.
    lost: AtomicU64,
    /// Where the device readings come from (the process's collector's leaves).
    leaves: &'static Leaves,
}

#[derive(Debug)]
struct State {
    /// `None` once a write failed or the file was closed.
    encoder: Option<Encoder<BufWriter<Bounded>, ()>>,
    /// The first write error; nothing is written after it.
    error: Option<io::Error>,
    /// Records whose frames are wholly in the file.
    records: u64,
    /// Where each record frame still (partly) in the buffer ends, in bytes from the file's
    /// start, oldest first.
    buffered: VecDeque<u64>,
    /// Records that were buffered when writing failed.
    dropped: u64,
    stopping: bool,
    dirty: bool,
    /// The device readings written reach up to here (Unix-epoch ns).
    readings_until: u64,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the capture ended with, for the line printed at exit.
#[derive(Debug)]
pub(crate) struct Written {
    pub records: u64,
    pub lost: u64,
    pub error: Option<io::Error>,
}

impl CaptureFile {
    /// Creates the file at `path` (or beside it, where another process writes `path`: see
    /// [`CaptureFile::path`]), writes its header and the sites compiled into the program,
    /// and starts the flusher.
    pub(crate) fn create(path: &Path, sampling: Sampling) -> io::Result<Arc<CaptureFile>> {
        Self::create_with(path, sampling, crate::hooks::leaves())
    }

    /// [`CaptureFile::create`], its device readings asked of `leaves`.
    fn create_with(path: &Path, sampling: Sampling, leaves: &'static Leaves) -> io::Result<Arc<CaptureFile>> {
        let (file, path) = super::file::create_exclusive(path)?;
        let header = frames::header(sampling.threshold_us, sampling.trace_all);
        let out = BufWriter::with_capacity(64 * 1024, Bounded::new(file));
        // The header and every site compiled in, reached or not: the report lists those never
        // reached.
        let mut encoder = Encoder::new(out, &header, SpanMarks::OnTheSpan)?;
        encoder.flush()?;
        let state = State {
            encoder: Some(encoder),
            error: None,
            records: 0,
            buffered: VecDeque::new(),
            dropped: 0,
            stopping: false,
            dirty: false,
            readings_until: header.start_ns,
        };
        crate::spans::want();
        let capture = Arc::new(CaptureFile {
            path,
            state: Mutex::new(state),
            wake: Condvar::new(),
            flusher: Mutex::new(None),
            lost: AtomicU64::new(0),
            leaves,
        });
        let weak = Arc::downgrade(&capture);
        let spawned = std::thread::Builder::new().name("gpuspan-capture".into()).spawn(move || {
            while let Some(c) = weak.upgrade() {
                if !c.flush_then_wait() {
                    break;
                }
            }
        });
        match spawned {
            Ok(h) => *capture.flusher.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
            // Still written, only later: at the end, or as the buffer fills.
            Err(e) => crate::diagnostics::note_once(format_args!(
                "the capture file is flushed only when its buffer fills (no thread for periodic flushes: {e})"
            )),
        }
        Ok(capture)
    }

    /// The path the file is written to: the one asked for, or the one beside it.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the device readings taken since the last ones written.
    fn write_readings(&self) {
        let since = lock(&self.state).readings_until;
        // Read outside the lock: the monitor takes its own.
        if let Some(devices) = self.leaves.devices() {
            self.write_samples(devices.readings(since));
        }
    }

    fn write_samples(&self, readings: Vec<Readings>) {
        let mut s = lock(&self.state);
        for r in readings {
            if let Err(e) = s.readings(r) {
                s.fail(e);
            }
        }
    }

    /// The flusher's step: writes out what was added, then waits. `false` once stopping.
    fn flush_then_wait(&self) -> bool {
        self.write_readings();
        let mut s = lock(&self.state);
        if s.dirty {
            s.dirty = false;
            if let Some(w) = &mut s.encoder {
                if let Err(e) = w.flush() {
                    s.fail(e);
                }
            }
            s.settle();
        }
        if s.stopping {
            return false;
        }
        let (s, _) = self.wake.wait_timeout(s, FLUSH_EVERY).unwrap_or_else(|e| e.into_inner());
        !s.stopping
    }

    /// Writes the aggregates of every site seen and the end marker, and closes the file.
    pub(crate) fn close(&self) -> Written {
        {
            lock(&self.state).stopping = true;
            self.wake.notify_all();
        }
        if let Some(h) = self.flusher.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        self.write_readings();
        // Read with the summary, outside the lock (each device takes its own): the accounts as
        // the run ends.
        let accounts = self.leaves.memory_accounts(true);
        let mut s = lock(&self.state);
        // What the end states is what a reader finds: every record before it is in the file.
        if let Some(w) = &mut s.encoder {
            if let Err(e) = w.flush() {
                s.fail(e);
            }
        }
        s.settle();
        let lost = self.lost.load(Ordering::Relaxed) + s.dropped;
        if s.encoder.is_some() {
            let records = s.records;
            if let Err(e) = s.write_end(records, lost, accounts) {
                s.fail(e);
            }
        }
        s.encoder = None;
        Written { records: s.records, lost: self.lost.load(Ordering::Relaxed) + s.dropped, error: s.error.take() }
    }
}

impl Sink for CaptureFile {
    fn accept(&self, record: &Record) {
        let mut s = lock(&self.state);
        if s.encoder.is_none() || s.stopping {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match s.write_record(record) {
            Ok(()) => {
                s.dirty = true;
                let end = s.position();
                s.buffered.push_back(end);
                s.settle();
            }
            Err(e) => {
                s.fail(e);
                self.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    /// Closes the file (the end is small and already in memory: no deadline of its own).
    fn finish(&self, _deadline: Instant) -> Option<String> {
        let w = self.close();
        let path = self.path.display();
        let lost = if w.lost > 0 { format!(" ({} not written)", w.lost) } else { String::new() };
        Some(match w.error {
            None => format!(
                "gpuspan: capture with {} calls{lost} written to {path} (read it with `gpuspan report {path}`)",
                w.records
            ),
            Some(e) => format!("gpuspan: the capture at {path} stopped after {} calls{lost}: {e}", w.records),
        })
    }
}

impl State {
    /// Stops writing: the records still buffered count as not written.
    fn fail(&mut self, e: io::Error) {
        self.settle();
        self.dropped += self.buffered.len() as u64;
        self.buffered.clear();
        self.encoder = None;
        self.error.get_or_insert(e);
    }

    /// Bytes written so far, those in the buffer included.
    fn position(&self) -> u64 {
        self.encoder.as_ref().map(Encoder::out).map_or(0, |w| w.get_ref().written() + w.buffer().len() as u64)
    }

    /// Counts as written the buffered records now wholly in the file.
    fn settle(&mut self) {
        let Some(w) = &self.encoder else { return };
        let in_file = w.out().get_ref().written();
        while self.buffered.front().is_some_and(|end| *end <= in_file) {
            self.buffered.pop_front();
            self.records += 1;
        }
    }

    /// One device's pulled readings: its link (for a device already written, now; else with
    /// its device frame) and its samples.
    fn readings(&mut self, r: Readings) -> io::Result<()> {
        let before = self.position();
        let Some(w) = &mut self.encoder else { return Ok(()) };
        if let Some(last) = w.readings(r)? {
            self.readings_until = self.readings_until.max(last);
        }
        // Something to flush: samples, or a link frame alone.
        self.dirty |= self.position() != before;
        Ok(())
    }

    fn write_record(&mut self, r: &Record) -> io::Result<()> {
        match &mut self.encoder {
            Some(w) => w.write_record(r).map(drop),
            None => Ok(()),
        }
    }

    fn write_end(
        &mut self,
        records: u64,
        lost: u64,
        accounts: Vec<(DeviceLabel, cap::MemoryAccount)>,
    ) -> io::Result<()> {
        let Some(mut w) = self.encoder.take() else { return Ok(()) };
        let (mut aggregates, mut running) = (Vec::new(), Vec::new());
        for (id, (site, ())) in w.sites().iter().enumerate() {
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            aggregates.extend(frames::aggregate(id, site));
            // As the summary's "still running at shutdown": entered, nothing finished.
            if site.was_entered() && site.state.stats.totals().calls == 0 {
                running.push(id);
            }
        }
        let mut losses: Vec<cap::Loss> = crate::diagnostics::losses()
            .snapshot()
            .into_iter()
            .map(|(what, count)| cap::Loss { what: what.to_owned(), count })
            .collect();
        if lost > 0 {
            losses.push(cap::Loss { what: "records not written to the capture".into(), count: lost });
        }
        let end = cap::End { end_ns: crate::clock::now_ns(), records, losses, notes: crate::diagnostics::notes() };
        w.write_end(aggregates, running, accounts, end)?;
        w.into_inner().into_inner().map(drop).map_err(io::IntoInnerError::into_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Activity, ActivityKind, GpuTiming, Interval, MemoryKind, TimingSource};
    use crate::site::{Backend, Direction, Site, SiteDesc, SiteKind};
    use std::sync::atomic::AtomicBool;

    fn site(name: &'static str) -> &'static Site {
        Box::leak(Box::new(Site::new(SiteDesc {
            direction: Some(Direction::CpuToGpu),
            trace_all: true,
            ..crate::site::site_desc!(name, SiteKind::Transfer, Backend::Cuda)
        })))
    }

    #[test]
    fn records_read_back_as_written_and_a_kill_leaves_what_was_flushed() {
        let dir = std::env::temp_dir().join(format!("gpuspan-capture-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("c.gpuspan");
        let sampling = Sampling { threshold_us: 100, trace_all: false };
        // No device monitor answers this capture's pulls.
        let c = CaptureFile::create_with(&path, sampling, Box::leak(Box::new(Leaves::new()))).unwrap();
        let s = site("upload");
        let device = Some(DeviceLabel { id: 0, name: "H200".into() });
        let mut r = Record::new(s, 42, 1, Interval { start_ns: 1_000, end_ns: 9_000 });
        r.bytes = Some(4096);
        r.gpu = Some(GpuTiming {
            interval: Interval { start_ns: 2_000, end_ns: 5_000 },
            busy_ns: 3_000,
            source: TimingSource::Cupti,
            clock_error_ns: 7,
            bracketed: false,
            bracket_at_exit: false,
            device: device.clone(),
        });
        r.clock_corrected_ns = 11;
        r.activities.push(Activity {
            name: "memcpy".into(),
            interval: Interval { start_ns: 2_000, end_ns: 5_000 },
            kind: ActivityKind::Copy {
                bytes: 4096,
                direction: Some(Direction::CpuToGpu),
                src: MemoryKind::Pageable,
                dst: MemoryKind::Device,
            },
            stream: Some(7),
            device,
            src_device: None,
            dst_device: None,
        });
        c.accept(&r);
        c.accept(&r);
        let t0 = crate::clock::now_ns() + 1_000_000_000;
        let reading = |t| cap::DeviceSample { time_ns: t0 + t, power_w: Some(350.0), ..Default::default() };
        let device = DeviceLabel::new(0, "H200");
        c.write_samples(vec![Readings { device, link: None, samples: vec![reading(10), reading(20)] }]);
        assert_eq!(lock(&c.state).readings_until, t0 + 20, "the next pull asks for later readings only");
        // What the flusher wrote is on disk before the end: a process killed now leaves it.
        std::thread::sleep(FLUSH_EVERY * 3);
        let killed = cap::Capture::open(&path).unwrap();
        assert_eq!(killed.records.len(), 2);
        assert!(killed.truncation.is_some() && killed.end.is_none());

        let written = c.close();
        assert_eq!((written.records, written.lost), (2, 0));
        assert!(written.error.is_none());
        c.accept(&r);
        let back = cap::Capture::open(&path).unwrap();
        assert!(back.truncation.is_none());
        assert_eq!(back.header.pid, std::process::id());
        assert_eq!(back.header.threshold_us, 100);
        let rec = &back.records[1];
        let site = back.site(rec.site).unwrap();
        assert_eq!((site.name.as_str(), site.direction), ("upload", Some(cap::Direction::CpuToGpu)));
        assert_eq!(rec.scope_id, 42);
        assert_eq!(rec.host, cap::Interval::new(1_000, 9_000));
        assert_eq!(rec.bytes, Some(4096));
        assert_eq!(rec.clock_corrected_ns, 11);
        let gpu = rec.gpu.as_ref().unwrap();
        assert_eq!((gpu.busy_ns, gpu.clock_error_ns, gpu.source), (3_000, 7, cap::TimingSource::Cupti));
        assert_eq!(back.device(gpu.device.unwrap()).unwrap().name, "H200");
        assert_eq!(back.devices.len(), 1, "a device is described once");
        assert_eq!(back.samples.len(), 1);
        assert_eq!(back.samples[0].device, gpu.device.unwrap(), "readings name the records' device");
        assert_eq!(back.samples[0].samples.iter().map(|s| s.time_ns - t0).collect::<Vec<_>>(), [10, 20]);
        let a = &rec.activities[0];
        assert_eq!(a.stream, Some(7));
        assert!(matches!(a.kind, cap::ActivityKind::Copy { bytes: 4096, src: cap::MemoryKind::Pageable, .. }));
        assert_eq!(back.end.as_ref().unwrap().records, 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn accounts(_samples: bool) -> Vec<(DeviceLabel, cap::MemoryAccount)> {
        let account = cap::MemoryAccount { peak_bytes: 12, live_bytes: 4, live_objects: 1, ..Default::default() };
        vec![(DeviceLabel::new(3, "lavapipe"), account)]
    }

    #[test]
    fn a_backend_s_memory_account_is_written_at_the_end_naming_its_device() {
        let leaves: &'static Leaves = Box::leak(Box::new(Leaves::new()));
        leaves.accounts.add(accounts);
        let dir = std::env::temp_dir().join(format!("gpuspan-capture-memory-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("c.gpuspan");
        let c = CaptureFile::create_with(&path, Sampling { threshold_us: 0, trace_all: true }, leaves).unwrap();
        assert!(c.close().error.is_none());
        let back = cap::Capture::open(&path).unwrap();
        assert!(back.end.is_some());
        assert_eq!(back.memory.len(), 1);
        let m = &back.memory[0];
        assert_eq!((m.peak_bytes, m.live_bytes, m.live_objects), (12, 4, 1));
        let device = back.device(m.device).expect("the account's device is described");
        assert_eq!((device.id, device.name.as_str()), (3, "lavapipe"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A gen 5 x16 link with NVLink, or a gen 4 x16 one without (as the monitor would say).
    fn peak(generation: u32) -> cap::LinkPeak {
        let nvlink = (generation == 5).then_some(450e9);
        let pcie = Some(if generation == 5 { 63.015e9 } else { 31.508e9 });
        cap::LinkPeak {
            pcie_generation: Some(generation),
            pcie_width: Some(16),
            pcie_bytes_per_s: pcie,
            nvlink_bytes_per_s: nvlink,
        }
    }

    /// A device monitor without NVML: devices 0 and 2 with their links from the start, device 1
    /// whose link is learnt late; no samples.
    #[derive(Default)]
    struct Stub {
        /// Whether it knows device 1's link yet.
        late_link: AtomicBool,
    }

    impl crate::hooks::Devices for Stub {
        fn record_attributes(&self, _: &Record) -> Vec<(&'static str, crate::record::Value)> {
            Vec::new()
        }
        fn summary_section(&self, _: &[crate::SiteSummary]) -> Vec<String> {
            Vec::new()
        }
        fn memory_used(&self) -> Option<u64> {
            None
        }
        fn live_devices(&self) -> Result<Vec<gpuspan_capture::live::Device>, String> {
            Err("stub".into())
        }
        fn readings(&self, _since_ns: u64) -> Vec<Readings> {
            let links = [Some(peak(5)), self.late_link.load(Ordering::SeqCst).then(|| peak(4)), Some(peak(5))];
            let device = |id| DeviceLabel::new(id, "Stub GPU");
            (0..3).map(|id| Readings { device: device(id), link: links[id as usize], samples: vec![] }).collect()
        }
    }

    #[test]
    fn a_leaf_s_link_peaks_are_written_once_per_named_device_before_its_records_where_known() {
        let stub = Arc::new(Stub::default());
        let leaves: &'static Leaves = Box::leak(Box::new(Leaves::new()));
        *leaves.devices.write().unwrap() = Some(stub.clone());
        let dir = std::env::temp_dir().join(format!("gpuspan-capture-link-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("c.gpuspan");
        let c = CaptureFile::create_with(&path, Sampling { threshold_us: 0, trace_all: true }, leaves).unwrap();
        // The flusher pulls at once and every 100 ms; a pull here makes the order certain.
        c.write_readings();
        let s = site("upload_link");
        let on = |id, scope| {
            let mut r = Record::new(s, scope, 1, Interval { start_ns: 1_000, end_ns: 9_000 });
            r.gpu = Some(GpuTiming {
                interval: Interval { start_ns: 2_000, end_ns: 5_000 },
                busy_ns: 3_000,
                source: TimingSource::Cupti,
                clock_error_ns: 0,
                bracketed: false,
                bracket_at_exit: false,
                device: Some(DeviceLabel::new(id, "Stub GPU")),
            });
            r
        };
        c.accept(&on(0, 1));
        c.accept(&on(1, 2));
        stub.late_link.store(true, Ordering::SeqCst);
        c.write_readings();
        c.write_readings();
        c.accept(&on(1, 3));
        assert!(c.close().error.is_none());

        let file = std::fs::read(&path).unwrap();
        let mut reader = cap::Reader::new(&file[..]).unwrap();
        let mut order = Vec::new();
        while let Some(f) = reader.next_frame().unwrap() {
            match f {
                cap::Frame::Device(d) => order.push(format!("device {}", d.id)),
                cap::Frame::Link(l) => order.push(format!("link {}", l.device)),
                cap::Frame::Record(r) => order.push(format!("record {}", r.scope_id)),
                _ => {}
            }
        }
        assert_eq!(
            order,
            ["device 0", "link 0", "record 1", "device 1", "record 2", "link 1", "record 3"],
            "a known link follows its device frame; a late one comes with the next pull; each once"
        );
        let back = cap::Capture::open(&path).unwrap();
        assert_eq!(back.devices.len(), 2, "a device no record or reading names is not written");
        assert_eq!(back.link(0), Some(&peak(5)));
        assert_eq!(back.link(1), Some(&peak(4)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
