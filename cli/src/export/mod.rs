//! `gpuspan export`: a capture as tables any SQL client can query, as one SQLite database
//! ([`sqlite`]) or one Parquet file per table ([`parquet`]), written in one streaming pass: each
//! frame becomes rows as it is read, so memory is one frame's plus the writer's buffer (SQLite's
//! page cache; one Parquet row group per table), whatever the capture's size.
//!
//! The tables are defined once, in [`TABLES`], for both formats (documented in docs/cli.md) and
//! versioned by [`SCHEMA_VERSION`], stored in the `meta` table: a change to a table or column is
//! a new version. Times are Unix-epoch nanoseconds on the writing host's clock, as in the
//! capture; columns name their unit (`_ns`, `_bytes`, `_pct`, `_mhz`, `_w`). Integers above
//! `i64::MAX` (SQLite's and Parquet's largest) are stored as `i64::MAX`; no real capture holds one.

pub mod parquet;
pub mod sqlite;

use crate::load::{self, FrameReader, LoadError};
use gpuspan_capture::{Activity, ActivityKind, Frame, Record, Truncation};
use std::path::{Path, PathBuf};

/// The version of the exported schema, in `meta` under `schema_version`.
pub const SCHEMA_VERSION: i64 = 3;

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Int,
    Real,
    Text,
    /// `meta.value`: an integer or a text (SQLite keeps each as given; Parquet stores text).
    Any,
}

/// One table: its name, its columns and whether its first column is a key (a repeated frame
/// replaces the row in SQLite).
#[derive(Debug)]
pub struct TableDef {
    pub name: &'static str,
    pub keyed: bool,
    pub columns: &'static [(&'static str, Ty)],
}

