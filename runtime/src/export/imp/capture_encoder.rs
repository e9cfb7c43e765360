//! The one encoder of the runtime's records into capture frames, for both places that write
//! captures: the capture file (`capture_file.rs`) and the live feed's capture window
//! (`live/window.rs`). It keeps the id tables (sites, threads, devices, spans) and writes each
//! frame a record needs before the record, and the end frames in the format's order; each
//! caller keeps only what differs: where the bytes go, how it counts and what its end states.

use crate::export::summary::row::SiteSummary;
use crate::hooks::Readings;
use crate::record::{DeviceLabel, Record};
use crate::site::{Site, SiteKind};
use gpuspan_capture as cap;
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How an encoder knows which application spans it has described.
#[derive(Debug)]
pub(super) enum SpanMarks {
    /// By the mark on the span itself: the process's one capture file, so that nothing grows
    /// with the number of spans a long run makes.
    OnTheSpan,
    /// By its own set: a capture window (the marks on the spans are the file's).
    Own(HashSet<u64>),
}

/// A capture being encoded: its writer and what it has described so far. `T` is what the caller
/// keeps per site (a window's count of its calls).
#[derive(Debug)]
pub(super) struct Encoder<W: io::Write, T> {
    writer: cap::Writer<W>,
    sites: SiteIds<T>,
    threads: HashSet<u32>,
    devices: HashMap<(u32, Arc<str>), u32>,
    /// The link peaks the device readings said, by device.
    links: HashMap<(u32, Arc<str>), cap::LinkPeak>,
    /// The devices (keys) whose link frame is written.
    linked: HashSet<u32>,
    spans: SpanMarks,
}

impl<W: io::Write, T: Default> Encoder<W, T> {
    /// Writes the header and describes every site compiled in, reached or not (a report lists
    /// those never reached).
    pub(super) fn new(out: W, header: &cap::Header, spans: SpanMarks) -> io::Result<Self> {
        let mut e = Encoder {
            writer: cap::Writer::new(out, header)?,
            sites: SiteIds::new(),
            threads: HashSet::new(),
            devices: HashMap::new(),
            links: HashMap::new(),
            linked: HashSet::new(),
            spans,
        };
        for site in crate::sites::all_sites() {
            e.site_id(site)?;
        }
        Ok(e)
    }

    /// Where the bytes go.
    pub(super) fn out(&self) -> &W {
        self.writer.get_ref()
    }

