//! Finding the programs that serve a live feed (`GPUSPAN_LIVE=1`) and asking them for
//! snapshots: what `gpuspan top` shows. The messages are `gpuspan_capture::live`'s.

use gpuspan_capture::live::{self as msg, Snapshot};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long one request may take, in all, before the program is taken as not answering (a
/// program stopped with Ctrl-Z, one that trickles its answer): a deadline on the whole answer,
/// not on each read.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// The longest answer line read, in bytes: a snapshot of thousands of sites is a few MiB; a
/// longer line is refused, so a feed that streams without end costs this much memory at most.
pub const MAX_LINE: usize = 16 << 20;

/// A program's live feed socket.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub pid: u32,
    pub path: PathBuf,
}

impl Endpoint {
    /// The program's name as the socket's file name has it (the snapshot has it in full).
    pub fn label(&self) -> String {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        name.strip_suffix(msg::SOCKET_SUFFIX)
            .and_then(|stem| stem.rsplit_once('-'))
            .map_or_else(|| name.clone(), |(program, _)| program.to_owned())
    }

    /// Whether the process the socket names still runs.
    pub fn alive(&self) -> bool {
        pid_alive(self.pid)
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether a process with this pid exists (it may be another user's: EPERM says it exists).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    unsafe { libc::kill(pid, 0) == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

/// Where programs put their sockets, as the runtime chooses it: `$XDG_RUNTIME_DIR/gpuspan` and
/// `gpuspan-<uid>` in the temporary directory (its fallback). Both are looked in: a program
/// started with another `XDG_RUNTIME_DIR` (or none) is found too.
pub fn default_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()).map(PathBuf::from) {
        if runtime.is_absolute() {
            dirs.push(runtime.join("gpuspan"));
        }
    }
    dirs.push(std::env::temp_dir().join(format!("gpuspan-{}", euid())));
    dirs
}

/// The live sockets in `dirs` that belong to this user and whose process still runs, by pid. A
/// socket whose process has ended (killed before it could remove it) is removed, when it is
/// this user's and nothing answers on it.
pub fn discover(dirs: &[PathBuf]) -> Vec<Endpoint> {
    let me = euid();
    let mut found = Vec::new();
    for dir in dirs {
        // Only a directory that is this user's: another user's could hold sockets that
        // pretend to be ours.
        let Ok(meta) = std::fs::symlink_metadata(dir) else { continue };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(msg::socket_pid) else { continue };
            let path = entry.path();
            let Ok(m) = std::fs::symlink_metadata(&path) else { continue };
            if !m.file_type().is_socket() || m.uid() != me {
                continue;
            }
            let endpoint = Endpoint { pid, path };
            if endpoint.alive() {
                found.push(endpoint);
            } else if UnixStream::connect(&endpoint.path).is_err() {
                let _ = std::fs::remove_file(&endpoint.path);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A snapshot of each endpoint, asked of all at once (each within [`TIMEOUT`]): in the order
/// given, the answer or why there is none.
pub fn snapshots(endpoints: &[Endpoint]) -> Vec<Result<(String, Snapshot), LiveError>> {
    std::thread::scope(|scope| {
        let asks: Vec<_> = endpoints
            .iter()
            .map(|e| scope.spawn(move || Connection::open(&e.path).and_then(|mut c| c.snapshot())))
            .collect();
        asks.into_iter()
            .zip(endpoints)
            .map(|(ask, e)| {
                ask.join().unwrap_or_else(|_| {
                    Err(LiveError::Protocol { path: e.path.display().to_string(), why: "reading it failed".into() })
                })
            })
            .collect()
    })
}

/// Picks from `found` what `target` names: a pid, or a socket's path (which need not be in a
/// searched directory, nor even be there: connecting says what is wrong with it).
pub fn resolve(target: &str, found: &[Endpoint]) -> Option<Endpoint> {
    if let Ok(pid) = target.parse::<u32>() {
        return found.iter().find(|e| e.pid == pid).cloned();
    }
    let path = PathBuf::from(target);
    let pid = path.file_name().and_then(|n| n.to_str()).and_then(msg::socket_pid)?;
    Some(Endpoint { pid, path })
}

/// Why a snapshot could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("could not connect to {path}: {source}")]
    Connect { path: String, source: io::Error },
    #[error("{path} did not answer: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path} closed the connection (a feed answers only its own user)")]
    Closed { path: String },
    #[error("{path} answered something that is not a snapshot: {why}")]
    Protocol { path: String, why: String },
    #[error("{path} did not finish its answer within {} s (stopped, or too slow)", TIMEOUT.as_secs_f64())]
    Deadline { path: String },
    #[error("{path} answered a line longer than {} MiB", MAX_LINE >> 20)]
    TooLong { path: String },
}

/// A connection to one program's feed.
#[derive(Debug)]
pub struct Connection {
    path: String,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Connection {
    /// Connects, with [`TIMEOUT`] on every read and write after.
    pub fn open(path: &Path) -> Result<Connection, LiveError> {
        let shown = path.display().to_string();
        let connect = |source| LiveError::Connect { path: shown.clone(), source };
        let stream = UnixStream::connect(path).map_err(connect)?;
        stream.set_read_timeout(Some(TIMEOUT)).map_err(connect)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(connect)?;
        let reader = BufReader::new(stream.try_clone().map_err(connect)?);
        Ok(Connection { path: shown, reader, writer: stream })
    }

    /// One line (its `\n` included; empty at the end of the stream), read by `deadline` and
    /// no longer than [`MAX_LINE`] (`FileTooLarge` past it, `TimedOut` past the deadline).
    fn read_line(&mut self, deadline: Instant) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.reader.get_ref().set_read_timeout(Some(left))?;
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(line);
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if line.len() + take > MAX_LINE {
                return Err(io::ErrorKind::FileTooLarge.into());
            }
            line.extend_from_slice(&buf[..take]);
            self.reader.consume(take);
            if done {
                return Ok(line);
            }
        }
    }

    /// Asks for a snapshot: the line as the program sent it, and what it says.
    pub fn snapshot(&mut self) -> Result<(String, Snapshot), LiveError> {
        // A feed that refuses a connection (another user's, one too many) closes it unread: the
        // client sees the end of the stream or a reset, whichever comes first.
        let path = self.path.clone();
        let io = |source: io::Error| match source.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => LiveError::Closed { path: path.clone() },
            _ => LiveError::Io { path: path.clone(), source },
        };
        let deadline = Instant::now() + TIMEOUT;
        self.writer.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
        writeln!(self.writer, "{}", msg::SNAPSHOT_REQUEST).map_err(io)?;
        let bytes = self.read_line(deadline).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => LiveError::Deadline { path: path.clone() },
            io::ErrorKind::FileTooLarge => LiveError::TooLong { path: path.clone() },
            _ => io(e),
        })?;
        if bytes.is_empty() {
            return Err(LiveError::Closed { path: path.clone() });
        }
        let line = String::from_utf8_lossy(&bytes).trim_end().to_owned();
        let protocol = |why: String| LiveError::Protocol { path: path.clone(), why };
        if let Ok(e) = serde_json::from_str::<msg::ErrorReply>(&line) {
            return Err(protocol(e.error));
        }
        let snapshot: Snapshot = serde_json::from_str(&line).map_err(|e| protocol(e.to_string()))?;
        if snapshot.protocol != msg::PROTOCOL {
            return Err(protocol(format!(
                "protocol {} (this gpuspan speaks {}); use the gpuspan command of the program's version",
                snapshot.protocol,
                msg::PROTOCOL
            )));
        }
        let mut snapshot = snapshot;
        escape_names(&mut snapshot);
        // Raw tabs and carriage returns can only be whitespace between JSON tokens (inside a
        // string they must be escaped): as spaces the line means the same and moves no cursor.
        Ok((line.replace(['\t', '\r'], " "), snapshot))
    }
}

