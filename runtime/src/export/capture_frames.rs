//! The runtime's sites, aggregates and records' parts in the capture format's types, and the
//! capture's header: what the capture file's sink writes, kept apart from how it writes.

use crate::record::{DeviceLabel, Record};
use crate::site::{Site, SiteKind};
use gpuspan_capture as cap;
use std::io;

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
    ids: std::collections::HashMap<usize, u32>,
    pub sites: Vec<(&'static Site, T)>,
}

impl<T> SiteIds<T> {
    pub(super) fn new() -> Self {
        SiteIds { ids: std::collections::HashMap::new(), sites: Vec::new() }
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

pub(super) fn site_frame(id: u32, site: &Site) -> cap::Site {
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

/// Every call of a site, as the runtime aggregated them; `None` for a site never called.
pub(super) fn aggregate(id: u32, site: &Site) -> Option<cap::Aggregate> {
    let t = site.stats.totals();
    (t.calls > 0).then(|| cap::Aggregate {
        site: id,
        calls: t.calls,
        errors: t.errors,
        total_ns: t.total_ns,
        min_ns: t.min_ns,
        p50_ns: t.quantile(0.5).unwrap_or(0),
        p99_ns: t.quantile(0.99).unwrap_or(0),
        max_ns: t.max_ns,
        host_total_ns: t.host_total_ns,
        bytes: t.bytes,
        sources: t.sources.clone(),
        bracketed: t.bracketed,
    })
}

/// A record in the format's terms, given its site's id, its innermost span's id and the key of
/// each device it names (`device` writes a device's frame the first time it is asked).
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
pub(super) fn attribution(r: &Record) -> Option<cap::Attribution> {
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
