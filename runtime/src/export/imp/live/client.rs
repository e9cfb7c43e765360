//! One connection of the live feed: its request bytes, its unwritten answers, and the peer's
//! user id.

use super::{HANDSHAKE, IDLE, MAX_PENDING, STALL};
use gpuspan_capture::live::MAX_REQUEST;
use std::io::{self, Read};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Why a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Close {
    /// The client hung up or the connection failed.
    Gone,
    /// Its answers went unread.
    Stalled,
    /// A request too long or not text.
    Malformed,
}

/// One connection.
#[derive(Debug)]
pub(super) struct Client {
    pub(super) stream: UnixStream,
    /// Bytes of a request line not yet complete.
    request: Vec<u8>,
    /// Answers not yet written, from `sent` on.
    out: Vec<u8>,
    sent: usize,
    /// When the client last took a byte of its answers (or when one began to wait).
    progress: Instant,
    /// When the client last sent a whole request (or connected).
    asked_at: Instant,
    /// Whether it has sent one.
    asked: bool,
    /// Its connection carries a capture window's bytes (requests after it are ignored).
    pub(super) capturing: bool,
    /// Its window's last bytes are queued: the connection ends once they are written.
    pub(super) finished: bool,
}

impl Client {
    pub(super) fn new(stream: UnixStream) -> Client {
        let now = Instant::now();
        Client {
            stream,
            request: Vec::new(),
            out: Vec::new(),
            sent: 0,
            progress: now,
            asked_at: now,
            asked: false,
            capturing: false,
            finished: false,
        }
    }

    pub(super) fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Reads what the client sent (at most 64 KiB per round, so one client cannot hold the
    /// thread) and returns its complete request lines.
    pub(super) fn read(&mut self) -> Result<Vec<String>, Close> {
        let mut lines = Vec::new();
        let mut buf = [0u8; 4096];
        for _ in 0..16 {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(Close::Gone),
                Ok(n) => self.request.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(Close::Gone),
            }
            while let Some(end) = self.request.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.request.drain(..=end).collect();
                let text = std::str::from_utf8(&line).map_err(|_| Close::Malformed)?;
                lines.push(text.trim().to_owned());
                self.asked_at = Instant::now();
                self.asked = true;
            }
            if self.request.len() > MAX_REQUEST {
                return Err(Close::Malformed);
            }
        }
        Ok(lines)
    }

    /// Queues an answer; a client that would then hold more than [`MAX_PENDING`] unsent bytes
    /// is not reading them.
    pub(super) fn queue(&mut self, answer: &[u8]) -> Result<(), Close> {
        if self.pending() + answer.len() + 1 > MAX_PENDING {
            return Err(Close::Stalled);
        }
        if self.pending() == 0 {
            self.out.clear();
            self.sent = 0;
            self.progress = Instant::now();
        }
        self.out.extend_from_slice(answer);
        self.out.push(b'\n');
        Ok(())
    }

    /// How many more bytes [`Client::queue_bytes`] may take now.
    pub(super) fn room(&self) -> usize {
        MAX_PENDING.saturating_sub(self.pending())
    }

    /// Queues raw bytes (a capture window's), at most [`Client::room`] of them.
    pub(super) fn queue_bytes(&mut self, take: impl FnOnce(usize, &mut Vec<u8>)) {
        if self.pending() == 0 {
            self.out.clear();
            self.sent = 0;
            self.progress = Instant::now();
        } else if self.sent > 0 {
            // A stream never drains to empty: keep only what is unsent.
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        let room = self.room();
        take(room, &mut self.out);
    }

    /// Whether its window's bytes are all written: the connection is done.
    pub(super) fn done(&self) -> bool {
        self.finished && self.pending() == 0
    }

    /// Writes what the socket takes now, never waiting.
    pub(super) fn write(&mut self) -> Result<(), Close> {
        while self.sent < self.out.len() {
            let rest = &self.out[self.sent..];
            // SAFETY: `rest` is valid for `rest.len()` bytes; the fd is this client's socket.
            let n = unsafe {
                libc::send(
                    self.stream.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                self.sent += n as usize;
                self.progress = Instant::now();
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => break,
                io::ErrorKind::Interrupted => continue,
                _ => return Err(Close::Gone),
            }
        }
        if self.pending() == 0 {
            self.out.clear();
            self.sent = 0;
        }
        Ok(())
    }

    pub(super) fn stalled(&self, now: Instant) -> bool {
        self.pending() > 0 && now.duration_since(self.progress) > STALL
    }

    /// Holds a place without asking: no request within [`HANDSHAKE`] of connecting, or none
    /// for [`IDLE`] since the last one (with nothing left to send it). A capture's client never is.
    pub(super) fn idle(&self, now: Instant) -> bool {
        // A capture's client asks once and then reads for the whole window.
        if self.capturing {
            return false;
        }
        let allowed = if self.asked { IDLE } else { HANDSHAKE };
        self.pending() == 0 && now.duration_since(self.asked_at) > allowed
    }
}

/// The user id of a connection's peer.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    // SAFETY: `ucred` is plain data; getsockopt writes at most `len` bytes into it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(cred.uid)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The user id of a connection's peer.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: getpeereid writes the two ids of the connected peer.
    if unsafe { libc::getpeereid(stream.as_raw_fd(), &mut uid, &mut gid) } == 0 {
        Ok(uid)
    } else {
        Err(io::Error::last_os_error())
    }
}
