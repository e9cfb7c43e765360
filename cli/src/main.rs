//! `gpuspan`: answers from a capture file written by a program instrumented with gpuspan
//! (`GPUSPAN_CAPTURE=path`), and `gpuspan top`, the live view of programs running with
//! `GPUSPAN_LIVE=1`.
//!
//! Exit status: 0 done; 1 `diff --fail-if-slower` found a significant slowdown; 2 the command
//! could not run (a capture that cannot be read, an output that cannot be written, no live
//! process to attach to, bad usage).

use clap::{Parser, Subcommand, ValueEnum};
use gpuspan_capture::Capture;
use gpuspan_cli::{diff, export, flame, load, perfetto, picture, ranks, report};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "gpuspan",
    version,
    about = "Reports, flamegraphs, diffs and timelines from gpuspan capture files; live views of running programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Per-site, kernel and transfer tables, device busy time, GPU idle time attributed to the
    /// host, launch-bound sites and transfer findings.
    Report {
        /// Capture files, or directories of them (every `*.gpuspan` in it: the runs several
        /// processes wrote for one capture path); a report of each.
        #[arg(required = true, num_args = 1..)]
        captures: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// With `--format csv`: which table.
        #[arg(long, value_enum, default_value_t = report::CsvTable::Sites)]
        table: report::CsvTable,
    },
    /// GPU time folded over thread, enclosing calls, site and kernel: an SVG, or folded stacks.
    Flamegraph {
        capture: PathBuf,
        /// Where to write (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Folded stacks (`stack nanoseconds` per line) instead of an SVG.
        #[arg(long)]
        folded: bool,
        #[arg(long, default_value = "GPU time")]
        title: String,
    },
    /// Per-site and per-kernel change from BASE to NEW, with a confidence interval and a test.
    Diff {
        base: PathBuf,
        new: PathBuf,
        /// Exit with status 1 when something is slower by at least this much with 95 %
        /// confidence (e.g. `5%`).
        #[arg(long, value_parser = parse_percent)]
        fail_if_slower: Option<f64>,
        #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
        format: DiffFormat,
    },
    /// Several captures (ranks of one job) on one Perfetto timeline, one process each.
    Merge {
        /// Capture files, or directories of them (every `*.gpuspan` in it).
        #[arg(required = true, num_args = 1..)]
        captures: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
        /// `json` (Chrome Trace Event JSON) or `perfetto` (Perfetto's native protobuf trace).
        #[arg(long, value_enum, default_value_t = perfetto::Format::Json)]
        format: perfetto::Format,
        /// A static SVG picture instead of a Perfetto timeline.
        #[arg(long, conflicts_with = "format")]
        svg: bool,
    },
    /// The captures of one job's ranks side by side: each rank's GPU compute and collective
    /// time, each site per rank, and the straggler the others wait for in their collectives.
    Ranks {
        /// One capture per rank (`rank<N>` in the file names gives the rank, else the order), or
        /// directories of them.
        #[arg(required = true, num_args = 1..)]
        captures: Vec<PathBuf>,
        /// A site whose calls are collectives (besides those running NCCL or RCCL kernels).
        #[arg(long = "collective")]
        collectives: Vec<String>,
        /// Compare the ranks step by step: NAME is an annotated site (each call a step) or an
        /// application span (each instance a step), e.g. a training iteration.
        #[arg(long = "step", value_name = "NAME")]
        step: Option<String>,
        #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
        format: DiffFormat,
    },
    /// Every call, kernel, copy, application span, device and device sample of a capture as SQL
    /// tables (schema: docs/cli.md), written in one pass.
    Export {
        capture: PathBuf,
        #[arg(long, value_enum, default_value_t = export::To::Sqlite)]
        to: export::To,
        /// Where to write: a database file, or a directory for Parquet's files (default: the
        /// capture's path with the extension `.sqlite` or `.parquet`).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Replace the output if it exists.
        #[arg(long)]
        force: bool,
    },
    /// The Perfetto timeline of one capture, with counter tracks.
    Timeline {
        capture: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        /// `json` (Chrome Trace Event JSON) or `perfetto` (Perfetto's native protobuf trace:
        /// smaller, and faster to load in large traces).
        #[arg(long, value_enum, default_value_t = perfetto::Format::Json)]
        format: perfetto::Format,
        /// A static SVG picture instead of a Perfetto timeline.
        #[arg(long, conflicts_with = "format")]
        svg: bool,
    },
    /// The live dashboard of running programs that serve the live feed (`GPUSPAN_LIVE=1`): each
    /// site's calls/s, GPU time, p50/p99, bytes/s and errors over the last seconds, and a panel
    /// per device. Keys: q quit, s/S sort, r reverse, / filter, p pause, Tab or 1-9 process.
    #[cfg(unix)]
    Top {
        /// Processes to show, by pid or socket path (default: every live gpuspan process of this
        /// user, found as they start).
        targets: Vec<String>,
        /// Look for sockets in this directory too (besides $XDG_RUNTIME_DIR/gpuspan and
        /// gpuspan-<uid> in the temporary directory).
        #[arg(long = "dir")]
        dirs: Vec<PathBuf>,
        /// Print one snapshot of each process and exit, instead of the dashboard.
        #[arg(long)]
        once: bool,
        /// With `--once`: `json` (one snapshot per line, as the program sent it) or `text`.
        #[arg(long, value_enum, default_value_t = TopFormat::Text)]
        format: TopFormat,
        /// The column the site table is sorted by at first.
        #[arg(long, value_enum, default_value_t = gpuspan_cli::top::SortKey::CallsPerS)]
        sort: gpuspan_cli::top::SortKey,
        /// Refresh every this many milliseconds.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
        interval_ms: u64,
        /// Wait up to this many seconds for a live process to appear (a program just started).
        #[arg(long, default_value_t = 0.0)]
        wait: f64,
    },
    /// Record every call of a running program for a while, into a capture file: asks the
    /// program over its live feed (`GPUSPAN_LIVE=1`) to trace every call for the window and
    /// stream the records back. The program's numbers and outputs are unchanged outside it.
    #[cfg(unix)]
    Capture {
        /// The process, by pid or socket path.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        target: Option<String>,
        /// Every live gpuspan process of this user (all ranks of a job), one file each.
        #[arg(long)]
        all: bool,
        /// How long to record: `30s`, `500ms`, `2m`.
        #[arg(long = "for", default_value = "30s", value_parser = gpuspan_cli::live::parse_seconds)]
        seconds: f64,
        /// The capture file (default `<program>-<pid>.gpuspan`); with `--all`, the directory
        /// the files go into (default: the current one).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Look for sockets in this directory too.
        #[arg(long = "dir")]
        dirs: Vec<PathBuf>,
    },
}

