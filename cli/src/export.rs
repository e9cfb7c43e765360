//! `gpuspan export`: a capture as tables any SQL client can query (SQLite), written in one
//! streaming pass: each frame becomes rows as it is read, so memory is one frame's plus
//! SQLite's page cache, whatever the capture's size.
//!
//! The schema ([`SQLITE_SCHEMA`], documented in docs/cli.md) is versioned by
//! [`SCHEMA_VERSION`], stored in the `meta` table: a change to a table or column is a new
//! version. Times are Unix-epoch nanoseconds on the writing host's clock, as in the capture;
//! columns name their unit (`_ns`, `_bytes`, `_pct`, `_mhz`, `_w`). Integers above `i64::MAX`
//! (SQLite's largest) are stored as `i64::MAX`; no real capture holds one.

use crate::load::{self, FrameReader, LoadError};
use gpuspan_capture::{Activity, ActivityKind, Frame, ReadError, Record, Truncation};
use rusqlite::{params, Connection, Statement, Transaction};
use std::path::{Path, PathBuf};

/// The version of the exported schema, in `meta` under `schema_version`.
pub const SCHEMA_VERSION: i64 = 1;

/// The tables, written before the first row. Indexes come after the rows (faster to build once).
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value);
CREATE TABLE sites (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, function TEXT, module_path TEXT, file TEXT,
    line INTEGER, kind TEXT, backend TEXT, direction TEXT, threshold_us INTEGER, trace_all INTEGER);
CREATE TABLE threads (thread_index INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE devices (device_key INTEGER PRIMARY KEY, backend_device_id INTEGER, name TEXT);
CREATE TABLE device_links (
    device_key INTEGER, pcie_generation INTEGER, pcie_width INTEGER,
    pcie_peak_bytes_per_s REAL, nvlink_peak_bytes_per_s REAL);
CREATE TABLE spans (id INTEGER PRIMARY KEY, parent_id INTEGER, name TEXT);
CREATE TABLE calls (
    id INTEGER PRIMARY KEY, scope_id INTEGER, site_id INTEGER, thread_index INTEGER,
    host_start_ns INTEGER, host_end_ns INTEGER, host_duration_ns INTEGER, duration_ns INTEGER,
    timing_source TEXT, gpu_start_ns INTEGER, gpu_end_ns INTEGER, gpu_busy_ns INTEGER,
    clock_error_ns INTEGER, clock_corrected_ns INTEGER, bracketed INTEGER, bracket_end TEXT,
    device_key INTEGER, bytes INTEGER, error INTEGER, span_id INTEGER, activities INTEGER,
    rss_before_bytes INTEGER, rss_after_bytes INTEGER,
    device_used_before_bytes INTEGER, device_used_after_bytes INTEGER);
CREATE TABLE gpu_activities (
    id INTEGER PRIMARY KEY, call_id INTEGER, kind TEXT, name TEXT,
    gpu_start_ns INTEGER, gpu_end_ns INTEGER, duration_ns INTEGER, device_key INTEGER, stream INTEGER,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
    registers_per_thread INTEGER, static_shared_bytes INTEGER, dynamic_shared_bytes INTEGER,
    bytes INTEGER, copy_direction TEXT, src_memory TEXT, dst_memory TEXT);
CREATE TABLE device_samples (
    device_key INTEGER, time_ns INTEGER, gpu_utilization_pct INTEGER, memory_utilization_pct INTEGER,
    memory_used_bytes INTEGER, power_w REAL, sm_clock_mhz INTEGER, memory_clock_mhz INTEGER,
    pcie_tx_bytes_per_s REAL, pcie_rx_bytes_per_s REAL, temperature_c INTEGER);
CREATE TABLE aggregates (
    site_id INTEGER, calls INTEGER, errors INTEGER, total_ns INTEGER, min_ns INTEGER, p50_ns INTEGER,
    p99_ns INTEGER, max_ns INTEGER, host_total_ns INTEGER, bytes INTEGER, timing_sources TEXT,
    bracketed INTEGER);
CREATE TABLE losses (what TEXT, count INTEGER);
CREATE TABLE notes (seq INTEGER PRIMARY KEY, note TEXT);
-- Every kernel as `gpuspan report`'s kernel table counts them: each kernel the GPU reported
-- (`activity`), and each call of a kernel site timed on the GPU as a whole, not by a bracket
-- and without reported kernels (`scope`, wgpu), named by its site.
CREATE VIEW kernels AS
    SELECT a.name AS name, 'activity' AS source, a.duration_ns AS duration_ns, a.call_id AS call_id,
           a.device_key AS device_key
    FROM gpu_activities a WHERE a.kind = 'kernel'
    UNION ALL
    SELECT coalesce(s.name, 'site #' || c.site_id), 'scope', c.gpu_busy_ns, c.id, c.device_key
    FROM calls c LEFT JOIN sites s ON s.id = c.site_id
    WHERE s.kind = 'kernel' AND c.gpu_busy_ns IS NOT NULL AND c.bracketed = 0 AND c.activities = 0;
";

/// The indexes the usual questions need: kernels by name, a call's activities, calls by site or
/// span, a device's samples in time.
const SQLITE_INDEXES: &str = "
CREATE INDEX gpu_activities_by_name ON gpu_activities (name);
CREATE INDEX gpu_activities_by_call ON gpu_activities (call_id);
CREATE INDEX calls_by_site ON calls (site_id);
CREATE INDEX calls_by_span ON calls (span_id);
CREATE INDEX device_samples_by_device ON device_samples (device_key, time_ns);
";

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub calls: u64,
    pub activities: u64,
    pub spans: u64,
    pub samples: u64,
    /// The capture was not finished (the rows hold everything up to its last complete frame).
    pub truncation: Option<Truncation>,
    /// The capture is damaged: the rows hold everything read before the damage, which this says.
    pub damaged: Option<String>,
}