/// The tables, in [`Table`]'s order.
pub const TABLES: &[TableDef] = {
    use Ty::*;
    &[
        TableDef { name: "meta", keyed: true, columns: &[("key", Text), ("value", Any)] },
        TableDef {
            name: "sites",
            keyed: true,
            columns: &[
                ("id", Int),
                ("name", Text),
                ("function", Text),
                ("module_path", Text),
                ("file", Text),
                ("line", Int),
                ("kind", Text),
                ("backend", Text),
                ("direction", Text),
                ("threshold_us", Int),
                ("trace_all", Int),
            ],
        },
        TableDef { name: "threads", keyed: true, columns: &[("thread_index", Int), ("name", Text)] },
        TableDef {
            name: "devices",
            keyed: true,
            columns: &[("device_key", Int), ("backend_device_id", Int), ("name", Text)],
        },
        TableDef {
            name: "device_links",
            keyed: false,
            columns: &[
                ("device_key", Int),
                ("pcie_generation", Int),
                ("pcie_width", Int),
                ("pcie_peak_bytes_per_s", Real),
                ("nvlink_peak_bytes_per_s", Real),
            ],
        },
        TableDef { name: "spans", keyed: true, columns: &[("id", Int), ("parent_id", Int), ("name", Text)] },
        TableDef {
            name: "calls",
            keyed: true,
            columns: &[
                ("id", Int),
                ("scope_id", Int),
                ("site_id", Int),
                ("thread_index", Int),
                ("host_start_ns", Int),
                ("host_end_ns", Int),
                ("host_duration_ns", Int),
                ("duration_ns", Int),
                ("timing_source", Text),
                ("gpu_start_ns", Int),
                ("gpu_end_ns", Int),
                ("gpu_busy_ns", Int),
                ("clock_error_ns", Int),
                ("clock_corrected_ns", Int),
                ("bracketed", Int),
                ("bracket_end", Text),
                ("device_key", Int),
                ("bytes", Int),
                ("error", Int),
                ("span_id", Int),
                ("activities", Int),
                ("rss_before_bytes", Int),
                ("rss_after_bytes", Int),
                ("device_used_before_bytes", Int),
                ("device_used_after_bytes", Int),
            ],
        },
        TableDef {
            name: "gpu_activities",
            keyed: true,
            columns: &[
                ("id", Int),
                ("call_id", Int),
                ("kind", Text),
                ("name", Text),
                ("gpu_start_ns", Int),
                ("gpu_end_ns", Int),
                ("duration_ns", Int),
                ("device_key", Int),
                ("stream", Int),
                ("grid_x", Int),
                ("grid_y", Int),
                ("grid_z", Int),
                ("block_x", Int),
                ("block_y", Int),
                ("block_z", Int),
                ("registers_per_thread", Int),
                ("static_shared_bytes", Int),
                ("dynamic_shared_bytes", Int),
                ("bytes", Int),
                ("copy_direction", Text),
                ("src_memory", Text),
                ("dst_memory", Text),
            ],
        },
        TableDef {
            name: "device_samples",
            keyed: false,
            columns: &[
                ("device_key", Int),
                ("time_ns", Int),
                ("gpu_utilization_pct", Int),
                ("memory_utilization_pct", Int),
                ("memory_used_bytes", Int),
                ("power_w", Real),
                ("sm_clock_mhz", Int),
                ("memory_clock_mhz", Int),
                ("pcie_tx_bytes_per_s", Real),
                ("pcie_rx_bytes_per_s", Real),
                ("temperature_c", Int),
            ],
        },
        TableDef {
            name: "aggregates",
            keyed: false,
            columns: &[
                ("site_id", Int),
                ("calls", Int),
                ("errors", Int),
                ("total_ns", Int),
                ("min_ns", Int),
                ("p50_ns", Int),
                ("p99_ns", Int),
                ("max_ns", Int),
                ("host_total_ns", Int),
                ("bytes", Int),
                ("timing_sources", Text),
                ("bracketed", Int),
            ],
        },
        TableDef { name: "losses", keyed: false, columns: &[("what", Text), ("count", Int)] },
        TableDef { name: "notes", keyed: true, columns: &[("seq", Int), ("note", Text)] },
        // Schema 2: how a call's GPU work was found to be its own (capture format 8).
        TableDef {
            name: "attributions",
            keyed: true,
            columns: &[("call_id", Int), ("attributed", Text), ("spans_at_launch", Text)],
        },
        // Schema 3: an instrumented wgpu device's memory account, logical sizes (capture format 9).
        TableDef {
            name: "gpu_memory",
            keyed: true,
            columns: &[
                ("device_key", Int),
                ("peak_bytes", Int),
                ("peak_ns", Int),
                ("end_bytes", Int),
                ("end_objects", Int),
                ("not_sized_textures", Int),
                ("samples", Int),
                ("samples_dropped", Int),
            ],
        },
        TableDef {
            name: "gpu_memory_holders",
            keyed: false,
            columns: &[("device_key", Int), ("at", Text), ("by", Text), ("name", Text), ("bytes", Int)],
        },
        TableDef {
            name: "gpu_memory_samples",
            keyed: false,
            columns: &[("device_key", Int), ("time_ns", Int), ("bytes", Int)],
        },
    ]
};

/// A table, by its place in [`TABLES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Meta,
    Sites,
    Threads,
    Devices,
    DeviceLinks,
    Spans,
    Calls,
    GpuActivities,
    DeviceSamples,
    Aggregates,
    Losses,
    Notes,
    Attributions,
    GpuMemory,
    GpuMemoryHolders,
    GpuMemorySamples,
}

impl Table {
    /// Every table, in [`TABLES`]'s order.
    pub const ALL: [Table; 16] = [
        Table::Meta,
        Table::Sites,
        Table::Threads,
        Table::Devices,
        Table::DeviceLinks,
        Table::Spans,
        Table::Calls,
        Table::GpuActivities,
        Table::DeviceSamples,
        Table::Aggregates,
        Table::Losses,
        Table::Notes,
        Table::Attributions,
        Table::GpuMemory,
        Table::GpuMemoryHolders,
        Table::GpuMemorySamples,
    ];

    pub fn def(self) -> &'static TableDef {
        &TABLES[self as usize]
    }
}