    pub(super) fn out_mut(&mut self) -> &mut W {
        self.writer.get_mut()
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// The sites described, each with its id (its index) and what the caller keeps for it.
    pub(super) fn sites(&self) -> &[(&'static Site, T)] {
        &self.sites.sites
    }

    pub(super) fn sites_mut(&mut self) -> &mut [(&'static Site, T)] {
        &mut self.sites.sites
    }

    pub(super) fn frame(&mut self, frame: &cap::Frame) -> io::Result<()> {
        self.writer.write(frame)
    }

    /// The site's id, writing its frame the first time it is seen.
    pub(super) fn site_id(&mut self, site: &'static Site) -> io::Result<u32> {
        let writer = &mut self.writer;
        self.sites.id(site, T::default, |f| writer.write(f))
    }

    /// The device's key, writing its frame (and its link frame, where its peaks are known) the
    /// first time it is seen.
    pub(super) fn device(&mut self, d: &DeviceLabel) -> io::Result<u32> {
        let label = (d.id, d.name.clone());
        if let Some(k) = self.devices.get(&label) {
            return Ok(*k);
        }
        let key = u32::try_from(self.devices.len()).unwrap_or(u32::MAX);
        self.frame(&cap::Frame::Device(cap::Device { key, id: d.id, name: d.name.to_string() }))?;
        self.link(key, &label)?;
        self.devices.insert(label, key);
        Ok(key)
    }

    /// Writes the device's link frame, once, if its peaks are known.
    fn link(&mut self, key: u32, label: &(u32, Arc<str>)) -> io::Result<()> {
        let Some(peak) = self.links.get(label).copied() else { return Ok(()) };
        if self.linked.insert(key) {
            self.frame(&cap::Frame::Link(cap::DeviceLink { device: key, peak }))?;
        }
        Ok(())
    }

    /// One device's pulled readings: its link (for a device already described, now; else with
    /// its device frame) and its samples. The time of the last sample written, if any.
    pub(super) fn readings(&mut self, r: Readings) -> io::Result<Option<u64>> {
        let label = (r.device.id, r.device.name.clone());
        if let Some(peak) = r.link {
            self.links.insert(label.clone(), peak);
        }
        if let Some(&key) = self.devices.get(&label) {
            self.link(key, &label)?;
        }
        let Some(last) = r.samples.last().map(|x| x.time_ns) else { return Ok(None) };
        let device = self.device(&r.device)?;
        self.frame(&cap::Frame::Samples(cap::DeviceSamples { device, samples: r.samples }))?;
        Ok(Some(last))
    }

    /// Describes the spans of a chain not yet described, outermost first; the innermost's id.
    fn spans(&mut self, chain: &crate::spans::Chain) -> io::Result<Option<u64>> {
        let described = |marks: &SpanMarks, n: &crate::spans::state::SpanNode| match marks {
            SpanMarks::OnTheSpan => n.written.load(Ordering::Relaxed),
            SpanMarks::Own(set) => set.contains(&n.id),
        };
        let mut new = Vec::new();
        let mut at = chain.as_deref();
        while let Some(n) = at.filter(|n| !described(&self.spans, n)) {
            new.push(n);
            at = n.parent.as_deref();
        }
        for n in new.into_iter().rev() {
            let parent = n.parent.as_ref().map(|p| p.id);
            self.frame(&cap::Frame::Span(cap::Span { id: n.id, parent, name: n.name.to_owned() }))?;
            match &mut self.spans {
                SpanMarks::OnTheSpan => n.written.store(true, Ordering::Relaxed),
                SpanMarks::Own(set) => {
                    set.insert(n.id);
                }
            }
        }
        Ok(chain.as_ref().map(|n| n.id))
    }

    /// Writes a record with the frames it needs first (its site, thread, spans and devices)
    /// and the attribution frame after it; its site's id.
    pub(super) fn write_record(&mut self, r: &Record) -> io::Result<u32> {
        let site = self.site_id(r.site)?;
        if !self.threads.contains(&r.thread) {
            let name = crate::thread::name(r.thread);
            self.frame(&cap::Frame::Thread(cap::Thread { index: r.thread, name }))?;
            self.threads.insert(r.thread);
        }
        let span = self.spans(&r.spans)?;
        let record = record(r, site, span, |d| self.device(d))?;
        self.frame(&cap::Frame::Record(record))?;
        if let Some(a) = attribution(r) {
            self.frame(&cap::Frame::Attribution(a))?;
        }
        Ok(site)
    }

    /// The end frames in the format's order: the aggregates, the sites still running, each
    /// device's memory account, then the end.
    pub(super) fn write_end(
        &mut self,
        aggregates: Vec<cap::Aggregate>,
        running: Vec<u32>,
        accounts: Vec<(DeviceLabel, cap::MemoryAccount)>,
        end: cap::End,
    ) -> io::Result<()> {
        for a in aggregates {
            self.frame(&cap::Frame::Aggregate(a))?;
        }
        if !running.is_empty() {
            self.frame(&cap::Frame::Running(cap::Running { sites: running }))?;
        }
        for (label, account) in accounts {
            let device = self.device(&label)?;
            self.frame(&cap::Frame::Memory(cap::MemoryAccount { device, ..account }))?;
        }
        self.frame(&cap::Frame::End(end))
    }

    pub(super) fn into_inner(self) -> W {
        self.writer.into_inner()
    }
}

/// The header of a capture starting now.
pub(super) fn header(threshold_us: u64, trace_all: bool) -> cap::Header {
    cap::Header {
        program: program_name(),
        pid: std::process::id(),
        hostname: hostname(),
        writer: format!("gpuspan {}", env!("CARGO_PKG_VERSION")),
        start_ns: crate::clock::now_ns(),
        threshold_us,
        trace_all,
    }
}

/// Whether a queue bracket measured the record, and where it ended (format 4).
pub(super) fn bracket(g: &crate::record::GpuTiming) -> cap::Bracket {
    match (g.bracketed, g.bracket_at_exit) {
        (false, _) => cap::Bracket::None,
        (true, false) => cap::Bracket::LastSubmit,
        (true, true) => cap::Bracket::Exit,
    }
}

/// The sites a capture has described, each with its id (its index) and what its encoder keeps
/// for it. Keyed by the site's address: a site is a `static` (or leaked), so its address is its
/// identity for the life of the process.
#[derive(Debug)]
pub(super) struct SiteIds<T> {
    ids: HashMap<usize, u32>,
    sites: Vec<(&'static Site, T)>,
}

impl<T> SiteIds<T> {
    pub(super) fn new() -> Self {
        SiteIds { ids: HashMap::new(), sites: Vec::new() }
    }

    /// `site`'s id; the first time, `write` is handed its `Site` frame under the new id, and
    /// `fresh()` is kept beside it.
    pub(super) fn id(
        &mut self,
        site: &'static Site,
        fresh: impl FnOnce() -> T,
        write: impl FnOnce(&cap::Frame) -> io::Result<()>,
    ) -> io::Result<u32> {
        let key = site as *const Site as usize;
        if let Some(id) = self.ids.get(&key) {
            return Ok(*id);
        }
        let id = u32::try_from(self.sites.len()).unwrap_or(u32::MAX);
        write(&cap::Frame::Site(site_frame(id, site)))?;
        self.ids.insert(key, id);
        self.sites.push((site, fresh()));
        Ok(id)
    }
}

fn site_frame(id: u32, site: &Site) -> cap::Site {
    let d = &site.desc;
    cap::Site {
        id,
        name: d.name.to_owned(),
        function: d.function.to_owned(),
        module_path: d.module_path.to_owned(),
        file: d.file.to_owned(),
        line: d.line,
        // A selected span's site is a kernel site in the runtime (it aggregates as one), and
        // says what it is in the capture (format 6).
        kind: if site.is_span() { SiteKind::Span } else { d.kind },
        backend: d.backend,
        direction: d.direction,
        threshold_us: d.threshold_us,
        trace_all: d.trace_all,
    }
}

/// The program's file name, as the default output names use it.
pub(crate) fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "program".into())
}

/// The host's name where the OS publishes it as a file (Linux); a merged timeline labels each
/// capture's process with it.
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_owned()).filter(|h| !h.is_empty())
}

