//! Appending frames.

use crate::{Frame, Header, MAGIC, MAX_FRAME, VERSION};
use std::io::{self, Write};

/// Writes a capture: the magic, the version and the header at once, then each frame as given.
/// Nothing is buffered here beyond one frame's encoding (reused between frames); put a
/// `BufWriter` under it and flush it when a reader should see what was written.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
    scratch: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W, header: &Header) -> io::Result<Writer<W>> {
        out.write_all(&MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        let mut w = Writer { out, scratch: Vec::with_capacity(256) };
        w.write(&Frame::Header(header.clone()))?;
        Ok(w)
    }

    /// Appends one frame: its length, its CRC, its payload, in one `write_all` so that a buffer
    /// underneath holds whole frames as often as possible.
    pub fn write(&mut self, frame: &Frame) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        buf.extend_from_slice(&[0; 8]);
        let mut buf = postcard::to_extend(frame, buf).map_err(io::Error::other)?;
        let len = buf.len() - 8;
        let len32 = u32::try_from(len).ok().filter(|l| *l <= MAX_FRAME).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("a frame of {len} bytes is over the format's limit"))
        })?;
        let crc = crc32fast::hash(&buf[8..]);
        buf[..4].copy_from_slice(&len32.to_le_bytes());
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        let written = self.out.write_all(&buf);
        self.scratch = buf;
        written
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn get_ref(&self) -> &W {
        &self.out
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
