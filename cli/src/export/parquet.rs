//! The Parquet export: a directory with one file per [`TABLES`](super::TABLES) entry
//! (`calls.parquet`, ...), written through the `parquet` crate's column writer (no Arrow).
//! Each table buffers one row group ([`ROW_GROUP`] rows) and writes it when full: memory is
//! bounded by the tables' row groups, whatever the capture's size. Every column is optional
//! (`NULL` where the capture does not hold a value); integers are INT64, reals DOUBLE, texts
//! UTF-8 strings; `meta.value` is a string (the SQLite export keeps its integers as integers).

use super::{Cell, Created, ExportError, Fail, Sink, Table, Ty};
use parquet::basic::Compression;
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

/// Rows a table buffers before writing them as one row group.
pub const ROW_GROUP: usize = 65_536;

/// The Parquet schema of one table, in Parquet's message syntax.
pub fn message_type(table: Table) -> String {
    let def = table.def();
    let mut m = format!("message {} {{\n", def.name);
    for (name, ty) in def.columns {
        let ty = match ty {
            Ty::Int => "INT64",
            Ty::Real => "DOUBLE",
            Ty::Text | Ty::Any => "BYTE_ARRAY",
        };
        let utf8 = if ty == "BYTE_ARRAY" { " (UTF8)" } else { "" };
        m.push_str(&format!("  OPTIONAL {ty} {name}{utf8};\n"));
    }
    m.push('}');
    m
}

/// A directory at `out` for the files (created if missing; one that holds anything is refused
/// unless `force`, and then only the export's own files in it are replaced).
pub fn open(out: &Path, force: bool) -> Result<(Box<dyn Sink>, Created), ExportError> {
    let write_err = |why: String| ExportError::Write { path: out.to_owned(), why };
    let mut created = Created::default();
    match std::fs::metadata(out) {
        Ok(m) if !m.is_dir() => {
            return Err(write_err("it is not a directory (Parquet is written as a directory of files)".into()))
        }
        Ok(_) => {
            let empty = std::fs::read_dir(out).map_err(|e| write_err(e.to_string()))?.next().is_none();
            if !empty && !force {
                return Err(ExportError::Exists(out.to_owned()));
            }
        }
        Err(_) => {
            std::fs::create_dir(out).map_err(|e| write_err(e.to_string()))?;
            created.dir = Some(out.to_owned());
        }
    }
    let mut files = Vec::new();
    for table in Table::ALL {
        let path = out.join(format!("{}.parquet", table.def().name));
        match TableFile::new(&path, table) {
            Ok(f) => {
                created.files.push(path);
                files.push(f);
            }
            Err(e) => {
                created.remove();
                return Err(ExportError::Write { path, why: e.to_string() });
            }
        }
    }
    Ok((Box::new(Directory { files }), created))
}

/// One column's buffered values and definition levels (1: a value, 0: `NULL`).
#[derive(Debug)]
enum Column {
    Int(Vec<i64>, Vec<i16>),
    Real(Vec<f64>, Vec<i16>),
    Text(Vec<ByteArray>, Vec<i16>),
}

struct TableFile {
    writer: SerializedFileWriter<BufWriter<File>>,
    columns: Vec<Column>,
    rows: usize,
}

impl TableFile {
    fn new(path: &Path, table: Table) -> Result<TableFile, Fail> {
        let schema = Arc::new(parse_message_type(&message_type(table))?);
        let props = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let writer = SerializedFileWriter::new(file, schema, props)?;
        let columns = table
            .def()
            .columns
            .iter()
            .map(|(_, ty)| match ty {
                Ty::Int => Column::Int(Vec::new(), Vec::new()),
                Ty::Real => Column::Real(Vec::new(), Vec::new()),
                Ty::Text | Ty::Any => Column::Text(Vec::new(), Vec::new()),
            })
            .collect();
        Ok(TableFile { writer, columns, rows: 0 })
    }

    fn push(&mut self, cells: &[Cell<'_>]) -> Result<(), Fail> {
        if cells.len() != self.columns.len() {
            return Err(format!("a row of {} cells for {} columns", cells.len(), self.columns.len()).into());
        }
        for (col, cell) in self.columns.iter_mut().zip(cells) {
            match (col, *cell) {
                (Column::Int(v, d), Cell::Int(x)) => {
                    v.extend(x);
                    d.push(i16::from(x.is_some()));
                }
                (Column::Real(v, d), Cell::Real(x)) => {
                    v.extend(x);
                    d.push(i16::from(x.is_some()));
                }
                (Column::Text(v, d), Cell::Text(x)) => {
                    v.extend(x.map(|s| ByteArray::from(s.as_bytes().to_vec())));
                    d.push(i16::from(x.is_some()));
                }
                // `meta.value`: integers as text.
                (Column::Text(v, d), Cell::Int(x)) => {
                    v.extend(x.map(|n| ByteArray::from(n.to_string().into_bytes())));
                    d.push(i16::from(x.is_some()));
                }
                (_, cell) => return Err(format!("a cell {cell:?} of the wrong type for its column").into()),
            }
        }
        self.rows += 1;
        if self.rows >= ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<(), Fail> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        let mut columns = self.columns.iter_mut();
        while let Some(mut out) = group.next_column()? {
            let col = columns.next().ok_or("more Parquet columns than buffered ones")?;
            match (out.untyped(), col) {
                (ColumnWriter::Int64ColumnWriter(w), Column::Int(v, d)) => {
                    w.write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
                (ColumnWriter::DoubleColumnWriter(w), Column::Real(v, d)) => {
                    w.write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
                (ColumnWriter::ByteArrayColumnWriter(w), Column::Text(v, d)) => {
                    w.write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
                _ => return Err("a Parquet column of another type than its buffer".into()),
            }
            out.close()?;
        }
        group.close()?;
        self.rows = 0;
        Ok(())
    }
}

struct Directory {
    files: Vec<TableFile>,
}

impl Sink for Directory {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), Fail> {
        self.files[table as usize].push(cells)
    }

    fn finish(self: Box<Self>) -> Result<(), Fail> {
        for mut f in self.files {
            f.flush()?;
            f.writer.close()?;
        }
        Ok(())
    }
}