/// Why an export did not happen. Nothing is left at the output path but a finished database.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{} already exists; pass --force to replace it", .0.display())]
    Exists(PathBuf),
    #[error("could not write {}: {why}", .path.display())]
    Write { path: PathBuf, why: String },
}

/// The default output for `capture`: its path with the extension `.sqlite`.
pub fn default_output(capture: &Path) -> PathBuf {
    capture.with_extension("sqlite")
}

/// Exports the capture at `capture` into a new SQLite database at `out` (replaced if `force`,
/// else refused when it exists). With `progress`, a large capture shows a bar on stderr.
pub fn to_sqlite(capture: &Path, out: &Path, force: bool, progress: bool) -> Result<Summary, ExportError> {
    let write_err = |why: String| ExportError::Write { path: out.to_owned(), why };
    // The capture is opened first: a missing or foreign one leaves no output behind.
    let (mut reader, bar) = load::frames(capture, progress)?;
    let finish_bar = |bar: Option<indicatif::ProgressBar>| {
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
    };
    match std::fs::symlink_metadata(out) {
        Ok(_) if !force => {
            finish_bar(bar);
            return Err(ExportError::Exists(out.to_owned()));
        }
        Ok(m) if m.is_dir() => {
            finish_bar(bar);
            return Err(write_err("it is a directory".into()));
        }
        Ok(_) => {
            if let Err(e) = std::fs::remove_file(out) {
                finish_bar(bar);
                return Err(write_err(format!("could not replace it ({e})")));
            }
        }
        Err(_) => {}
    }
    let result = write_sqlite(&mut reader, out);
    finish_bar(bar);
    match result {
        Ok(summary) => Ok(summary),
        Err(e) => {
            // A half-written database would read as a complete one with rows missing.
            let _ = std::fs::remove_file(out);
            Err(write_err(e.to_string()))
        }
    }
}

/// SQLite's integers are signed 64-bit: larger values saturate (never met in a real capture).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn opt(v: Option<u64>) -> Option<i64> {
    v.map(int)
}

