//! A file of captured CUPTI traffic: what `GPUSPAN_CUPTI_DUMP=<path>` writes on a GPU machine,
//! and what the fixtures under `tests/fixtures/cuda/` are. It holds the buffers exactly as CUPTI
//! returned them, the record boundaries CUPTI reported, the kernel names behind the name
//! pointers, and the scope and buffer events needed to replay attribution.
//!
//! The live side writes one when `GPUSPAN_CUPTI_DUMP=<path>` is set; reading is replay's
//! business (tests, through `gpuspan-testing`).

use super::thread_index::{Snapshot, Window};
use super::Live;
use std::io::Write;

/// First bytes of every dump file.
pub const MAGIC: &[u8] = b"GPUSPAN-CUPTI-DUMP 1\n";

/// One entry of a dump, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// CUPTI asked for a buffer.
    Requested {
        /// The buffer's number (from 1).
        seq: u64,
    },
    /// CUPTI returned a buffer.
    Buffer {
        /// The buffer's number.
        seq: u64,
        /// When, on the host clock.
        host_ns: u64,
        /// Where its records start.
        offsets: Vec<u32>,
        /// Its valid bytes.
        bytes: Vec<u8>,
    },
    /// The kernel name behind a name pointer found in a record.
    Name {
        /// The pointer in the record.
        ptr: u64,
        /// The (mangled) name it pointed to.
        name: String,
    },
    /// An annotated scope ended.
    Ended {
        /// The scope's id (its external correlation id).
        scope_id: u64,
        /// Buffers requested when it ended: it waits for all of them.
        fence: u64,
        /// When, on the host clock.
        host_ns: u64,
        /// The site's display name.
        site: String,
    },
    /// A CUPTI flush of all buffers returned.
    Flushed {
        /// When, on the host clock.
        host_ns: u64,
        /// Incomplete records were flushed too (`gpuspan::flush()` at its deadline).
        forced: bool,
    },
    /// The window of a synchronous scope, just before its [`Frame::Ended`].
    Window {
        /// The scope's id.
        scope_id: u64,
        /// Its thread and CUPTI clock readings.
        window: Window,
    },
    /// A window of a selected span's entry on one thread (decision 71): no record of its own,
    /// the span's calls on that thread inside it; the span's [`Frame::Ended`] comes at its close.
    SpanWindow {
        /// The span's scope id.
        scope_id: u64,
        /// Buffers requested when the entry ended: its calls are in them.
        fence: u64,
        /// Its thread and CUPTI clock readings.
        window: Window,
    },
    /// Which threads had a window open, taken before the resolver drained its channel and
    /// written after what that drain took (as the resolver applies it).
    Threads(Snapshot),
    /// The calibration of CUPTI's clock the records after it were placed with
    /// (`host = cupti + offset_ns`, good to `error_ns`, taken at host instant `taken_ns`): written
    /// whenever it changes, so that a replay places records as the live run did.
    Clock {
        /// `host = cupti + offset_ns`.
        offset_ns: i64,
        /// The bound on that offset when it was taken.
        error_ns: u64,
        /// When it was taken, on the host clock.
        taken_ns: u64,
    },
    /// A free-form line from the capturing program (what it was doing).
    Note {
        /// When, on the host clock.
        host_ns: u64,
        /// The line.
        text: String,
    },
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

impl Frame {
    /// Appends the frame's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Requested { seq } => {
                out.push(b'R');
                put_u64(out, *seq);
            }
            Frame::Buffer { seq, host_ns, offsets, bytes } => {
                out.push(b'B');
                put_u64(out, *seq);
                put_u64(out, *host_ns);
                put_u64(out, offsets.len() as u64);
                for o in offsets {
                    out.extend_from_slice(&o.to_le_bytes());
                }
                put_bytes(out, bytes);
            }
            Frame::Name { ptr, name } => {
                out.push(b'N');
                put_u64(out, *ptr);
                put_bytes(out, name.as_bytes());
            }
            Frame::Ended { scope_id, fence, host_ns, site } => {
                out.push(b'E');
                put_u64(out, *scope_id);
                put_u64(out, *fence);
                put_u64(out, *host_ns);
                put_bytes(out, site.as_bytes());
            }
            Frame::Flushed { host_ns, forced } => {
                out.push(b'F');
                put_u64(out, *host_ns);
                out.push(u8::from(*forced));
            }
            Frame::Note { host_ns, text } => {
                out.push(b'T');
                put_u64(out, *host_ns);
                put_bytes(out, text.as_bytes());
            }
            Frame::Window { scope_id, window } => {
                out.push(b'W');
                put_u64(out, *scope_id);
                put_u64(out, window.thread.into());
                put_u64(out, window.start);
                put_u64(out, window.end);
            }
            Frame::SpanWindow { scope_id, fence, window } => {
                out.push(b'S');
                put_u64(out, *scope_id);
                put_u64(out, *fence);
                put_u64(out, window.thread.into());
                put_u64(out, window.start);
                put_u64(out, window.end);
            }
            Frame::Clock { offset_ns, error_ns, taken_ns } => {
                out.push(b'C');
                put_u64(out, *offset_ns as u64);
                put_u64(out, *error_ns);
                put_u64(out, *taken_ns);
            }
            Frame::Threads(s) => {
                out.push(b'O');
                put_u64(out, s.now);
                put_u64(out, s.open.len() as u64);
                for (thread, since) in &s.open {
                    put_u64(out, (*thread).into());
                    put_u64(out, *since);
                }
            }
        }
    }
}

