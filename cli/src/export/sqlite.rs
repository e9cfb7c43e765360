//! The SQLite export: one database, a table per [`TABLES`](super::TABLES) entry, filled in one
//! transaction through prepared statements, indexes built after the rows.

use super::{Cell, Created, ExportError, Fail, Sink, Table, Ty, KERNELS_VIEW, TABLES};
use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::{Connection, ToSql};
use std::path::Path;

/// The indexes the usual questions need: kernels by name, a call's activities, calls by site or
/// span, a device's samples in time.
pub const INDEXES: &str = "
CREATE INDEX gpu_activities_by_name ON gpu_activities (name);
CREATE INDEX gpu_activities_by_call ON gpu_activities (call_id);
CREATE INDEX calls_by_site ON calls (site_id);
CREATE INDEX calls_by_span ON calls (span_id);
CREATE INDEX device_samples_by_device ON device_samples (device_key, time_ns);
";

/// The `CREATE TABLE` statements and the `kernels` view, as the export runs them.
pub fn schema() -> String {
    let mut sql = String::new();
    for t in TABLES {
        let columns: Vec<String> = t
            .columns
            .iter()
            .enumerate()
            .map(|(i, (name, ty))| {
                let ty = match ty {
                    Ty::Int => " INTEGER",
                    Ty::Real => " REAL",
                    Ty::Text => " TEXT",
                    Ty::Any => "",
                };
                let key = if i == 0 && t.keyed { " PRIMARY KEY" } else { "" };
                format!("{name}{ty}{key}")
            })
            .collect();
        sql.push_str(&format!("CREATE TABLE {} ({});\n", t.name, columns.join(", ")));
    }
    sql.push_str(KERNELS_VIEW);
    sql.push_str(";\n");
    sql
}

impl ToSql for Cell<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Owned(match *self {
            Cell::Int(Some(v)) => Value::Integer(v),
            Cell::Real(Some(v)) => Value::Real(v),
            Cell::Text(Some(v)) => return Ok(ToSqlOutput::Borrowed(rusqlite::types::ValueRef::Text(v.as_bytes()))),
            Cell::Int(None) | Cell::Real(None) | Cell::Text(None) => Value::Null,
        }))
    }
}

/// A new database at `out` (an existing file replaced only with `force`), ready for rows.
pub fn open(out: &Path, force: bool) -> Result<(Box<dyn Sink>, Created), ExportError> {
    let write_err = |why: String| ExportError::Write { path: out.to_owned(), why };
    match std::fs::symlink_metadata(out) {
        Ok(_) if !force => return Err(ExportError::Exists(out.to_owned())),
        Ok(m) if m.is_dir() => return Err(write_err("it is a directory".into())),
        Ok(_) => std::fs::remove_file(out).map_err(|e| write_err(format!("could not replace it ({e})")))?,
        Err(_) => {}
    }
    let created = Created { files: vec![out.to_owned()], dir: None };
    match Database::new(out) {
        Ok(db) => Ok((Box::new(db), created)),
        Err(e) => {
            created.remove();
            Err(write_err(e.to_string()))
        }
    }
}

/// The connection, in a transaction from the first row to [`Sink::finish`]. Statements are
/// prepared once per table and kept in the connection's cache.
struct Database {
    db: Connection,
    inserts: Vec<String>,
}

impl Database {
    fn new(out: &Path) -> rusqlite::Result<Database> {
        let db = Connection::open(out)?;
        // A new file, deleted on failure: no journal to recover from, no sync per page.
        db.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
        db.execute_batch(&schema())?;
        db.execute_batch("BEGIN")?;
        db.set_prepared_statement_cache_capacity(TABLES.len() + 4);
        let inserts = TABLES
            .iter()
            .map(|t| {
                let verb = if t.keyed { "INSERT OR REPLACE" } else { "INSERT" };
                format!("{verb} INTO {} VALUES ({})", t.name, vec!["?"; t.columns.len()].join(", "))
            })
            .collect();
        Ok(Database { db, inserts })
    }
}

impl Sink for Database {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), Fail> {
        let mut stmt = self.db.prepare_cached(&self.inserts[table as usize])?;
        stmt.execute(rusqlite::params_from_iter(cells.iter()))?;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), Fail> {
        self.db.execute_batch(INDEXES)?;
        self.db.execute_batch("COMMIT")?;
        self.db.close().map_err(|(_, e)| e)?;
        Ok(())
    }
}
