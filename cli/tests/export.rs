//! `gpuspan export`, read back by real clients: Python's `sqlite3` module (SQLite) and DuckDB
//! (Parquet) answer "top 5 kernels by total GPU time" with the names and totals of `gpuspan
//! report`'s kernel table, on captures of real programs (lavapipe, H100s under CUPTI) and on a
//! synthetic CUDA capture; every field of a record reaches its column; bad input fails in one line.
//!
//! The Python is `GPUSPAN_TEST_PYTHON` if set (scripts/test sets it to the venv of
//! `scripts/sql-clients`, which has DuckDB), else that venv under target/ if it exists, else the
//! first of `python3.11` and `python3` that has the `sqlite3` module. The Parquet tests need
//! DuckDB in it: `scripts/sql-clients install`.

mod common;

use common::{gpuspan, kernel, memory_capture, save, scratch};
use gpuspan_capture::*;
use gpuspan_cli::report;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A row as the queries return it: each cell through `Value::from`.
macro_rules! row {
    ($($v:expr),* $(,)?) => { vec![$(Value::from($v)),*] };
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

/// The Python with `sqlite3` these tests query through.
fn python() -> String {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/sql-clients/venv/bin/python");
    let candidates = match std::env::var("GPUSPAN_TEST_PYTHON") {
        Ok(p) => vec![p],
        Err(_) if Path::new(venv).exists() => vec![venv.to_owned()],
        Err(_) => vec!["python3.11".to_owned(), "python3".to_owned()],
    };
    for p in &candidates {
        let ok = Command::new(p).args(["-c", "import sqlite3"]).output().is_ok_and(|o| o.status.success());
        if ok {
            return p.clone();
        }
    }
    panic!("no Python with the sqlite3 module among {candidates:?} (set GPUSPAN_TEST_PYTHON)");
}

/// The rows `query` returns from the database at `db`, through Python's `sqlite3`.
fn sql(db: &Path, query: &str) -> Vec<Vec<Value>> {
    let script = "import json, sqlite3, sys\n\
                  con = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n\
                  print(json.dumps([list(r) for r in con.execute(sys.argv[2])]))";
    let out = Command::new(python()).args(["-c", script]).arg(db).arg(query).output().expect("python runs");
    assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

/// The rows `query` returns from DuckDB over the Parquet directory `dir`: a view per file, named
/// by its table, and the `kernels` view the SQLite export holds.
fn duckdb(dir: &Path, query: &str) -> Vec<Vec<Value>> {
    let script = "import json, os, sys\n\
                  try:\n    import duckdb\n\
                  except ImportError:\n    sys.exit('no duckdb in ' + sys.executable + ': run scripts/sql-clients install')\n\
                  con = duckdb.connect()\n\
                  for f in sorted(x for x in os.listdir(sys.argv[1]) if x.endswith('.parquet')):\n    \
                      con.execute(\"CREATE VIEW %s AS SELECT * FROM read_parquet('%s')\" % (f[:-8], os.path.join(sys.argv[1], f)))\n\
                  con.execute(sys.argv[2])\n\
                  print(json.dumps([list(r) for r in con.execute(sys.argv[3]).fetchall()]))";
    let out = Command::new(python())
        .args(["-c", script])
        .arg(dir)
        .arg(gpuspan_cli::export::KERNELS_VIEW)
        .arg(query)
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

/// Exports `capture` to Parquet into a fresh scratch directory `name`.
fn export_parquet(capture: &Path, name: &str) -> PathBuf {
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(&dir);
    let (code, _, err) = gpuspan(&[
        "export".as_ref(),
        capture.as_os_str(),
        "--to".as_ref(),
        "parquet".as_ref(),
        "-o".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("written to"), "{err}");
    dir
}

/// Exports `capture` into a fresh scratch database `name`.
fn export(capture: &Path, name: &str) -> PathBuf {
    let db = scratch(name);
    let _ = std::fs::remove_file(&db);
    let (code, _, err) = gpuspan(&[
        "export".as_ref(),
        capture.as_os_str(),
        "--to".as_ref(),
        "sqlite".as_ref(),
        "-o".as_ref(),
        db.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("written to"), "{err}");
    db
}

/// The question the issue asks, in SQL over the `kernels` view.
const TOP_KERNELS: &str = "SELECT name, source, COUNT(*), SUM(duration_ns) AS total_ns FROM kernels \
                           GROUP BY name, source ORDER BY total_ns DESC, name LIMIT 5";

/// `gpuspan report`'s top 5 kernels: (name, from, count, total ns).
fn report_top(c: &Capture) -> Vec<Vec<Value>> {
    report::build(c)
        .kernels
        .iter()
        .take(5)
        .map(|k| vec![k.kernel.clone().into(), k.from.clone().into(), k.count.into(), k.total_ns.into()])
        .collect()
}

fn count(db: &Path, table: &str) -> u64 {
    sql(db, &format!("SELECT COUNT(*) FROM {table}"))[0][0].as_u64().unwrap()
}

#[test]
fn top_kernels_in_sqlite_equal_the_report_on_real_captures() {
    // lavapipe: kernel sites timed by wgpu timestamps (`scope` rows), or only by brackets (no
    // kernel: both answers empty); the H100s: CUPTI kernels, one with a device monitor.
    for (name, from) in [
        ("lavapipe_demo.gpuspan", Some("scope")),
        ("lavapipe_requests.gpuspan", None),
        ("h100_cuda_saxpy.gpuspan", Some("activity")),
        ("h100_multi_gpu_nvml.gpuspan", Some("activity")),
    ] {
        let path = fixture(name);
        let c = Capture::open(&path).unwrap();
        let db = export(&path, &format!("{name}.sqlite"));
        let want = report_top(&c);
        match from {
            Some(from) => assert!(want.iter().any(|r| r[1] == from), "{name}: the report has {from} kernels"),
            None => assert!(want.is_empty(), "{name}: the report has no kernel"),
        }
        assert_eq!(sql(&db, TOP_KERNELS), want, "{name}");
        assert_eq!(count(&db, "calls"), c.records.len() as u64, "{name}");
        let activities: usize = c.records.iter().map(|r| r.activities.len()).sum();
        assert_eq!(count(&db, "gpu_activities"), activities as u64, "{name}");
        assert_eq!(count(&db, "spans"), c.spans.len() as u64, "{name}");
        assert_eq!(count(&db, "sites"), c.sites.len() as u64, "{name}");
        let samples: usize = c.samples.iter().map(|s| s.samples.len()).sum();
        assert_eq!(count(&db, "device_samples"), samples as u64, "{name}");
        assert_eq!(count(&db, "devices"), c.devices.len() as u64, "{name}");
        let meta =
            sql(&db, "SELECT key, value FROM meta WHERE key IN ('schema_version', 'program', 'complete') ORDER BY key");
        assert_eq!(
            meta,
            vec![
                row!["complete", 1],
                row!["program", c.header.program.clone()],
                row!["schema_version", gpuspan_cli::export::SCHEMA_VERSION],
            ],
            "{name}"
        );
    }
}

/// A CUDA-like capture: kernels of six names with known durations over three sites, copies and
/// memsets beside them, application spans, a device's samples and link peaks.
fn cuda_capture() -> Capture {
    let mut c = Capture::new(Header::new("cuda-synthetic", 4242));
    for (i, name) in ["train_step", "upload", "eval"].iter().enumerate() {
        let kind = if i == 1 { SiteKind::Transfer } else { SiteKind::Kernel };
        let mut s = Site::new(i as u32, name, kind);
        s.backend = Backend::Cuda;
        c.sites.push(s);
    }
    c.threads.push(Thread { index: 1, name: "main".into() });
    c.devices.push(Device { key: 0, id: 0, name: "H100".into() });
    c.links.push(DeviceLink {
        device: 0,
        peak: LinkPeak {
            pcie_generation: Some(5),
            pcie_width: Some(16),
            pcie_bytes_per_s: Some(63e9),
            nvlink_bytes_per_s: None,
        },
    });
    c.spans.push(Span { id: 1, parent: None, name: "epoch".into() });
    c.spans.push(Span { id: 2, parent: Some(1), name: "batch".into() });
    let names = ["gemm", "softmax", "layernorm", "gelu", "dropout", "reduce"];
    let mut t = 1_000_000;
    for i in 0..60u64 {
        let site = (i % 3) as u32;
        let mut r = Record::new(site, i + 1, 1, Interval::new(t, t + 50_000));
        r.span = Some(1 + i % 2);
        let mut g = Gpu::new(Interval::new(t + 1_000, t + 40_000), TimingSource::Cupti);
        g.device = Some(0);
        r.gpu = Some(g);
        if site == 1 {
            r.bytes = Some(1 << 20);
            r.activities.push(Activity {
                name: "memcpy".into(),
                interval: Interval::new(t + 1_000, t + 21_000),
                kind: ActivityKind::Copy {
                    bytes: 1 << 20,
                    direction: Some(Direction::CpuToGpu),
                    src: MemoryKind::Pageable,
                    dst: MemoryKind::Device,
                },
                stream: Some(7),
                device: Some(0),
            });
            r.activities.push(Activity {
                name: "memset".into(),
                interval: Interval::new(t + 22_000, t + 23_000),
                kind: ActivityKind::Set { bytes: 4096 },
                stream: Some(7),
                device: Some(0),
            });
        } else {
            // Two kernels a call, durations that differ by name and call so no totals tie.
            for k in 0..2 {
                let n = names[((i + k) % 6) as usize];
                let d = 1_000 * (1 + ((i + k) % 6)) + 7 * i + k;
                let s = t + 1_000 + k * 20_000;
                r.activities.push(kernel(n, Interval::new(s, s + d), 0));
            }
        }
        c.records.push(r);
        t += 100_000;
    }
    c.samples.push(DeviceSamples {
        device: 0,
        samples: (0..3)
            .map(|i| DeviceSample {
                time_ns: 1_000_000 + i * 1_000_000,
                gpu_utilization_pct: Some(50 + i as u32),
                power_w: Some(300.5),
                ..DeviceSample::default()
            })
            .collect(),
    });
    c.end = Some(End {
        end_ns: t,
        records: 60,
        losses: vec![Loss { what: "activity buffers".into(), count: 2 }],
        notes: vec!["synthetic".into()],
    });
    c
}

#[test]
fn top_kernels_in_sqlite_equal_the_report_on_cuda_activities() {
    let c = cuda_capture();
    let path = save(&c, "cuda.gpuspan");
    let db = export(&path, "cuda.sqlite");
    let want = report_top(&c);
    assert_eq!(want.len(), 5, "six kernel names: the top 5 leaves one out");
    assert_eq!(sql(&db, TOP_KERNELS), want);
    // The same question straight on the activity table, as a user would first write it.
    let direct = sql(
        &db,
        "SELECT name, 'activity', COUNT(*), SUM(duration_ns) AS t FROM gpu_activities WHERE kind = 'kernel' \
         GROUP BY name ORDER BY t DESC, name LIMIT 5",
    );
    assert_eq!(direct, want);
    assert_eq!(count(&db, "gpu_activities"), 40 * 2 + 20 * 2);
    assert_eq!(
        sql(&db, "SELECT kind, COUNT(*), SUM(bytes) FROM gpu_activities GROUP BY kind ORDER BY kind"),
        vec![row!["copy", 20, 20u64 << 20], row!["kernel", 80, Value::Null], row!["memset", 20, 20 * 4096]]
    );
    assert_eq!(
        sql(&db, "SELECT DISTINCT copy_direction, src_memory, dst_memory FROM gpu_activities WHERE kind = 'copy'"),
        vec![row!["cpu_to_gpu", "pageable", "device"]]
    );
    // Spans, samples, links, losses and notes, as written.
    assert_eq!(
        sql(&db, "SELECT id, parent_id, name FROM spans ORDER BY id"),
        vec![row![1, Value::Null, "epoch"], row![2, 1, "batch"]]
    );
    assert_eq!(
        sql(&db, "SELECT span_id, COUNT(*) FROM calls GROUP BY span_id ORDER BY span_id"),
        vec![row![1, 30], row![2, 30]]
    );
    assert_eq!(
        sql(&db, "SELECT COUNT(*), SUM(gpu_utilization_pct), MIN(power_w) FROM device_samples"),
        vec![row![3, 153, 300.5]]
    );
    assert_eq!(sql(&db, "SELECT pcie_generation, pcie_width FROM device_links"), vec![row![5, 16]]);
    assert_eq!(sql(&db, "SELECT what, count FROM losses"), vec![row!["activity buffers", 2]]);
    assert_eq!(sql(&db, "SELECT note FROM notes"), vec![row!["synthetic"]]);
    assert_eq!(
        sql(&db, "SELECT value FROM meta WHERE key IN ('records_written', 'records_exported') ORDER BY key"),
        vec![row![60], row![60]]
    );
    // The indexes the usual questions use.
    let plan = sql(&db, "EXPLAIN QUERY PLAN SELECT * FROM gpu_activities WHERE name = 'gemm'");
    assert!(format!("{plan:?}").contains("gpu_activities_by_name"), "{plan:?}");
    let plan = sql(&db, "EXPLAIN QUERY PLAN SELECT * FROM calls WHERE site_id = 1");
    assert!(format!("{plan:?}").contains("calls_by_site"), "{plan:?}");
}

#[test]
fn every_field_of_a_record_reaches_its_column() {
    let mut c = Capture::new(Header::new("fields", 7));
    c.header.hostname = Some("node-3".into());
    c.header.start_ns = 1_700_000_000_000_000_000;
    c.sites.push(Site::new(5, "step", SiteKind::Kernel));
    c.threads.push(Thread { index: 2, name: "worker".into() });
    let mut r = Record::new(5, 77, 2, Interval::new(1_000, 9_000));
    r.error = true;
    r.bytes = Some(4096);
    r.clock_corrected_ns = 12;
    r.span = Some(3);
    r.memory = Some([
        Memory { process_rss_bytes: Some(100), device_used_bytes: Some(200) },
        Memory { process_rss_bytes: Some(150), device_used_bytes: None },
    ]);
    let mut g = Gpu::new(Interval::new(2_000, 8_000), TimingSource::GpuTimestamp);
    g.busy_ns = 5_000;
    g.clock_error_ns = 40;
    g.bracket = Bracket::LastSubmit;
    g.device = Some(1);
    r.gpu = Some(g);
    r.activities.push(Activity {
        name: "k".into(),
        interval: Interval::new(2_500, 3_500),
        kind: ActivityKind::Kernel(KernelGeometry {
            grid: [4, 5, 6],
            block: [128, 2, 1],
            registers_per_thread: 32,
            static_shared_bytes: 1024,
            dynamic_shared_bytes: 2048,
        }),
        stream: Some(13),
        device: Some(1),
    });
    // Capture format 8: how its work was found to be its own, and the spans entered at launch.
    r.attributed = Some(gpuspan_capture::Attributed::Ambiguous);
    r.spans_at_launch = Some("forward_pass ×2".into());
    c.records.push(r);
    c.end = Some(End { end_ns: 10_000, records: 1, ..End::default() });
    let db = export(&save(&c, "fields.gpuspan"), "fields.sqlite");
    assert_eq!(
        sql(&db, "SELECT call_id, attributed, spans_at_launch FROM attributions"),
        vec![vec![Value::from(1), "ambiguous".into(), "forward_pass ×2".into()]]
    );
    let row = |q: &str| sql(&db, q).remove(0);
    assert_eq!(
        row("SELECT id, scope_id, site_id, thread_index, host_start_ns, host_end_ns, host_duration_ns, duration_ns, \
             timing_source, gpu_start_ns, gpu_end_ns, gpu_busy_ns, clock_error_ns, clock_corrected_ns, bracketed, \
             bracket_end, device_key, bytes, error, span_id, activities, rss_before_bytes, rss_after_bytes, \
             device_used_before_bytes, device_used_after_bytes FROM calls"),
        vec![
            Value::from(1),
            77.into(),
            5.into(),
            2.into(),
            1_000.into(),
            9_000.into(),
            8_000.into(),
            5_000.into(),
            "gpu_timestamp".into(),
            2_000.into(),
            8_000.into(),
            5_000.into(),
            40.into(),
            12.into(),
            1.into(),
            "last_submit".into(),
            1.into(),
            4096.into(),
            1.into(),
            3.into(),
            1.into(),
            100.into(),
            150.into(),
            200.into(),
            Value::Null,
        ]
    );
    assert_eq!(
        row("SELECT call_id, kind, name, gpu_start_ns, gpu_end_ns, duration_ns, device_key, stream, grid_x, grid_y, \
             grid_z, block_x, block_y, block_z, registers_per_thread, static_shared_bytes, dynamic_shared_bytes, \
             bytes, copy_direction FROM gpu_activities"),
        vec![
            Value::from(1),
            "kernel".into(),
            "k".into(),
            2_500.into(),
            3_500.into(),
            1_000.into(),
            1.into(),
            13.into(),
            4.into(),
            5.into(),
            6.into(),
            128.into(),
            2.into(),
            1.into(),
            32.into(),
            1024.into(),
            2048.into(),
            Value::Null,
            Value::Null,
        ]
    );
    assert_eq!(
        sql(
            &db,
            "SELECT key, value FROM meta WHERE key IN ('hostname', 'pid', 'start_ns', 'format_version') ORDER BY key"
        ),
        vec![
            row!["format_version", VERSION],
            row!["hostname", "node-3"],
            row!["pid", 7],
            row!["start_ns", 1_700_000_000_000_000_000u64],
        ]
    );
    assert_eq!(row("SELECT thread_index, name FROM threads"), row![2, "worker"]);
    // The call's reported kernel is in the view; the call itself (bracketed, with a kernel) is not.
    assert_eq!(sql(&db, "SELECT name, source FROM kernels"), vec![row!["k", "activity"]]);
}

/// The bytes of a capture of `n` calls written up to (not including) its record `upto`, and the
/// whole file: the first is a prefix of the second, so it tells where record `upto` starts.
fn capture_bytes(n: u64, upto: usize) -> (usize, Vec<u8>) {
    let mut c = Capture::new(Header::new("cut", 1));
    c.sites.push(Site::new(0, "s", SiteKind::Kernel));
    c.records = (0..n).map(|i| Record::new(0, i + 1, 1, Interval::new(i * 10, i * 10 + 5))).collect();
    c.end = Some(End { end_ns: n * 10, records: n, ..End::default() });
    let mut all = Vec::new();
    c.write_to(&mut all).unwrap();
    let mut head = c.clone();
    head.records.truncate(upto);
    head.end = None;
    let mut prefix = Vec::new();
    head.write_to(&mut prefix).unwrap();
    assert_eq!(all[..prefix.len()], prefix[..]);
    (prefix.len(), all)
}

#[test]
fn a_cut_capture_exports_what_was_written_and_says_so() {
    let (at, all) = capture_bytes(10, 6);
    let path = scratch("cut.gpuspan");
    std::fs::write(&path, &all[..at + 3]).unwrap();
    let db = scratch("cut.sqlite");
    let _ = std::fs::remove_file(&db);
    let (code, _, err) = gpuspan(&["export".as_ref(), path.as_os_str(), "-o".as_ref(), db.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("incomplete"), "{err}");
    assert_eq!(count(&db, "calls"), 6);
    assert_eq!(sql(&db, "SELECT value FROM meta WHERE key = 'complete'"), vec![row![0]]);
}

#[test]
fn a_damaged_capture_exports_the_calls_before_the_damage_and_fails() {
    let (at, mut all) = capture_bytes(10, 4);
    all[at + 10] ^= 0xff; // inside record 5's payload: its checksum no longer matches
    let path = scratch("damaged.gpuspan");
    std::fs::write(&path, &all).unwrap();
    let db = scratch("damaged.sqlite");
    let _ = std::fs::remove_file(&db);
    let (code, _, err) = gpuspan(&["export".as_ref(), path.as_os_str(), "-o".as_ref(), db.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("damaged") && err.contains("holds what was read before the damage"), "{err}");
    assert_eq!(count(&db, "calls"), 4);
    let damaged = sql(&db, "SELECT value FROM meta WHERE key = 'damaged'");
    assert!(damaged[0][0].as_str().unwrap().contains("checksum"), "{damaged:?}");
}

#[test]
fn bad_paths_fail_in_one_line_and_an_existing_output_needs_force() {
    let good = fixture("lavapipe_requests.gpuspan");
    // A missing capture: nothing is created.
    let db = scratch("missing.sqlite");
    let _ = std::fs::remove_file(&db);
    let (code, _, err) = gpuspan(&["export".as_ref(), "no/such.gpuspan".as_ref(), "-o".as_ref(), db.as_os_str()]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no/such.gpuspan"), "{err}");
    assert!(!db.exists());
    // An output that exists is refused, and left as it was.
    let taken = scratch("taken.sqlite");
    std::fs::write(&taken, "precious").unwrap();
    let args = ["export".as_ref(), good.as_os_str(), "-o".as_ref(), taken.as_os_str()];
    let (code, _, err) = gpuspan(&args);
    assert_eq!(code, 2);
    assert!(err.contains("already exists") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(&taken).unwrap(), b"precious");
    // With --force it is replaced by the database.
    let (code, _, err) = gpuspan(&[&args[..], &["--force".as_ref()]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(count(&taken, "calls"), Capture::open(&good).unwrap().records.len() as u64);
    // The capture itself, even with --force: it stays.
    let own = save(&Capture::open(&good).unwrap(), "own.gpuspan");
    let before = std::fs::read(&own).unwrap();
    let (code, _, err) =
        gpuspan(&["export".as_ref(), own.as_os_str(), "-o".as_ref(), own.as_os_str(), "--force".as_ref()]);
    assert_eq!(code, 2);
    assert!(err.contains("it is the capture being exported"), "{err}");
    assert_eq!(std::fs::read(&own).unwrap(), before);
    // An output in a directory that does not exist.
    let nowhere = scratch("no-such-dir").join("out.sqlite");
    let (code, _, err) = gpuspan(&["export".as_ref(), good.as_os_str(), "-o".as_ref(), nowhere.as_os_str()]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("could not write") && err.contains("out.sqlite"), "{err}");
    // A file that is not a capture.
    let foreign = scratch("foreign.gpuspan");
    std::fs::write(&foreign, "not a capture at all").unwrap();
    let (code, _, err) = gpuspan(&["export".as_ref(), foreign.as_os_str(), "-o".as_ref(), db.as_os_str()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a gpuspan capture"), "{err}");
    assert!(!db.exists());
}

#[test]
fn the_default_output_is_beside_the_capture() {
    let c = cuda_capture();
    let path = save(&c, "beside.gpuspan");
    let _ = std::fs::remove_file(path.with_extension("sqlite"));
    let (code, _, err) = gpuspan(&["export".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(count(&path.with_extension("sqlite"), "calls"), 60);
}

#[test]
fn top_kernels_in_parquet_through_duckdb_equal_the_report() {
    let synthetic = save(&cuda_capture(), "cuda-pq.gpuspan");
    for path in [fixture("lavapipe_demo.gpuspan"), fixture("h100_multi_gpu_nvml.gpuspan"), synthetic] {
        let c = Capture::open(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let dir = export_parquet(&path, &format!("{name}.parquet"));
        let want = report_top(&c);
        assert!(!want.is_empty(), "{name}: the report has kernels");
        assert_eq!(duckdb(&dir, TOP_KERNELS), want, "{name}");
        let counts = duckdb(
            &dir,
            "SELECT (SELECT COUNT(*) FROM calls), (SELECT COUNT(*) FROM gpu_activities), \
             (SELECT COUNT(*) FROM device_samples), (SELECT COUNT(*) FROM spans)",
        );
        let activities: usize = c.records.iter().map(|r| r.activities.len()).sum();
        let samples: usize = c.samples.iter().map(|s| s.samples.len()).sum();
        assert_eq!(counts, vec![row![c.records.len(), activities, samples, c.spans.len()]], "{name}");
        assert_eq!(
            duckdb(&dir, "SELECT value FROM meta WHERE key = 'schema_version'"),
            vec![row![gpuspan_cli::export::SCHEMA_VERSION.to_string()]],
            "{name}"
        );
    }
}

#[test]
fn parquet_of_more_rows_than_a_row_group_keeps_every_row() {
    let n = gpuspan_cli::export::parquet::ROW_GROUP as u64 + 1_234;
    let mut c = Capture::new(Header::new("many", 1));
    c.sites.push(Site::new(0, "s", SiteKind::Kernel));
    c.records = (0..n).map(|i| Record::new(0, i + 1, 1, Interval::new(i * 10, i * 10 + 1 + i % 7))).collect();
    c.end = Some(End { end_ns: n * 10, records: n, ..End::default() });
    let dir = export_parquet(&save(&c, "many.gpuspan"), "many.parquet");
    let total: u64 = c.records.iter().map(|r| r.duration_ns()).sum();
    assert_eq!(
        duckdb(&dir, "SELECT COUNT(*), SUM(duration_ns), MIN(id), MAX(id), COUNT(DISTINCT scope_id) FROM calls"),
        vec![row![n, total, 1, n, n]]
    );
}

#[test]
fn a_parquet_directory_that_holds_files_needs_force() {
    let good = fixture("lavapipe_requests.gpuspan");
    let dir = scratch("taken.parquet");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mine.txt"), "precious").unwrap();
    let args =
        ["export".as_ref(), good.as_os_str(), "--to".as_ref(), "parquet".as_ref(), "-o".as_ref(), dir.as_os_str()];
    let (code, _, err) = gpuspan(&args);
    assert_eq!(code, 2);
    assert!(err.contains("already exists") && err.contains("--force"), "{err}");
    assert!(!dir.join("calls.parquet").exists());
    // With --force the tables are written beside what was there, which stays.
    let (code, _, err) = gpuspan(&[&args[..], &["--force".as_ref()]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(dir.join("mine.txt")).unwrap(), b"precious");
    assert_eq!(
        duckdb(&dir, "SELECT COUNT(*) FROM calls")[0][0],
        Value::from(Capture::open(&good).unwrap().records.len())
    );
    // A file where the directory should be.
    let file = scratch("file.parquet");
    std::fs::write(&file, "x").unwrap();
    let (code, _, err) = gpuspan(&[
        "export".as_ref(),
        good.as_os_str(),
        "--to".as_ref(),
        "parquet".as_ref(),
        "-o".as_ref(),
        file.as_os_str(),
        "--force".as_ref(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a directory"), "{err}");
}

/// An instrumented wgpu device's memory (capture format 9, schema 3): the tables hold what
/// `gpuspan report` states, figure for figure.
#[test]
fn a_wgpu_memory_account_reaches_its_tables_as_the_report_states_it() {
    let c = memory_capture();
    let path = save(&c, "memory.gpuspan");
    let r = report::build(&c);
    assert_eq!(r.memory.len(), 1);
    let m = &r.memory[0];
    assert_eq!(m.device, "GPU 2: llvmpipe");
    let db = export(&path, "memory.sqlite");
    assert_eq!(
        sql(&db, "SELECT device_key, peak_bytes, peak_ns, end_bytes, end_objects, not_sized_textures, samples, samples_dropped FROM gpu_memory"),
        vec![row![0, m.peak_bytes, m.peak_at_ns + c.header.start_ns, m.end_bytes, m.end_objects, m.not_sized, m.samples, m.samples_dropped]]
    );
    let holders = |at: &str, by: &str| -> Vec<Vec<Value>> {
        sql(
            &db,
            &format!("SELECT name, bytes FROM gpu_memory_holders WHERE at = '{at}' AND by = '{by}' ORDER BY rowid"),
        )
    };
    let pairs = |v: &[(String, u64)]| -> Vec<Vec<Value>> { v.iter().map(|(n, b)| row![n.as_str(), *b]).collect() };
    assert_eq!(holders("peak", "label"), pairs(&m.peak_by_label));
    assert_eq!(holders("peak", "owner"), pairs(&m.peak_by_owner));
    assert_eq!(holders("end", "label"), pairs(&m.end_by_label));
    assert_eq!(holders("end", "owner"), pairs(&m.end_by_owner));
    let samples: Vec<Vec<Value>> = c.memory[0].samples.iter().map(|s| row![0, s.time_ns, s.bytes]).collect();
    assert_eq!(sql(&db, "SELECT device_key, time_ns, bytes FROM gpu_memory_samples ORDER BY time_ns"), samples);

    // The text report: the section with the same figures, and what they leave out.
    let (code, out, err) = gpuspan(&["report".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let section = out.split("\nGPU memory (wgpu, logical sizes").nth(1).unwrap_or_else(|| panic!("{out}"));
    let row = section.lines().find(|l| l.contains("GPU 2: llvmpipe")).unwrap_or_else(|| panic!("{out}"));
    for cell in [
        "5.0 MiB",
        "500 ns",
        "kv cache 4.0 MiB, weights 1.0 MiB",
        "decode 4.0 MiB, load 1.0 MiB",
        "weights 1.0 MiB",
        "load 1.0 MiB",
    ] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    assert!(out.contains("1 textures of a planar format are not in the GPU memory figures"), "{out}");
    assert!(out.contains("1 GPU memory changes after the first 3 are counted"), "{out}");
    let (code, csv, _) = gpuspan(&[
        "report".as_ref(),
        path.as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
        "--table".as_ref(),
        "memory".as_ref(),
    ]);
    assert_eq!(code, 0);
    assert!(csv.contains("5242880,500,kv cache=4194304; weights=1048576"), "{csv}");
}