/// Every call of a site, as the runtime aggregated them; `None` for a site never called. The
/// summary's row of the site, so that the capture and the summary state the same figures.
pub(super) fn aggregate(id: u32, site: &'static Site) -> Option<cap::Aggregate> {
    let s = SiteSummary::of(site);
    (s.calls > 0).then_some(cap::Aggregate {
        site: id,
        calls: s.calls,
        errors: s.errors,
        total_ns: s.total_ns,
        min_ns: s.min_ns,
        p50_ns: s.p50_ns,
        p99_ns: s.p99_ns,
        max_ns: s.max_ns,
        host_total_ns: s.host_total_ns,
        bytes: s.bytes,
        bracketed: s.bracketed,
        sources: s.sources,
    })
}

/// A record in the format's terms, given its site's id, its innermost span's id and the key of
/// each device it names (`device` writes a device's frame the first time it is asked). Also
/// the runtime's Perfetto timeline's (`perfetto.rs`), which builds a capture in memory.
pub(super) fn record(
    r: &Record,
    site: u32,
    span: Option<u64>,
    mut device: impl FnMut(&DeviceLabel) -> io::Result<u32>,
) -> io::Result<cap::Record> {
    let gpu = match &r.gpu {
        None => None,
        Some(g) => Some(cap::Gpu {
            interval: g.interval,
            busy_ns: g.busy_ns,
            source: g.source,
            clock_error_ns: g.clock_error_ns,
            bracket: bracket(g),
            device: g.device.as_ref().map(&mut device).transpose()?,
        }),
    };
    let mut activities = Vec::with_capacity(r.activities.len());
    for a in &r.activities {
        activities.push(cap::Activity {
            name: a.name.to_string(),
            interval: a.interval,
            kind: a.kind.clone(),
            stream: a.stream,
            device: a.device.as_ref().map(&mut device).transpose()?,
        });
    }
    let memory = r.memory.map(|(b, a)| {
        [b, a].map(|m| cap::Memory { process_rss_bytes: m.process_rss_bytes, device_used_bytes: m.device_used_bytes })
    });
    Ok(cap::Record {
        site,
        scope_id: r.scope_id,
        thread: r.thread,
        host: r.host,
        error: r.error,
        bytes: r.bytes,
        gpu,
        clock_corrected_ns: r.clock_corrected_ns,
        activities,
        memory,
        span,
        attributed: r.attributed,
        spans_at_launch: spans_at_launch(r),
    })
}

/// The frame after a record that says how its GPU work was attributed, where that was a question.
fn attribution(r: &Record) -> Option<cap::Attribution> {
    let spans = spans_at_launch(r);
    (r.attributed.is_some() || spans.is_some()).then_some(cap::Attribution { how: r.attributed, spans })
}

/// The spans entered when work nobody owned was launched, as its attributes name them.
fn spans_at_launch(r: &Record) -> Option<String> {
    r.fields.iter().find_map(|(name, v)| match v {
        crate::record::Value::Str(s) if [crate::record::DURING_SPANS, crate::record::OPEN_SPAN].contains(name) => {
            Some(s.to_string())
        }
        _ => None,
    })
}
