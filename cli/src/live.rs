//! Finding the programs that serve a live feed (`GPUSPAN_LIVE=1`) and asking them for
//! snapshots (what `gpuspan top` shows) or for a capture window (`gpuspan capture`). The
//! messages are `gpuspan_capture::live`'s.

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

/// A capture window taken from a running program: what `gpuspan capture` says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured {
    pub program: String,
    pub pid: u32,
    pub window_s: f64,
    /// Records in the file.
    pub records: u64,
    /// Records the program dropped because this client did not take them in time.
    pub dropped: u64,
}

/// Why a capture window was not written whole.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error("could not write {path}: {source}")]
    Output { path: String, source: io::Error },
    #[error("{path} refused the capture: {why}")]
    Refused { path: String, why: String },
    #[error("{path} ended the capture early (the program ended?): {file} holds {records} records, readable but without the window's end")]
    Incomplete { path: String, file: String, records: u64 },
}

/// How long past its window a capture may take to arrive whole (the program queues the end when
/// the window closes, then the client reads what is left).
const CAPTURE_MARGIN: Duration = Duration::from_secs(15);

/// Opens a capture window of `seconds` in the program at `socket` and writes what it streams
/// into `out`, a capture file as the program writes one. The file is created before asking, so
/// that a path that cannot be written opens no window.
pub fn capture(socket: &Path, seconds: f64, out: &Path) -> Result<Captured, CaptureError> {
    let shown = socket.display().to_string();
    let output = |source| CaptureError::Output { path: out.display().to_string(), source };
    let existed = std::fs::symlink_metadata(out).is_ok();
    let file = std::fs::File::create(out).map_err(output)?;
    let (mut reader, start) = match open_window(socket, seconds) {
        Ok(opened) => opened,
        Err(e) => {
            // No window: the file this made, still empty, goes again (one that was there stays).
            if !existed {
                let _ = std::fs::remove_file(out);
            }
            return Err(e);
        }
    };
    // The bytes are the capture file's: copied as they come (the BufReader may hold the first).
    let mut w = io::BufWriter::new(file);
    let copied = io::copy(&mut reader, &mut w);
    w.flush().map_err(output)?;
    drop(w);
    if let Err(source) = copied {
        if source.kind() != io::ErrorKind::ConnectionReset {
            return Err(LiveError::Io { path: shown, source }.into());
        }
    }
    let (records, dropped, ended) = read_back(out).map_err(output)?;
    if !ended {
        return Err(CaptureError::Incomplete { path: shown, file: out.display().to_string(), records });
    }
    Ok(Captured { program: start.program, pid: start.pid, window_s: start.window_s, records, dropped })
}

/// Asks for the window: the connection, positioned at the capture's first byte, and the
/// program's [`msg::CaptureStart`].
fn open_window(socket: &Path, seconds: f64) -> Result<(BufReader<UnixStream>, msg::CaptureStart), CaptureError> {
    let shown = socket.display().to_string();
    let connect = |source| LiveError::Connect { path: shown.clone(), source };
    let stream = UnixStream::connect(socket).map_err(connect)?;
    // Nothing may come for the whole window (a program that makes no call in it).
    stream.set_read_timeout(Some(Duration::from_secs_f64(seconds) + CAPTURE_MARGIN)).map_err(connect)?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(connect)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(connect)?);
    let io_err = |source: io::Error| match source.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => LiveError::Closed { path: shown.clone() },
        _ => LiveError::Io { path: shown.clone(), source },
    };
    writeln!(&stream, "{} {seconds}", msg::CAPTURE_REQUEST).map_err(io_err)?;
    let mut line = String::new();
    if reader.read_line(&mut line).map_err(io_err)? == 0 {
        return Err(LiveError::Closed { path: shown }.into());
    }
    if let Ok(e) = serde_json::from_str::<msg::ErrorReply>(line.trim_end()) {
        let why = if e.error.starts_with("unknown request") {
            "its gpuspan predates on-demand capture (it answers only snapshots); rebuild it with this gpuspan's version"
                .to_owned()
        } else {
            e.error
        };
        return Err(CaptureError::Refused { path: shown, why });
    }
    let start: msg::CaptureStart = serde_json::from_str(line.trim_end())
        .map_err(|e| LiveError::Protocol { path: shown.clone(), why: e.to_string() })?;
    Ok((reader, start))
}

