//! Opening a capture, with a progress bar on long reads.

use gpuspan_capture::{Capture, Frame, ReadError, Reader, Record};
use std::fmt;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

/// A capture that could not be read, with its path.
#[derive(Debug)]
pub struct LoadError {
    pub path: PathBuf,
    pub error: ReadError,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for LoadError {}

/// Files smaller than this read in well under a second: no bar.
const BAR_FROM_BYTES: u64 = 64 << 20;

/// Counts bytes into the bar as they are read (once per buffer refill, not per frame).
struct Counting<R> {
    inner: R,
    bar: indicatif::ProgressBar,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

/// The file at `path`, buffered, counting into a bar on stderr when `progress` and it is large
/// (only when stderr is a terminal: indicatif draws nothing otherwise).
fn input(path: &Path, progress: bool) -> Result<(Box<dyn Read>, Option<indicatif::ProgressBar>), LoadError> {
    let file = open_regular(path).map_err(|e| LoadError { path: path.to_owned(), error: e.into() })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if progress && len >= BAR_FROM_BYTES {
        let bar = indicatif::ProgressBar::new(len);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("reading {msg} {wide_bar} {bytes}/{total_bytes} ({eta})")
        {
            bar.set_style(style);
        }
        bar.set_message(path.display().to_string());
        let inp = BufReader::with_capacity(1 << 20, Counting { inner: file, bar: bar.clone() });
        Ok((Box::new(inp), Some(bar)))
    } else {
        Ok((Box::new(BufReader::with_capacity(1 << 20, file)), None))
    }
}

/// `path` opened for reading if it is a regular file; anything else is refused with one line
/// saying what it is. A named pipe with no writer would block the open (and the read) forever,
/// a terminal or a device may never end, and a pipe cannot be read twice (the report and the
/// flamegraph read a file again when its records are far out of order).
///
/// The type is checked before opening (a device is never opened) and again on the opened file,
/// which is opened with `O_NONBLOCK` so that a file swapped for a FIFO in between cannot block.
fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    refuse_unless_regular(&std::fs::metadata(path)?)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        // Harmless on a regular file (its reads never block); on a FIFO it makes the open
        // return at once, and the check below refuses it.
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    refuse_unless_regular(&file.metadata()?)?;
    Ok(file)
}

/// An error naming what `meta` is, unless it is a regular file.
fn refuse_unless_regular(meta: &std::fs::Metadata) -> io::Result<()> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let what = non_regular_kind(&kind);
    let why = if kind.is_dir() {
        "it is a directory, not a capture file (`report`, `merge` and `ranks` take a directory of captures)".to_owned()
    } else if what == FIFO {
        format!(
            "it is {what}, not a capture file; gpuspan reads captures from regular files only (save the stream to a file first, e.g. `cat PIPE > run.gpuspan`)"
        )
    } else {
        format!("it is {what}, not a capture file; gpuspan reads captures from regular files only")
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, why))
}

/// What a named pipe is called in the messages.
const FIFO: &str = "a named pipe (FIFO)";

#[cfg(unix)]
fn non_regular_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        FIFO
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "something other than a regular file"
    }
}

#[cfg(not(unix))]
fn non_regular_kind(_: &std::fs::FileType) -> &'static str {
    "something other than a regular file"
}

/// Reads the whole capture at `path`. With `progress`, a large file shows a bar on stderr.
pub fn open(path: &Path, progress: bool) -> Result<Capture, LoadError> {
    let (inp, bar) = input(path, progress)?;
    let read = Capture::from_reader(inp);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    read.map_err(|error| LoadError { path: path.to_owned(), error })
}

/// A capture file's frames, read through a buffer (and a progress bar's counter).
pub type FrameReader = Reader<Box<dyn Read>>;

/// The capture at `path`, opened for reading frame by frame (its header read), and the bar that
/// counts its bytes, if one shows: for a caller that writes each frame out as it is read
/// ([`crate::export`]) and must keep what it read before a damaged frame. Finish the bar when done.
pub fn frames(path: &Path, progress: bool) -> Result<(FrameReader, Option<indicatif::ProgressBar>), LoadError> {
    let (inp, bar) = input(path, progress)?;
    match Reader::new(inp) {
        Ok(r) => Ok((r, bar)),
        Err(error) => {
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            Err(LoadError { path: path.to_owned(), error })
        }
    }
}

/// Reads the capture at `path` in one pass, handing each record to `each` as it is read and
/// keeping none: the capture returned has every frame but the records (`records` is empty).
/// Memory is one frame's plus what `each` keeps.
pub fn stream(path: &Path, progress: bool, mut each: impl FnMut(&Capture, &Record)) -> Result<Capture, LoadError> {
    let err = |error: ReadError| LoadError { path: path.to_owned(), error };
    let (inp, bar) = input(path, progress)?;
    let read = (|| {
        let mut r = Reader::new(inp)?;
        let mut c = Capture::new(r.header().clone());
        while let Some(f) = r.next_frame()? {
            match f {
                Frame::Record(rec) => each(&c, &rec),
                other => c.push(other),
            }
        }
        c.truncation = r.truncation().cloned();
        Ok(c)
    })();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    read.map_err(err)
}

/// The capture files `args` name: a file as given; a directory as every `*.gpuspan` file in it
/// (not in its subdirectories), in name order: the runs several processes wrote for one capture
/// path (`<stem>.gpuspan`, `<stem>.<pid>.gpuspan`). A directory without one is an error.
pub fn expand(args: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for a in args {
        if !a.is_dir() {
            out.push(a.clone());
            continue;
        }
        let err = |e: io::Error| LoadError { path: a.clone(), error: e.into() };
        let mut found: Vec<PathBuf> = std::fs::read_dir(a)
            .map_err(err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "gpuspan") && p.is_file())
            .collect();
        if found.is_empty() {
            let why = io::Error::new(io::ErrorKind::NotFound, "it is a directory with no capture (*.gpuspan) in it");
            return Err(err(why));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// The other runs written for the capture path of `path`: `<stem>.<pid>.gpuspan` beside
/// `<stem>.gpuspan` (or the first run and the others, given one of those), in name order.
pub fn siblings(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let Some(stem) = name.strip_suffix(".gpuspan") else { return Vec::new() };
    // `run.8.gpuspan` is a run of `run.gpuspan`'s path.
    let base = match stem.rsplit_once('.') {
        Some((b, pid)) if !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()) => b,
        _ => stem,
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let Some(n) = n.to_str() else { return false };
            n != name
                && (n == format!("{base}.gpuspan")
                    || n.strip_prefix(base)
                        .and_then(|r| r.strip_prefix('.'))
                        .and_then(|r| r.strip_suffix(".gpuspan"))
                        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit())))
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}