/// Every name a program sent, as text shows it ([`crate::table::shown`]): the dashboard and the
/// text snapshot draw them on a terminal.
fn escape_names(s: &mut Snapshot) {
    let fix = |x: &mut String| {
        if let std::borrow::Cow::Owned(o) = crate::table::shown(x) {
            *x = o;
        }
    };
    fix(&mut s.program);
    fix(&mut s.writer);
    s.devices_note.iter_mut().for_each(fix);
    s.notes.iter_mut().for_each(fix);
    s.losses.iter_mut().for_each(|l| fix(&mut l.what));
    for site in &mut s.sites {
        for x in [&mut site.name, &mut site.function, &mut site.kind, &mut site.backend, &mut site.file] {
            fix(x);
        }
        site.direction.iter_mut().chain(site.host_reason.iter_mut()).for_each(fix);
        site.sources.iter_mut().for_each(fix);
    }
    for d in &mut s.devices {
        fix(&mut d.name);
        fix(&mut d.uuid);
        if let Some(reasons) = d.latest.as_mut().and_then(|l| l.throttle_reasons.as_mut()) {
            reasons.iter_mut().for_each(fix);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_pids_or_socket_paths() {
        let found = vec![
            Endpoint { pid: 10, path: "/run/gpuspan/a-10.live.sock".into() },
            Endpoint { pid: 11, path: "/run/gpuspan/my-app-11.live.sock".into() },
        ];
        assert_eq!(resolve("11", &found), Some(found[1].clone()));
        assert_eq!(resolve("12", &found), None);
        assert_eq!(found[1].label(), "my-app");
        assert_eq!(resolve("/elsewhere/x-3.live.sock", &found).map(|e| e.pid), Some(3));
        assert_eq!(resolve("/elsewhere/x.trace.json", &found), None);
    }

    #[test]
    fn this_process_is_alive_and_pid_zero_is_not_a_process() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
    }
}