#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TopFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DiffFormat {
    Text,
    Json,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 =
        s.trim().trim_end_matches('%').trim().parse().map_err(|_| format!("{s:?} is not a percentage like 5%"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{s:?} is not a percentage of 0 or more"))
    }
}

/// Why a command stopped: said once on stderr, exit status 2.
#[derive(Debug)]
struct Failure(String);

impl From<load::LoadError> for Failure {
    fn from(e: load::LoadError) -> Failure {
        Failure(e.to_string())
    }
}

fn read(path: &Path) -> Result<Capture, Failure> {
    let c = load::open(path, true)?;
    warn_truncated(path, &c.truncation);
    Ok(c)
}

fn warn_truncated(path: &Path, truncation: &Option<gpuspan_capture::Truncation>) {
    if let Some(t) = truncation {
        say(&format!("gpuspan: warning: {}: {t}", path.display()));
    }
}

/// One line on stderr, names in it escaped ([`gpuspan_cli::table::shown_text`]).
fn say(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{}", gpuspan_cli::table::shown_text(line));
}

/// Writes to `path`, or to standard output without one. A closed standard output (`| head`)
/// ends the command quietly.
fn emit(path: Option<&Path>, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    let result = match path {
        Some(p) => File::create(p).and_then(|f| {
            let mut w = BufWriter::new(f);
            write(&mut w)?;
            w.flush()
        }),
        None => {
            let mut w = BufWriter::new(io::stdout().lock());
            match write(&mut w).and_then(|()| w.flush()) {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
                other => other,
            }
        }
    };
    result.map_err(|e| match path {
        Some(p) => Failure(format!("could not write {}: {e}", p.display())),
        None => Failure(format!("could not write to standard output: {e}")),
    })
}

