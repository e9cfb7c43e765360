//! `gpuspan`: answers from a capture file written by a program instrumented with gpuspan
//! (`GPUSPAN_CAPTURE=path`).
//!
//! Exit status: 0 done; 1 `diff --fail-if-slower` found a significant slowdown; 2 the command
//! could not run (a capture that cannot be read, an output that cannot be written, bad usage).

use clap::{Parser, Subcommand, ValueEnum};
use gpuspan_capture::Capture;
use gpuspan_cli::{diff, flame, load, perfetto, report};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "gpuspan", version, about = "Reports, flamegraphs, diffs and timelines from gpuspan capture files")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Per-site, kernel and transfer tables, device busy time, GPU idle time attributed to the
    /// host, launch-bound sites and transfer findings.
    Report {
        capture: PathBuf,
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
        #[arg(required = true, num_args = 1..)]
        captures: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// The Perfetto timeline of one capture, with counter tracks.
    Timeline {
        capture: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
    },
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
    if let Some(t) = &c.truncation {
        say(&format!("gpuspan: warning: {}: {t}", path.display()));
    }
    Ok(c)
}

fn say(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
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

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Report { capture, format, table } => {
            let c = read(&capture)?;
            let r = report::build(&c);
            emit(None, |w| match format {
                Format::Text => w.write_all(r.to_text().as_bytes()),
                Format::Json => {
                    serde_json::to_writer_pretty(&mut *w, &r)?;
                    writeln!(w)
                }
                Format::Csv => w.write_all(r.table(table).to_csv().as_bytes()),
            })?;
        }
        Command::Flamegraph { capture, output, folded, title } => {
            let c = read(&capture)?;
            let stacks = flame::folded(&c);
            emit(output.as_deref(), |w| {
                if folded {
                    flame::folded_lines(&stacks).iter().try_for_each(|l| writeln!(w, "{l}"))
                } else {
                    flame::svg(&stacks, &title, w)
                }
            })?;
            if let Some(p) = &output {
                say(&format!("gpuspan: flamegraph of {} stacks written to {}", stacks.len(), p.display()));
            }
        }
        Command::Diff { base, new, fail_if_slower, format } => {
            let (b, n) = (read(&base)?, read(&new)?);
            let d = diff::compare(&b, &n, &diff::Settings::default());
            emit(None, |w| match format {
                DiffFormat::Text => w.write_all(d.to_text().as_bytes()),
                DiffFormat::Json => {
                    serde_json::to_writer_pretty(&mut *w, &d)?;
                    writeln!(w)
                }
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
        Command::Merge { captures, output } => {
            let loaded: Vec<Capture> = captures.iter().map(|p| read(p)).collect::<Result<_, _>>()?;
            let labels: Vec<String> = captures.iter().map(|p| p.display().to_string()).collect();
            let pairs: Vec<(&str, &Capture)> = labels.iter().map(String::as_str).zip(loaded.iter()).collect();
            emit(Some(&output), |w| perfetto::write(&pairs, w))?;
            say(&format!(
                "gpuspan: {} captures merged into {} (open it in https://ui.perfetto.dev)",
                loaded.len(),
                output.display()
            ));
        }
        Command::Timeline { capture, output } => {
            let c = read(&capture)?;
            let label = capture.display().to_string();
            emit(Some(&output), |w| perfetto::write(&[(&label, &c)], w))?;
            say(&format!(
                "gpuspan: timeline of {} calls written to {} (open it in https://ui.perfetto.dev)",
                c.records.len(),
                output.display()
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
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