/// The records in a capture file, those its end says were dropped by the window, and whether
/// it ends (read frame by frame: memory bounded).
fn read_back(path: &Path) -> io::Result<(u64, u64, bool)> {
    let file = BufReader::new(std::fs::File::open(path)?);
    let mut reader = gpuspan_capture::Reader::new(file).map_err(io::Error::other)?;
    let (mut records, mut dropped, mut ended) = (0, 0, false);
    while let Ok(Some(frame)) = reader.next_frame() {
        match frame {
            gpuspan_capture::Frame::Record(_) => records += 1,
            gpuspan_capture::Frame::End(e) => {
                ended = true;
                dropped = e.losses.iter().filter(|l| l.what.contains("capture window")).map(|l| l.count).sum();
            }
            _ => {}
        }
    }
    Ok((records, dropped, ended))
}

/// Reads a duration as `gpuspan capture --for` takes it: `30s`, `2.5s`, `500ms`, `2m`, or a
/// bare number of seconds.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale > 0.0 && v * scale <= msg::MAX_CAPTURE_S => Ok(v * scale),
        _ => Err(format!("{s:?} is not a duration like 30s, 500ms or 2m (above 0, at most a day)")),
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

    /// A program that answers one connection with `reply` (then closes it), as a fake feed.
    fn fake_feed(tag: &str, reply: Vec<u8>) -> (PathBuf, std::thread::JoinHandle<String>) {
        let dir = std::env::temp_dir().join(format!("gpuspan-cli-fake-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("fake-1.live.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let served = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut request = String::new();
            BufReader::new(&s).read_line(&mut request).unwrap();
            (&s).write_all(&reply).unwrap();
            request
        });
        (dir, served)
    }

    #[test]
    fn a_program_older_than_capture_is_told_apart_and_leaves_no_file() {
        let reply =
            b"{\"error\":\"unknown request \\\"capture 1.5\\\"; this program answers \\\"snapshot\\\"\"}\n".to_vec();
        let (dir, served) = fake_feed("old", reply);
        let out = dir.join("out.gpuspan");
        let err = capture(&dir.join("fake-1.live.sock"), 1.5, &out).unwrap_err();
        assert_eq!(served.join().unwrap(), "capture 1.5\n");
        assert!(err.to_string().contains("predates on-demand capture"), "{err}");
        assert!(!out.exists(), "no window, no file");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stream_cut_before_its_end_is_an_error_with_the_records_kept() {
        use gpuspan_capture::{Frame, Header, Interval, Record, Writer};
        let mut bytes = serde_json::to_vec(&msg::CaptureStart { capture: 1, pid: 1, ..Default::default() }).unwrap();
        bytes.push(b'\n');
        let mut w = Writer::new(Vec::new(), &Header::new("fake", 1)).unwrap();
        let record = Record {
            site: 0,
            scope_id: 1,
            thread: 0,
            host: Interval::new(1, 2),
            error: false,
            bytes: None,
            gpu: None,
            clock_corrected_ns: 0,
            activities: Vec::new(),
            memory: None,
            span: None,
            attributed: None,
            spans_at_launch: None,
        };
        w.write(&Frame::Record(record)).unwrap();
        bytes.extend(w.into_inner());
        let (dir, served) = fake_feed("cut", bytes);
        let out = dir.join("out.gpuspan");
        let err = capture(&dir.join("fake-1.live.sock"), 1.0, &out).unwrap_err();
        served.join().unwrap();
        assert!(matches!(err, CaptureError::Incomplete { records: 1, .. }), "{err}");
        assert_eq!(gpuspan_capture::Capture::open(&out).unwrap().records.len(), 1, "what came is readable");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_seconds("30s"), Ok(30.0));
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert_eq!(parse_seconds("500ms"), Ok(0.5));
        assert_eq!(parse_seconds("2m"), Ok(120.0));
        for bad in ["0s", "-1s", "abc", "2d", "25h"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn this_process_is_alive_and_pid_zero_is_not_a_process() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
    }
}