/// A command's answer as indented JSON, one line at its end.
fn write_json(w: &mut dyn Write, value: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value)?;
    writeln!(w)
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Report { captures, format, table } => {
            let paths = load::expand(&captures)?;
            if let [one] = &paths[..] {
                let others = load::siblings(one);
                if !others.is_empty() {
                    let names: Vec<String> = others.iter().map(|p| p.display().to_string()).collect();
                    say(&format!(
                        "gpuspan: note: other processes wrote runs for this capture path too: {} (report them all with the directory)",
                        names.join(", ")
                    ));
                }
            }
            let mut reports = Vec::new();
            for p in &paths {
                let (r, c) = report::stream(p, true)?;
                warn_truncated(p, &c.truncation);
                reports.push(r);
            }
            emit(None, |w| match (format, &reports[..]) {
                (Format::Json, [one]) => write_json(w, one),
                (Format::Json, all) => write_json(w, &all),
                (Format::Text, all) => {
                    for (i, r) in all.iter().enumerate() {
                        if all.len() > 1 {
                            writeln!(w, "{}== {}", if i > 0 { "\n" } else { "" }, paths[i].display())?;
                        }
                        w.write_all(r.to_text().as_bytes())?;
                    }
                    Ok(())
                }
                (Format::Csv, [one]) => w.write_all(one.table(table).to_csv().as_bytes()),
                (Format::Csv, all) => {
                    // One table, a first column saying whose row it is.
                    let mut t = gpuspan_cli::table::Table::new(&["capture"]);
                    for (p, r) in paths.iter().zip(all) {
                        let mine = r.table(table);
                        if t.header.len() == 1 {
                            t.header.extend(mine.header.iter().cloned());
                        }
                        for row in mine.rows {
                            t.row(std::iter::once(p.display().to_string()).chain(row).collect());
                        }
                    }
                    w.write_all(t.to_csv().as_bytes())
                }
            })?;
        }
        Command::Flamegraph { capture, output, folded, title } => {
            let (stacks, c) = flame::stream(&capture, true)?;
            warn_truncated(&capture, &c.truncation);
            let note = stacks.cut_note();
            emit(output.as_deref(), |w| {
                if folded {
                    flame::folded_lines(&stacks.stacks).iter().try_for_each(|l| writeln!(w, "{l}"))
                } else {
                    flame::svg_noted(&stacks.stacks, &title, note.as_deref(), w)
                }
            })?;
            if let Some(note) = &note {
                say(&format!("gpuspan: note: {note}"));
            }
            if let Some(p) = &output {
                say(&format!("gpuspan: flamegraph of {} stacks written to {}", stacks.stacks.len(), p.display()));
            }
        }
        Command::Diff { base, new, fail_if_slower, format } => {
            let (d, b, n) = diff::compare_files(&base, &new, true, &diff::Settings::default())?;
            warn_truncated(&base, &b.truncation);
            warn_truncated(&new, &n.truncation);
            emit(None, |w| match format {
                DiffFormat::Text => w.write_all(d.to_text().as_bytes()),
                DiffFormat::Json => write_json(w, &d),
            })?;
            if let Some(limit) = fail_if_slower {
                let slower = d.slower_than(limit);
                if !slower.is_empty() {
                    let names: Vec<String> = slower.iter().map(|c| format!("{} {}", c.what, c.name)).collect();
                    say(&format!("gpuspan: slower by {limit}% or more with 95% confidence: {}", names.join(", ")));
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Merge { captures, output, format, svg } => {
            let captures = load::expand(&captures)?;
            let loaded: Vec<Capture> = captures.iter().map(|p| read(p)).collect::<Result<_, _>>()?;
            let labels: Vec<String> = captures.iter().map(|p| p.display().to_string()).collect();
            let pairs: Vec<(&str, &Capture)> = labels.iter().map(String::as_str).zip(loaded.iter()).collect();
            if svg {
                emit(Some(&output), |w| picture::write(&pairs, w))?;
                say(&format!("gpuspan: {} captures drawn into {}", loaded.len(), output.display()));
            } else {
                emit(Some(&output), |w| perfetto::write_as(format, &pairs, w))?;
                say(&format!(
                    "gpuspan: {} captures merged into {} (open it in https://ui.perfetto.dev)",
                    loaded.len(),
                    output.display()
                ));
            }
        }
        Command::Ranks { captures, collectives, step, format } => {
            let captures = load::expand(&captures)?;
            let loaded: Vec<Capture> = captures.iter().map(|p| read(p)).collect::<Result<_, _>>()?;
            let labels: Vec<String> = captures.iter().map(|p| p.display().to_string()).collect();
            let numbers = ranks::rank_numbers(&captures.iter().map(PathBuf::as_path).collect::<Vec<_>>());
            let given: Vec<(&str, usize, &Capture)> =
                labels.iter().zip(&numbers).zip(&loaded).map(|((l, n), c)| (l.as_str(), *n, c)).collect();
            let mut r = ranks::compare(&given, &collectives);
            if let Some(name) = &step {
                r = r.with_steps(&given, name);
            }
            emit(None, |w| match format {
                DiffFormat::Text => w.write_all(r.to_text().as_bytes()),
                DiffFormat::Json => write_json(w, &r),
            })?;
        }
        #[cfg(unix)]
        Command::Top { targets, dirs, once, format, sort, interval_ms, wait } => {
            return top(TopArgs { targets, dirs, once, format, sort, interval_ms, wait });
        }
        #[cfg(unix)]
        Command::Capture { target, all, seconds, output, dirs } => return capture(target, all, seconds, output, dirs),
        Command::Export { capture, to, output, force } => {
            let out = output.unwrap_or_else(|| export::default_output(&capture, to));
            let s = export::export(&capture, to, &out, force, true).map_err(|e| Failure(e.to_string()))?;
            warn_truncated(&capture, &s.truncation);
            say(&format!(
                "gpuspan: {} calls, {} GPU activities, {} spans and {} device samples written to {}",
                s.calls,
                s.activities,
                s.spans,
                s.samples,
                out.display()
            ));
            if let Some(why) = &s.damaged {
                return Err(Failure(format!(
                    "{}: {why}; {} holds what was read before the damage",
                    capture.display(),
                    out.display()
                )));
            }
        }
        Command::Timeline { capture, output, format, svg } => {
            let c = read(&capture)?;
            let label = capture.display().to_string();
            if svg {
                emit(Some(&output), |w| picture::write(&[(&label, &c)], w))?;
                say(&format!("gpuspan: timeline of {} calls drawn into {}", c.records.len(), output.display()));
                return Ok(ExitCode::SUCCESS);
            }
            emit(Some(&output), |w| perfetto::write_as(format, &[(&label, &c)], w))?;
            say(&format!(
                "gpuspan: timeline of {} calls written to {} (open it in https://ui.perfetto.dev)",
                c.records.len(),
                output.display()
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
struct TopArgs {
    targets: Vec<String>,
    dirs: Vec<PathBuf>,
    once: bool,
    format: TopFormat,
    sort: gpuspan_cli::top::SortKey,
    interval_ms: u64,
    wait: f64,
}

/// `gpuspan top`: the processes asked for (or all), once as text or JSON, or the dashboard.
#[cfg(unix)]
fn top(a: TopArgs) -> Result<ExitCode, Failure> {
    use gpuspan_cli::live;
    use gpuspan_cli::top::{self as dashboard, View};
    use std::io::IsTerminal;
    let mut dirs = live::default_dirs();
    dirs.extend(a.dirs);
    let view = View { sort: a.sort, ..View::default() };
    let looked_in = || dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ");
    // Processes named on the command line must all be found (waiting for them if asked); with
    // none named, the dashboard finds them as they come and `--once` takes what is there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(a.wait.clamp(0.0, 3600.0));
    let (chosen, missing) = loop {
        let found = live::discover(&dirs);
        let (chosen, missing): (Vec<_>, Vec<_>) = if a.targets.is_empty() {
            (found, Vec::new())
        } else {
            let resolved: Vec<_> = a.targets.iter().map(|t| (t, live::resolve(t, &found))).collect();
            (
                resolved.iter().filter_map(|(_, e)| e.clone()).collect(),
                resolved.iter().filter(|(_, e)| e.is_none()).map(|(t, _)| (*t).clone()).collect(),
            )
        };
        let enough = missing.is_empty() && (!chosen.is_empty() || !a.once);
        if enough || std::time::Instant::now() >= deadline {
            break (chosen, missing);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    if !missing.is_empty() {
        return Err(Failure(format!(
            "no live gpuspan process {} (looked in {}); is it running with GPUSPAN_LIVE=1?",
            missing.join(", "),
            looked_in()
        )));
    }
    if !a.once {
        if !io::stdout().is_terminal() {
            return Err(Failure("gpuspan top draws on a terminal; for scripts use --once (--format json)".into()));
        }
        let explicit = if a.targets.is_empty() { Vec::new() } else { chosen };
        dashboard::run(dirs, explicit, std::time::Duration::from_millis(a.interval_ms), view)
            .map_err(|e| Failure(format!("the terminal failed: {e}")))?;
        return Ok(ExitCode::SUCCESS);
    }
    if chosen.is_empty() {
        return Err(Failure(format!(
            "no live gpuspan process found (looked in {}); start one with GPUSPAN_LIVE=1",
            looked_in()
        )));
    }
    // A program that does not answer in time (stopped with Ctrl-Z, gone, hostile) is skipped
    // with a note; the others are shown.
    let mut answers = Vec::new();
    let mut skipped = Vec::new();
    for (e, answer) in chosen.iter().zip(live::snapshots(&chosen)) {
        match answer {
            Ok(a) => answers.push(a),
            Err(err) => skipped.push(format!("skipped pid {}: {err}", e.pid)),
        }
    }
    for note in &skipped {
        say(&format!("gpuspan: note: {note}"));
    }
    if answers.is_empty() {
        return Err(Failure(format!("no live gpuspan process answered ({} skipped)", skipped.len())));
    }
    emit(None, |w| {
        for (line, snapshot) in &answers {
            match a.format {
                TopFormat::Json => writeln!(w, "{line}")?,
                TopFormat::Text => w.write_all(dashboard::snapshot_text(snapshot, &view).as_bytes())?,
            }
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `gpuspan capture`: one window per process asked for, each into its own file, at once.
#[cfg(unix)]
fn capture(
    target: Option<String>,
    all: bool,
    seconds: f64,
    output: Option<PathBuf>,
    extra: Vec<PathBuf>,
) -> Result<ExitCode, Failure> {
    use gpuspan_cli::live;
    let mut dirs = live::default_dirs();
    dirs.extend(extra);
    let looked_in = || dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ");
    let found = live::discover(&dirs);
    let chosen = match &target {
        Some(t) if !all => vec![live::resolve(t, &found).ok_or_else(|| {
            Failure(format!(
                "no live gpuspan process {t} (looked in {}); is it running with GPUSPAN_LIVE=1?",
                looked_in()
            ))
        })?],
        _ => found,
    };
    if chosen.is_empty() {
        return Err(Failure(format!(
            "no live gpuspan process found (looked in {}); start one with GPUSPAN_LIVE=1",
            looked_in()
        )));
    }
    let name = |e: &live::Endpoint| PathBuf::from(format!("{}-{}.gpuspan", e.label(), e.pid));
    let files: Vec<PathBuf> = chosen
        .iter()
        .map(|e| match (&output, all) {
            (Some(o), false) => o.clone(),
            (Some(dir), true) => dir.join(name(e)),
            (None, _) => name(e),
        })
        .collect();
    if all {
        if let Some(dir) = &output {
            std::fs::create_dir_all(dir).map_err(|e| Failure(format!("could not create {}: {e}", dir.display())))?;
        }
    }
    say(&format!("gpuspan: recording every call of {} process(es) for {seconds} s", chosen.len()));
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> =
            chosen.iter().zip(&files).map(|(e, file)| s.spawn(move || live::capture(&e.path, seconds, file))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(live::CaptureError::Refused { path: String::new(), why: "the capture thread failed".into() })
                })
            })
            .collect()
    });
    let mut failed = 0;
    for (file, result) in files.iter().zip(results) {
        match result {
            Ok(c) => {
                let dropped = if c.dropped > 0 {
                    format!(" ({} dropped: this client did not take them in time)", c.dropped)
                } else {
                    String::new()
                };
                say(&format!(
                    "gpuspan: {} calls of {} (pid {}) over {} s{dropped} written to {} (read it with `gpuspan report {}`)",
                    c.records,
                    c.program,
                    c.pid,
                    c.window_s,
                    file.display(),
                    file.display()
                ));
            }
            Err(e) => {
                failed += 1;
                say(&format!("gpuspan: error: {e}"));
            }
        }
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(Failure(message)) => {
            say(&format!("gpuspan: error: {message}"));
            ExitCode::from(2)
        }
    }
}