/// Every kernel as `gpuspan report`'s kernel table counts them, in SQL that SQLite and DuckDB
/// both run: each kernel the GPU reported (`activity`), and each call of a kernel site timed on
/// the GPU as a whole, not by a bracket and without reported kernels (`scope`, wgpu), named by
/// its site. The SQLite export holds it as a view; over Parquet, create it after a view per file.
pub const KERNELS_VIEW: &str = "CREATE VIEW kernels AS
    SELECT a.name AS name, 'activity' AS source, a.duration_ns AS duration_ns, a.call_id AS call_id,
           a.device_key AS device_key
    FROM gpu_activities a WHERE a.kind = 'kernel'
    UNION ALL
    SELECT coalesce(s.name, 'site #' || c.site_id), 'scope', c.gpu_busy_ns, c.id, c.device_key
    FROM calls c LEFT JOIN sites s ON s.id = c.site_id
    WHERE s.kind = 'kernel' AND c.gpu_busy_ns IS NOT NULL AND c.bracketed = 0 AND c.activities = 0";

/// One value of a row; `None` is SQL's `NULL`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<&'a str>),
}

/// Integers are signed 64-bit: larger values saturate (never met in a real capture).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl From<u64> for Cell<'_> {
    fn from(v: u64) -> Self {
        Cell::Int(Some(int(v)))
    }
}
impl From<Option<u64>> for Cell<'_> {
    fn from(v: Option<u64>) -> Self {
        Cell::Int(v.map(int))
    }
}
impl From<u32> for Cell<'_> {
    fn from(v: u32) -> Self {
        Cell::Int(Some(v.into()))
    }
}
impl From<Option<u32>> for Cell<'_> {
    fn from(v: Option<u32>) -> Self {
        Cell::Int(v.map(i64::from))
    }
}
impl From<bool> for Cell<'_> {
    fn from(v: bool) -> Self {
        Cell::Int(Some(v.into()))
    }
}
impl From<Option<f64>> for Cell<'_> {
    fn from(v: Option<f64>) -> Self {
        Cell::Real(v)
    }
}
impl<'a> From<&'a str> for Cell<'a> {
    fn from(v: &'a str) -> Self {
        Cell::Text(Some(v))
    }
}
impl<'a> From<Option<&'a str>> for Cell<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Cell::Text(v)
    }
}

/// What a format does with rows.
pub trait Sink {
    /// Adds one row to `table`, its cells in the table's column order.
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), Fail>;
    /// Writes what is buffered and closes the output.
    fn finish(self: Box<Self>) -> Result<(), Fail>;
}

/// A sink's failure, said in one line.
pub type Fail = Box<dyn std::error::Error + Send + Sync>;

/// The formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// One SQLite database.
    Sqlite,
    /// A directory of Parquet files, one per table (`calls.parquet`, ...).
    Parquet,
}

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

/// Why an export did not happen. Nothing is left at the output path but a finished export.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{} already exists; pass --force to replace it", .0.display())]
    Exists(PathBuf),
    #[error("could not write {}: {why}", .path.display())]
    Write { path: PathBuf, why: String },
}

/// The default output for `capture`: its path with the extension `.sqlite`, or `.parquet` (a
/// directory).
pub fn default_output(capture: &Path, to: To) -> PathBuf {
    capture.with_extension(match to {
        To::Sqlite => "sqlite",
        To::Parquet => "parquet",
    })
}

