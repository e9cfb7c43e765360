//! Opening a capture, with a progress bar on long reads.

use gpuspan_capture::{Capture, ReadError};
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

/// Reads the whole capture at `path`. With `progress`, a large file shows a bar on stderr
/// (only when stderr is a terminal: indicatif draws nothing otherwise).
pub fn open(path: &Path, progress: bool) -> Result<Capture, LoadError> {
    let err = |error: ReadError| LoadError { path: path.to_owned(), error };
    let file = std::fs::File::open(path).map_err(|e| err(e.into()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if progress && len >= BAR_FROM_BYTES {
        let bar = indicatif::ProgressBar::new(len);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("reading {msg} {wide_bar} {bytes}/{total_bytes} ({eta})")
        {
            bar.set_style(style);
        }
        bar.set_message(path.display().to_string());
        let read = Capture::from_reader(BufReader::with_capacity(1 << 20, Counting { inner: file, bar: bar.clone() }));
        bar.finish_and_clear();
        read.map_err(err)
    } else {
        Capture::from_reader(BufReader::with_capacity(1 << 20, file)).map_err(err)
    }
}