/// A dump that cannot be read. Reading is replay's business (tests), writing the live one's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// The file does not start with [`MAGIC`].
    #[error("not a gpuspan CUPTI dump (it must start with {MAGIC:?}); write one with GPUSPAN_CUPTI_DUMP=<path>")]
    Magic,
    /// The file ends inside a frame, at this byte.
    #[error("the dump is cut off at byte {0}: the capturing program probably stopped while writing it")]
    Truncated(usize),
    /// A frame of a kind this gpuspan does not know.
    #[error("unknown frame tag {tag:#04x} at byte {at}: the dump comes from a newer gpuspan")]
    Tag {
        /// The frame's first byte.
        tag: u8,
        /// Where it is.
        at: usize,
    },
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DumpError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len()).ok_or(DumpError::Truncated(self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64, DumpError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn u8(&mut self) -> Result<u8, DumpError> {
        Ok(self.take(1)?[0])
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DumpError> {
        let n = self.u64()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

/// Reads every frame of a dump.
pub fn read(b: &[u8]) -> Result<Vec<Frame>, DumpError> {
    if !b.starts_with(MAGIC) {
        return Err(DumpError::Magic);
    }
    let mut r = Reader { b, at: MAGIC.len() };
    let mut frames = Vec::new();
    while r.at < b.len() {
        let at = r.at;
        let frame = match r.u8()? {
            b'R' => Frame::Requested { seq: r.u64()? },
            b'B' => {
                let seq = r.u64()?;
                let host_ns = r.u64()?;
                let n = r.u64()? as usize;
                let offsets = (0..n)
                    .map(|_| Ok(u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"))))
                    .collect::<Result<Vec<_>, DumpError>>()?;
                Frame::Buffer { seq, host_ns, offsets, bytes: r.bytes()? }
            }
            b'N' => Frame::Name { ptr: r.u64()?, name: String::from_utf8_lossy(&r.bytes()?).into_owned() },
            b'E' => Frame::Ended {
                scope_id: r.u64()?,
                fence: r.u64()?,
                host_ns: r.u64()?,
                site: String::from_utf8_lossy(&r.bytes()?).into_owned(),
            },
            b'F' => Frame::Flushed { host_ns: r.u64()?, forced: r.u8()? != 0 },
            b'T' => Frame::Note { host_ns: r.u64()?, text: String::from_utf8_lossy(&r.bytes()?).into_owned() },
            b'W' => Frame::Window {
                scope_id: r.u64()?,
                window: Window { thread: r.u64()? as u32, start: r.u64()?, end: r.u64()? },
            },
            b'S' => Frame::SpanWindow {
                scope_id: r.u64()?,
                fence: r.u64()?,
                window: Window { thread: r.u64()? as u32, start: r.u64()?, end: r.u64()? },
            },
            b'C' => Frame::Clock { offset_ns: r.u64()? as i64, error_ns: r.u64()?, taken_ns: r.u64()? },
            b'O' => {
                let now = r.u64()?;
                let n = r.u64()?;
                let open = (0..n).map(|_| Ok((r.u64()? as u32, r.u64()?))).collect::<Result<Vec<_>, DumpError>>()?;
                Frame::Threads(Snapshot { now, open })
            }
            tag => return Err(DumpError::Tag { tag, at }),
        };
        frames.push(frame);
    }
    Ok(frames)
}

/// The records of a buffer frame, each as the bytes from its offset to the next one.
pub fn records<'a>(offsets: &'a [u32], bytes: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    offsets.iter().enumerate().map(move |(i, &o)| {
        let end = offsets.get(i + 1).map_or(bytes.len(), |&n| n as usize);
        &bytes[(o as usize).min(bytes.len())..end.min(bytes.len())]
    })
}

impl Live {
    /// Appends a frame to the dump being written; a failed write stops the dump.
    pub(super) fn write(&mut self, f: Frame) {
        if let Some(w) = &mut self.dump {
            let mut b = Vec::new();
            f.encode(&mut b);
            if w.write_all(&b).is_err() {
                self.dump = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_round_trips() {
        let frames = vec![
            Frame::Requested { seq: 1 },
            Frame::Buffer { seq: 1, host_ns: 5, offsets: vec![0, 8], bytes: vec![1; 16] },
            Frame::Name { ptr: 0xdead, name: "_Z4spinv".into() },
            Frame::Ended { scope_id: 7, fence: 1, host_ns: 9, site: "spin".into() },
            Frame::Flushed { host_ns: 10, forced: true },
            Frame::Note { host_ns: 11, text: "hello".into() },
            Frame::Window { scope_id: 8, window: Window { thread: 42, start: 100, end: 200 } },
            Frame::SpanWindow { scope_id: 9, fence: 2, window: Window { thread: 42, start: 210, end: 220 } },
            Frame::Threads(Snapshot { now: 300, open: vec![(42, 250), (43, 260)] }),
            Frame::Clock { offset_ns: -700, error_ns: 25, taken_ns: 400 },
        ];
        let mut out = MAGIC.to_vec();
        frames.iter().for_each(|f| f.encode(&mut out));
        assert_eq!(read(&out).unwrap(), frames);
        assert!(matches!(read(&out[..out.len() - 1]), Err(DumpError::Truncated(_))));
    }
}