/// Exports the capture at `capture` to `out` (a database file, or a directory of Parquet files)
/// in one pass. An output that exists is refused unless `force`. With `progress`, a large capture
/// shows a bar on stderr.
pub fn export(capture: &Path, to: To, out: &Path, force: bool, progress: bool) -> Result<Summary, ExportError> {
    let write_err = |why: String| ExportError::Write { path: out.to_owned(), why };
    // The capture is opened first: a missing or foreign one leaves no output behind.
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(capture), std::fs::canonicalize(out)) {
        if a == b {
            return Err(write_err("it is the capture being exported".into()));
        }
    }
    let (mut reader, bar) = load::frames(capture, progress)?;
    let opened = match to {
        To::Sqlite => sqlite::open(out, force),
        To::Parquet => parquet::open(out, force),
    };
    let result = opened.and_then(|(sink, created)| {
        let written = write(&mut reader, sink).map_err(|e| write_err(e.to_string()));
        if written.is_err() {
            // A half-written export would read as a whole one with rows missing.
            created.remove();
        }
        written
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// What an export created, removed again when it fails.
#[derive(Debug, Default)]
pub struct Created {
    pub files: Vec<PathBuf>,
    pub dir: Option<PathBuf>,
}

impl Created {
    fn remove(self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn write(reader: &mut FrameReader, sink: Box<dyn Sink>) -> Result<Summary, Fail> {
    let mut w = Rows { sink, ended: None, summary: Summary::default() };
    w.header(reader)?;
    let damaged = loop {
        match reader.next_frame() {
            Ok(Some(f)) => w.frame(f)?,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    w.summary.truncation = reader.truncation().cloned();
    w.summary.damaged = damaged;
    w.finish()?;
    w.sink.finish()?;
    Ok(w.summary)
}

/// Frames into rows.
struct Rows {
    sink: Box<dyn Sink>,
    ended: Option<(u64, u64)>,
    summary: Summary,
}

impl Rows {
    fn meta(&mut self, key: &str, value: Cell<'_>) -> Result<(), Fail> {
        self.sink.row(Table::Meta, &[key.into(), value])
    }

    fn header(&mut self, reader: &FrameReader) -> Result<(), Fail> {
        let h = reader.header();
        self.meta("schema_version", Cell::Int(Some(SCHEMA_VERSION)))?;
        self.meta("format_version", u32::from(reader.version()).into())?;
        self.meta("program", h.program.as_str().into())?;
        self.meta("pid", h.pid.into())?;
        self.meta("hostname", h.hostname.as_deref().into())?;
        self.meta("writer", h.writer.as_str().into())?;
        self.meta("start_ns", h.start_ns.into())?;
        self.meta("threshold_us", h.threshold_us.into())?;
        self.meta("trace_all", h.trace_all.into())?;
        Ok(())
    }

    fn frame(&mut self, f: Frame) -> Result<(), Fail> {
        match f {
            Frame::Header(_) => {}
            Frame::Site(s) => self.sink.row(
                Table::Sites,
                &[
                    s.id.into(),
                    s.name.as_str().into(),
                    s.function.as_str().into(),
                    s.module_path.as_str().into(),
                    s.file.as_str().into(),
                    s.line.into(),
                    s.kind.as_str().into(),
                    s.backend.as_str().into(),
                    s.direction.map(|d| d.as_str()).into(),
                    s.threshold_us.into(),
                    s.trace_all.into(),
                ],
            )?,
            Frame::Thread(t) => self.sink.row(Table::Threads, &[t.index.into(), t.name.as_str().into()])?,
            Frame::Device(d) => self.sink.row(Table::Devices, &[d.key.into(), d.id.into(), d.name.as_str().into()])?,
            Frame::Link(l) => {
                let p = l.peak;
                self.sink.row(
                    Table::DeviceLinks,
                    &[
                        l.device.into(),
                        p.pcie_generation.into(),
                        p.pcie_width.into(),
                        p.pcie_bytes_per_s.into(),
                        p.nvlink_bytes_per_s.into(),
                    ],
                )?;
            }
            Frame::Span(s) => {
                self.sink.row(Table::Spans, &[s.id.into(), s.parent.into(), s.name.as_str().into()])?;
                self.summary.spans += 1;
            }
            Frame::Record(r) => self.record(&r)?,
            // Of the call just before it.
            Frame::Attribution(a) => {
                let how = a.how.map(|h| h.as_str());
                let row = [self.summary.calls.into(), Cell::Text(how), a.spans.as_deref().into()];
                self.sink.row(Table::Attributions, &row)?;
            }
            Frame::Samples(s) => {
                for x in &s.samples {
                    self.sink.row(
                        Table::DeviceSamples,
                        &[
                            s.device.into(),
                            x.time_ns.into(),
                            x.gpu_utilization_pct.into(),
                            x.memory_utilization_pct.into(),
                            x.memory_used_bytes.into(),
                            x.power_w.into(),
                            x.sm_clock_mhz.into(),
                            x.memory_clock_mhz.into(),
                            x.pcie_tx_bytes_per_s.into(),
                            x.pcie_rx_bytes_per_s.into(),
                            x.temperature_c.into(),
                        ],
                    )?;
                    self.summary.samples += 1;
                }
            }
            Frame::Aggregate(a) => {
                let sources: Vec<&str> = a.sources.iter().map(|s| s.as_str()).collect();
                let sources = sources.join("+");
                self.sink.row(
                    Table::Aggregates,
                    &[
                        a.site.into(),
                        a.calls.into(),
                        a.errors.into(),
                        a.total_ns.into(),
                        a.min_ns.into(),
                        a.p50_ns.into(),
                        a.p99_ns.into(),
                        a.max_ns.into(),
                        a.host_total_ns.into(),
                        a.bytes.into(),
                        sources.as_str().into(),
                        a.bracketed.into(),
                    ],
                )?;
            }
            Frame::Running(r) => {
                // Sites with a call open at shutdown and none finished (capture format 5).
                let ids: Vec<String> = r.sites.iter().map(u32::to_string).collect();
                self.meta("still_running_site_ids", ids.join(",").as_str().into())?;
            }
            Frame::Memory(m) => self.memory(&m)?,
            Frame::End(e) => {
                for l in &e.losses {
                    self.sink.row(Table::Losses, &[l.what.as_str().into(), l.count.into()])?;
                }
                for (i, n) in e.notes.iter().enumerate() {
                    self.sink.row(Table::Notes, &[(i as u64).into(), n.as_str().into()])?;
                }
                self.ended = Some((e.end_ns, e.records));
            }
            // A frame of a later kind: the reader refuses later formats, so none reaches here.
            _ => {}
        }
        Ok(())
    }

    /// An instrumented wgpu device's memory account: one row, its holders (at the peak and at
    /// the end, by label and by owner) and its counter samples.
    fn memory(&mut self, m: &gpuspan_capture::MemoryAccount) -> Result<(), Fail> {
        self.sink.row(
            Table::GpuMemory,
            &[
                m.device.into(),
                m.peak_bytes.into(),
                m.peak_ns.into(),
                m.live_bytes.into(),
                m.live_objects.into(),
                m.not_sized.into(),
                (m.samples.len() as u64).into(),
                m.samples_dropped.into(),
            ],
        )?;
        let holders = [
            ("peak", "label", &m.peak_by_label),
            ("peak", "owner", &m.peak_by_owner),
            ("end", "label", &m.live_by_label),
            ("end", "owner", &m.live_by_owner),
        ];
        for (at, by, held) in holders {
            for h in held {
                let row = [m.device.into(), at.into(), by.into(), h.name.as_str().into(), h.bytes.into()];
                self.sink.row(Table::GpuMemoryHolders, &row)?;
            }
        }
        for x in &m.samples {
            self.sink.row(Table::GpuMemorySamples, &[m.device.into(), x.time_ns.into(), x.bytes.into()])?;
        }
        Ok(())
    }

    fn record(&mut self, r: &Record) -> Result<(), Fail> {
        self.summary.calls += 1;
        let call_id = self.summary.calls;
        let g = r.gpu.as_ref();
        let mem = |i: usize| r.memory.as_ref().map(|m| m[i]);
        self.sink.row(
            Table::Calls,
            &[
                call_id.into(),
                r.scope_id.into(),
                r.site.into(),
                r.thread.into(),
                r.host.start_ns.into(),
                r.host.end_ns.into(),
                r.host.duration_ns().into(),
                r.duration_ns().into(),
                r.source().as_str().into(),
                g.map(|g| g.interval.start_ns).into(),
                g.map(|g| g.interval.end_ns).into(),
                g.map(|g| g.busy_ns).into(),
                g.map(|g| g.clock_error_ns).into(),
                r.clock_corrected_ns.into(),
                g.is_some_and(|g| g.bracketed()).into(),
                g.and_then(|g| g.bracket.end()).into(),
                g.and_then(|g| g.device).into(),
                r.bytes.into(),
                r.error.into(),
                r.span.into(),
                (r.activities.len() as u64).into(),
                mem(0).and_then(|m| m.process_rss_bytes).into(),
                mem(1).and_then(|m| m.process_rss_bytes).into(),
                mem(0).and_then(|m| m.device_used_bytes).into(),
                mem(1).and_then(|m| m.device_used_bytes).into(),
            ],
        )?;
        for a in &r.activities {
            self.activity(call_id, a)?;
        }
        Ok(())
    }

    fn activity(&mut self, call_id: u64, a: &Activity) -> Result<(), Fail> {
        self.summary.activities += 1;
        let none = Cell::Int(None);
        let text = |v: Option<&'static str>| Cell::Text(v);
        // kind; grid, block, registers, static and dynamic shared; bytes, direction, src, dst
        let (kind, geometry, moved): (&str, [Cell<'_>; 9], [Cell<'_>; 4]) = match &a.kind {
            ActivityKind::Kernel(g) => (
                "kernel",
                [
                    g.grid[0].into(),
                    g.grid[1].into(),
                    g.grid[2].into(),
                    g.block[0].into(),
                    g.block[1].into(),
                    g.block[2].into(),
                    g.registers_per_thread.into(),
                    g.static_shared_bytes.into(),
                    g.dynamic_shared_bytes.into(),
                ],
                [none, text(None), text(None), text(None)],
            ),
            ActivityKind::Copy { bytes, direction, src, dst } => (
                "copy",
                [none; 9],
                [
                    (*bytes).into(),
                    text(direction.map(|d| d.as_str())),
                    text(Some(src.as_str())),
                    text(Some(dst.as_str())),
                ],
            ),
            ActivityKind::Set { bytes } => ("memset", [none; 9], [(*bytes).into(), text(None), text(None), text(None)]),
        };
        let head = [
            self.summary.activities.into(),
            call_id.into(),
            kind.into(),
            a.name.as_str().into(),
            a.interval.start_ns.into(),
            a.interval.end_ns.into(),
            a.interval.duration_ns().into(),
            a.device.into(),
            a.stream.into(),
        ];
        let mut cells = [none; 22];
        cells[..9].copy_from_slice(&head);
        cells[9..18].copy_from_slice(&geometry);
        cells[18..].copy_from_slice(&moved);
        self.sink.row(Table::GpuActivities, &cells)
    }

    /// The end of the capture as `meta` rows: whether it was complete, and how many calls it has.
    fn finish(&mut self) -> Result<(), Fail> {
        let complete = self.ended.is_some() && self.summary.truncation.is_none() && self.summary.damaged.is_none();
        self.meta("complete", complete.into())?;
        if let Some((end_ns, written)) = self.ended {
            self.meta("end_ns", end_ns.into())?;
            self.meta("records_written", written.into())?;
        }
        self.meta("records_exported", self.summary.calls.into())?;
        if let Some(t) = self.summary.truncation.clone() {
            self.meta("incomplete", t.to_string().as_str().into())?;
        }
        if let Some(d) = self.summary.damaged.clone() {
            self.meta("damaged", d.as_str().into())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_defined_once_in_order() {
        assert_eq!(TABLES.len(), Table::ALL.len());
        for (i, t) in Table::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
        }
        let names: std::collections::BTreeSet<&str> = TABLES.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), TABLES.len());
        for t in TABLES {
            let columns: std::collections::BTreeSet<&str> = t.columns.iter().map(|c| c.0).collect();
            assert_eq!(columns.len(), t.columns.len(), "{}: a column named twice", t.name);
        }
    }
}