fn write_sqlite(reader: &mut FrameReader, out: &Path) -> rusqlite::Result<Summary> {
    let mut db = Connection::open(out)?;
    // A new file that is deleted on failure: no journal to recover from, no sync per page.
    db.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
    db.execute_batch(SQLITE_SCHEMA)?;
    let tx = db.transaction()?;
    let summary = {
        let mut w = Rows::new(&tx)?;
        w.header(reader)?;
        let damaged = loop {
            match reader.next_frame() {
                Ok(Some(f)) => w.frame(f)?,
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        w.summary.truncation = reader.truncation().cloned();
        w.summary.damaged = damaged.map(|e: ReadError| e.to_string());
        w.finish()?;
        w.summary
    };
    tx.execute_batch(SQLITE_INDEXES)?;
    tx.commit()?;
    db.close().map_err(|(_, e)| e)?;
    Ok(summary)
}

/// The prepared inserts, one per table, and what has been written.
struct Rows<'t> {
    meta: Statement<'t>,
    site: Statement<'t>,
    thread: Statement<'t>,
    device: Statement<'t>,
    link: Statement<'t>,
    span: Statement<'t>,
    call: Statement<'t>,
    activity: Statement<'t>,
    sample: Statement<'t>,
    aggregate: Statement<'t>,
    loss: Statement<'t>,
    note: Statement<'t>,
    ended: Option<(u64, u64)>,
    summary: Summary,
}

impl<'t> Rows<'t> {
    fn new(tx: &'t Transaction<'_>) -> rusqlite::Result<Rows<'t>> {
        let insert = |table: &str, n: usize| {
            let marks = vec!["?"; n].join(", ");
            tx.prepare(&format!("INSERT INTO {table} VALUES ({marks})"))
        };
        Ok(Rows {
            meta: insert("meta", 2)?,
            // Sites, threads, devices and spans are keyed: a repeated frame replaces the row.
            site: tx.prepare("INSERT OR REPLACE INTO sites VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")?,
            thread: tx.prepare("INSERT OR REPLACE INTO threads VALUES (?, ?)")?,
            device: tx.prepare("INSERT OR REPLACE INTO devices VALUES (?, ?, ?)")?,
            link: insert("device_links", 5)?,
            span: tx.prepare("INSERT OR REPLACE INTO spans VALUES (?, ?, ?)")?,
            call: insert("calls", 25)?,
            activity: insert("gpu_activities", 22)?,
            sample: insert("device_samples", 11)?,
            aggregate: insert("aggregates", 12)?,
            loss: insert("losses", 2)?,
            note: insert("notes", 2)?,
            ended: None,
            summary: Summary::default(),
        })
    }

    fn header(&mut self, reader: &FrameReader) -> rusqlite::Result<()> {
        let h = reader.header();
        self.meta.execute(params!["schema_version", SCHEMA_VERSION])?;
        self.meta.execute(params!["format_version", reader.version()])?;
        self.meta.execute(params!["program", h.program])?;
        self.meta.execute(params!["pid", h.pid])?;
        self.meta.execute(params!["hostname", h.hostname])?;
        self.meta.execute(params!["writer", h.writer])?;
        self.meta.execute(params!["start_ns", int(h.start_ns)])?;
        self.meta.execute(params!["threshold_us", int(h.threshold_us)])?;
        self.meta.execute(params!["trace_all", h.trace_all])?;
        Ok(())
    }

    fn frame(&mut self, f: Frame) -> rusqlite::Result<()> {
        match f {
            Frame::Header(_) => {}
            Frame::Site(s) => {
                self.site.execute(params![
                    s.id,
                    s.name,
                    s.function,
                    s.module_path,
                    s.file,
                    s.line,
                    s.kind.as_str(),
                    s.backend.as_str(),
                    s.direction.map(|d| d.as_str()),
                    opt(s.threshold_us),
                    s.trace_all
                ])?;
            }
            Frame::Thread(t) => {
                self.thread.execute(params![t.index, t.name])?;
            }
            Frame::Device(d) => {
                self.device.execute(params![d.key, d.id, d.name])?;
            }
            Frame::Link(l) => {
                let p = l.peak;
                self.link.execute(params![
                    l.device,
                    p.pcie_generation,
                    p.pcie_width,
                    p.pcie_bytes_per_s,
                    p.nvlink_bytes_per_s
                ])?;
            }
            Frame::Span(s) => {
                self.span.execute(params![int(s.id), opt(s.parent), s.name])?;
                self.summary.spans += 1;
            }
            Frame::Record(r) => self.record(&r)?,
            Frame::Samples(s) => {
                for x in &s.samples {
                    self.sample.execute(params![
                        s.device,
                        int(x.time_ns),
                        x.gpu_utilization_pct,
                        x.memory_utilization_pct,
                        opt(x.memory_used_bytes),
                        x.power_w,
                        x.sm_clock_mhz,
                        x.memory_clock_mhz,
                        x.pcie_tx_bytes_per_s,
                        x.pcie_rx_bytes_per_s,
                        x.temperature_c
                    ])?;
                    self.summary.samples += 1;
                }
            }
            Frame::Aggregate(a) => {
                let sources: Vec<&str> = a.sources.iter().map(|s| s.as_str()).collect();
                self.aggregate.execute(params![
                    a.site,
                    int(a.calls),
                    int(a.errors),
                    int(a.total_ns),
                    int(a.min_ns),
                    int(a.p50_ns),
                    int(a.p99_ns),
                    int(a.max_ns),
                    int(a.host_total_ns),
                    int(a.bytes),
                    sources.join("+"),
                    a.bracketed
                ])?;
            }
            Frame::End(e) => {
                for l in &e.losses {
                    self.loss.execute(params![l.what, int(l.count)])?;
                }
                for (i, n) in e.notes.iter().enumerate() {
                    self.note.execute(params![i as i64, n])?;
                }
                self.ended = Some((e.end_ns, e.records));
            }
        }
        Ok(())
    }

    fn record(&mut self, r: &Record) -> rusqlite::Result<()> {
        self.summary.calls += 1;
        let call_id = int(self.summary.calls);
        let g = r.gpu.as_ref();
        let mem = |i: usize| r.memory.as_ref().map(|m| m[i]);
        self.call.execute(params![
            call_id,
            int(r.scope_id),
            r.site,
            r.thread,
            int(r.host.start_ns),
            int(r.host.end_ns),
            int(r.host.duration_ns()),
            int(r.duration_ns()),
            r.source().as_str(),
            g.map(|g| int(g.interval.start_ns)),
            g.map(|g| int(g.interval.end_ns)),
            g.map(|g| int(g.busy_ns)),
            g.map(|g| int(g.clock_error_ns)),
            int(r.clock_corrected_ns),
            g.is_some_and(|g| g.bracketed()),
            g.and_then(|g| g.bracket.end()),
            g.and_then(|g| g.device),
            opt(r.bytes),
            r.error,
            opt(r.span),
            r.activities.len() as i64,
            opt(mem(0).and_then(|m| m.process_rss_bytes)),
            opt(mem(1).and_then(|m| m.process_rss_bytes)),
            opt(mem(0).and_then(|m| m.device_used_bytes)),
            opt(mem(1).and_then(|m| m.device_used_bytes)),
        ])?;
        for a in &r.activities {
            self.activity(call_id, a)?;
        }
        Ok(())
    }

    fn activity(&mut self, call_id: i64, a: &Activity) -> rusqlite::Result<()> {
        self.summary.activities += 1;
        // kind, grid, block, registers, static and dynamic shared, bytes, direction, src, dst
        type Geometry = (Option<[u32; 3]>, Option<[u32; 3]>, Option<u32>, Option<u32>, Option<u32>);
        type Moved = (Option<u64>, Option<&'static str>, Option<&'static str>, Option<&'static str>);
        let (kind, geometry, moved): (&str, Geometry, Moved) = match &a.kind {
            ActivityKind::Kernel { grid, block, registers_per_thread, static_shared_bytes, dynamic_shared_bytes } => (
                "kernel",
                (
                    Some(*grid),
                    Some(*block),
                    Some(*registers_per_thread),
                    Some(*static_shared_bytes),
                    Some(*dynamic_shared_bytes),
                ),
                (None, None, None, None),
            ),
            ActivityKind::Copy { bytes, direction, src, dst } => (
                "copy",
                (None, None, None, None, None),
                (Some(*bytes), direction.map(|d| d.as_str()), Some(src.as_str()), Some(dst.as_str())),
            ),
            ActivityKind::Set { bytes } => ("memset", (None, None, None, None, None), (Some(*bytes), None, None, None)),
        };
        let (grid, block, registers, static_shared, dynamic_shared) = geometry;
        let (bytes, direction, src, dst) = moved;
        self.activity.execute(params![
            rusqlite::types::Null,
            call_id,
            kind,
            a.name,
            int(a.interval.start_ns),
            int(a.interval.end_ns),
            int(a.interval.duration_ns()),
            a.device,
            opt(a.stream),
            grid.map(|g| g[0]),
            grid.map(|g| g[1]),
            grid.map(|g| g[2]),
            block.map(|b| b[0]),
            block.map(|b| b[1]),
            block.map(|b| b[2]),
            registers,
            static_shared,
            dynamic_shared,
            opt(bytes),
            direction,
            src,
            dst,
        ])?;
        Ok(())
    }

    /// The end of the capture as `meta` rows: whether it was complete, and how many calls it has.
    fn finish(&mut self) -> rusqlite::Result<()> {
        let complete = self.ended.is_some() && self.summary.truncation.is_none() && self.summary.damaged.is_none();
        self.meta.execute(params!["complete", complete])?;
        if let Some((end_ns, written)) = self.ended {
            self.meta.execute(params!["end_ns", int(end_ns)])?;
            self.meta.execute(params!["records_written", int(written)])?;
        }
        self.meta.execute(params!["records_exported", int(self.summary.calls)])?;
        if let Some(t) = &self.summary.truncation {
            self.meta.execute(params!["incomplete", t.to_string()])?;
        }
        if let Some(d) = &self.summary.damaged {
            self.meta.execute(params!["damaged", d])?;
        }
        Ok(())
    }
}
