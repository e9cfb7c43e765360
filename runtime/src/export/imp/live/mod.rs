//! The live feed (opt-in: `GPUSPAN_LIVE=1` or `Config::live(true)`): a Unix socket in the
//! private directory on which `gpuspan top` asks for snapshots while the program runs.
//!
//! What it costs the program: nothing on the path of an annotated call. One thread,
//! `gpuspan-live`, owns the socket and every connection; once a second it reads the aggregates
//! the runtime keeps anyway (`SiteStats::totals`, as the summary does) into a short history per
//! site, from which a snapshot takes its window. Device readings come from whatever leaf
//! registered the `live_devices` hook (the monitor), never from here.
//!
//! What it never does: block. The socket and every connection are non-blocking and watched with
//! `poll`; an answer that cannot be written now waits in a bounded buffer, and a client that
//! leaves its answers unread (more than [`MAX_PENDING`] bytes, or none taken for [`STALL`]) is
//! disconnected. Writes use `MSG_NOSIGNAL`, so a client that hangs up cannot raise SIGPIPE in a
//! program that has not ignored it. A connection that holds a place without asking (no request
//! within [`HANDSHAKE`] of connecting, or none for [`IDLE`]) is closed and counted, so that
//! connections that never send cannot lock others out; an accept that fails for want of
//! descriptors (or memory) is counted and retried only after [`ACCEPT_BACKOFF`], not in a loop.
//!
//! Who may connect: the socket is created mode 0600 in a directory of mode 0700 that belongs to
//! the user (`export/file.rs` checks it), and every accepted connection's peer is asked for its
//! user id (`SO_PEERCRED`, `getpeereid` elsewhere): another user's connection is closed unread.
//! Nothing listens on a network interface.
//!
//! Memory is bounded: per site at most `WINDOW / TICK + 1` points, each a handful of counters
//! and the non-empty buckets of its histogram; at most [`MAX_CLIENTS`] connections, each with at
//! most [`MAX_REQUEST`] bytes of request and [`MAX_PENDING`] bytes of answer. docs/live.md has
//! the protocol and docs/decisions.md the decisions.

mod client;
mod window;
mod windows;

use client::{peer_uid, Client, Close};
use gpuspan_capture::live::{self as msg, CAPTURE_REQUEST, SNAPSHOT_REQUEST};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use window::WindowSink;
use windows::Windows;

/// How often the aggregates are read into the history.
const TICK: Duration = Duration::from_secs(1);
/// The window a snapshot's rates and quantiles cover, once the program is that old.
const WINDOW: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed at once (and counted).
const MAX_CLIENTS: usize = 16;
/// Unsent answer bytes a connection may hold; one more answer and it is closed.
pub(crate) const MAX_PENDING: usize = 1 << 20;
/// How long an unsent answer may wait without a byte of it being taken.
pub(crate) const STALL: Duration = Duration::from_secs(2);
/// A new connection sends its first request within this long, or is closed.
pub(crate) const HANDSHAKE: Duration = Duration::from_secs(2);
/// A connection that has asked is closed after this long without another request
/// (`gpuspan top` asks every second by default).
pub(crate) const IDLE: Duration = Duration::from_secs(120);
/// How long the listener rests after an accept failed (out of descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// A snapshot answers every request within this long of it (requests in a burst share one).
const REUSE: Duration = Duration::from_millis(200);
/// How often the feed's thread moves a capture window's records to its client.
const WINDOW_POLL: Duration = Duration::from_millis(50);
/// How long shutdown waits for the feed's thread to finish its round.
const STOP_WAIT: Duration = Duration::from_secs(1);
/// A Unix socket's path holds at most this many bytes (108 with its NUL on Linux, 104 on macOS).
const MAX_PATH: usize = 103;

/// Whether a live feed runs: one per collector (the process's), a second `init` with the feed
/// on is told so, once.
fn running() -> &'static AtomicBool {
    &crate::collector::collector().live_feed
}

/// Why the feed did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LiveError {
    #[error("the live feed already runs in this process (one per process); this init does not start another")]
    AlreadyRunning,
    #[error(
        "no live feed: the socket path {0} would be longer than a Unix socket allows; set XDG_RUNTIME_DIR to a shorter directory"
    )]
    PathTooLong(String),
    #[error("no live feed: {path} {why}")]
    Refused { path: String, why: String },
    #[error("no live feed: could not create the socket {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// The running feed: dropping or [`Live::stop`]ping it ends the thread and removes the socket.
#[derive(Debug)]
pub(crate) struct Live {
    path: PathBuf,
    /// The socket file's (device, inode): only that file is removed at the end.
    ident: (u64, u64),
    stop: Arc<AtomicBool>,
    /// One byte written here wakes the thread's `poll`.
    wake: UnixStream,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Live {
    /// Creates `<program>-<pid>.live.sock` in `dir` (the private directory) and starts the
    /// feed's thread. Returns at once.
    pub(crate) fn start(dir: &Path) -> Result<Live, LiveError> {
        if running().swap(true, Ordering::AcqRel) {
            return Err(LiveError::AlreadyRunning);
        }
        let started = Self::start_inner(dir);
        if started.is_err() {
            running().store(false, Ordering::Release);
        }
        started
    }

    fn start_inner(dir: &Path) -> Result<Live, LiveError> {
        let program = crate::export::capture_file::program_name();
        let pid = std::process::id();
        let fixed = dir.as_os_str().len() + 1 + msg::socket_name("", pid, 0).len() - "program".len();
        let room = MAX_PATH.saturating_sub(fixed);
        let shown = || dir.join(msg::socket_name(&program, pid, 64)).display().to_string();
        if room == 0 {
            return Err(LiveError::PathTooLong(shown()));
        }
        let path = dir.join(msg::socket_name(&program, pid, room));
        let text = path.display().to_string();
        let io_err = |source| LiveError::Io { path: text.clone(), source };
        // A socket at our name was left by an earlier process with our pid, which has ended:
        // replace it. Anything else there (a link, a file) is not ours to remove.
        match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
            Ok(m) if m.file_type().is_socket() => fs::remove_file(&path).map_err(io_err)?,
            Ok(_) => {
                return Err(LiveError::Refused {
                    path: text,
                    why: "exists and is not a socket; gpuspan leaves it alone".into(),
                })
            }
        }
        // The directory is 0700 and ours (checked by `private_dir`), so nobody else can reach the
        // socket in the moment between bind (mode from the umask) and the chmod to 0600.
        let listener = UnixListener::bind(&path).map_err(io_err)?;
        let prepared = fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
            .and_then(|()| listener.set_nonblocking(true))
            .and_then(|()| fs::symlink_metadata(&path));
        let meta = match prepared {
            Ok(m) => m,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(io_err(e));
            }
        };
        let (wake, wake_rx) = UnixStream::pair().map_err(io_err)?;
        wake_rx.set_nonblocking(true).map_err(io_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = mpsc::channel();
        let server = Server::new(listener, wake_rx, stop.clone(), program, pid);
        let thread = std::thread::Builder::new().name("gpuspan-live".into()).spawn(move || {
            server.run();
            let _ = done_tx.send(());
        });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(io_err(e));
            }
        };
        Ok(Live { path, ident: (meta.dev(), meta.ino()), stop, wake, done, thread: Some(thread) })
    }

    /// Where the socket is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Ends the thread (waiting at most a second for its round) and removes the socket.
    pub(crate) fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::Release);
        let _ = (&self.wake).write(&[1]);
        match self.done.recv_timeout(STOP_WAIT) {
            // Finished (or died): joining returns at once.
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = thread.join();
            }
            // Still in a round: it ends by itself after it, touching nothing of the program's.
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        // Only the socket this feed made: not a file someone put at the name since.
        if fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.ident) {
            let _ = fs::remove_file(&self.path);
        }
        running().store(false, Ordering::Release);
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.end();
    }
}

/// The feed's thread: the listener, the connections and the history, owned by one loop.
#[derive(Debug)]
struct Server {
    listener: UnixListener,
    wake: UnixStream,
    stop: Arc<AtomicBool>,
    program: String,
    pid: u32,
    uid: u32,
    started_ns: u64,
    windows: Windows,
    clients: Vec<Client>,
    feed: msg::Feed,
    /// The last snapshot and when it was made (shared by a burst of requests).
    cached: Option<(Instant, msg::Snapshot)>,
    /// Accepting rests until then, after a failed accept.
    accept_after: Option<Instant>,
    /// The capture window open now (one at a time), its client the one `capturing`.
    window: Option<OpenWindow>,
}

/// A capture window and where it stands.
#[derive(Debug)]
struct OpenWindow {
    sink: Arc<WindowSink>,
    start_ns: u64,
    end_ns: u64,
    ends: Instant,
    /// Out of the pipeline, its end queued: what is left is to hand the client its last bytes.
    closed: bool,
}

impl OpenWindow {
    /// Takes the sink out of the pipeline (trace-all ends with it) and queues the end.
    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let sink: Arc<dyn crate::pipeline::Sink> = self.sink.clone();
        crate::collector::remove_sink(&sink);
        crate::spans::unwant();
        self.sink.close(crate::clock::now_ns());
    }
}

impl Server {
    fn new(listener: UnixListener, wake: UnixStream, stop: Arc<AtomicBool>, program: String, pid: u32) -> Server {
        Server {
            listener,
            wake,
            stop,
            program,
            pid,
            // SAFETY: geteuid has no preconditions and cannot fail.
            uid: unsafe { libc::geteuid() },
            started_ns: crate::clock::now_ns(),
            windows: Windows::new(crate::sites::all_sites()),
            clients: Vec::new(),
            feed: msg::Feed::default(),
            cached: None,
            accept_after: None,
            window: None,
        }
    }

    fn run(mut self) {
        self.windows.add_run_time_sites();
        self.windows.sample(self.started_ns);
        let mut next_tick = Instant::now() + TICK;
        while !self.stop.load(Ordering::Acquire) {
            let mut fds: Vec<libc::pollfd> = Vec::with_capacity(2 + self.clients.len());
            let watch = |fd, events| libc::pollfd { fd, events, revents: 0 };
            // A negative descriptor is skipped by poll: the listener while accepting rests.
            let resting = self.accept_after.is_some_and(|t| Instant::now() < t);
            let listener = if resting { -1 } else { self.listener.as_raw_fd() };
            fds.push(watch(listener, libc::POLLIN));
            fds.push(watch(self.wake.as_raw_fd(), libc::POLLIN));
            for c in &self.clients {
                let out = if c.pending() > 0 { libc::POLLOUT } else { 0 };
                fds.push(watch(c.stream.as_raw_fd(), libc::POLLIN | out));
            }
            let mut wake_at = self.accept_after.filter(|_| resting).map_or(next_tick, |t| t.min(next_tick));
            if self.window.is_some() {
                wake_at = wake_at.min(Instant::now() + WINDOW_POLL);
            }
            let wait = wake_at.saturating_duration_since(Instant::now());
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait.as_millis() as libc::c_int) };
            if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                crate::diagnostics::note_once(format_args!(
                    "the live feed stopped: poll failed ({})",
                    io::Error::last_os_error()
                ));
                break;
            }
            let now = Instant::now();
            if now >= next_tick {
                // A selected span's site appears with its first span (`span_scopes.rs`).
                self.windows.add_run_time_sites();
                self.windows.sample(crate::clock::now_ns());
                next_tick = (next_tick + TICK).max(now);
            }
            if n > 0 {
                if fds[1].revents != 0 {
                    let mut sink = [0u8; 64];
                    while matches!((&self.wake).read(&mut sink), Ok(k) if k > 0) {}
                }
                self.serve(&fds[2..]);
                if fds[0].revents != 0 {
                    self.accept();
                }
            }
            let before = self.clients.len();
            self.clients.retain(|c| !c.stalled(now));
            self.feed.dropped_stalled += (before - self.clients.len()) as u64;
            self.drop_idle(now);
            self.pump(now);
            self.clients.retain(|c| !c.done());
        }
        // Stopping (the program ends): the window's end goes out as far as the client takes it
        // now, and trace-all ends with the feed.
        if let Some(mut w) = self.window.take() {
            w.close();
            if let Some(c) = self.clients.iter_mut().find(|c| c.capturing && !c.finished) {
                c.queue_bytes(|room, out| w.sink.take(room, out));
                let _ = c.write();
            }
        }
    }

    /// Moves the capture window's records to its client, ends the window when its time is up,
    /// and abandons it when its client is gone (closed, stalled or dropped).
    fn pump(&mut self, now: Instant) {
        let Some(w) = &mut self.window else { return };
        // The window's client (one whose window ended may still be writing its last bytes).
        let Some(i) = self.clients.iter().position(|c| c.capturing && !c.finished) else {
            w.close();
            self.window = None;
            self.feed.captures_abandoned += 1;
            return;
        };
        if now >= w.ends {
            w.close();
        }
        let client = &mut self.clients[i];
        client.queue_bytes(|room, out| w.sink.take(room, out));
        if w.closed && w.sink.queued() == 0 {
            client.finished = true;
            self.window = None;
        }
        if client.pending() > 0 && client.write().is_err() {
            self.clients.remove(i);
            if let Some(mut w) = self.window.take() {
                w.close();
                self.feed.captures_abandoned += 1;
            }
        }
    }

    /// Closes the connections that hold a place without asking.
    fn drop_idle(&mut self, now: Instant) {
        let before = self.clients.len();
        self.clients.retain(|c| !c.idle(now));
        self.feed.dropped_idle += (before - self.clients.len()) as u64;
    }

    /// Reads requests and writes answers on the connections `poll` flagged (in the order of
    /// `self.clients` when `fds` was made).
    fn serve(&mut self, fds: &[libc::pollfd]) {
        let mut closed = vec![None; self.clients.len()];
        for (i, fd) in fds.iter().enumerate() {
            if fd.revents == 0 || i >= self.clients.len() {
                continue;
            }
            let mut result = Ok(());
            if fd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                result = self.clients[i].read().and_then(|lines| {
                    for line in lines.iter().filter(|l| !l.is_empty()) {
                        // Once the connection carries a capture, what the client says is ignored.
                        if self.clients[i].capturing {
                            break;
                        }
                        let answer = match msg::parse_capture(line) {
                            Some(seconds) => self.open_window(i, seconds),
                            None => self.answer(line),
                        };
                        self.clients[i].queue(&answer)?;
                    }
                    Ok(())
                });
            }
            if result.is_ok() && self.clients[i].pending() > 0 {
                result = self.clients[i].write();
            }
            if let Err(why) = result {
                closed[i] = Some(why);
            }
        }
        let mut i = 0;
        self.clients.retain(|_| {
            let why = closed.get(i).copied().flatten();
            i += 1;
            match why {
                None => true,
                Some(Close::Stalled) => {
                    self.feed.dropped_stalled += 1;
                    false
                }
                Some(Close::Malformed) => {
                    self.feed.dropped_malformed += 1;
                    false
                }
                Some(Close::Gone) => false,
            }
        });
    }

    /// Takes every waiting connection: another user's is closed unread, and so is one over
    /// [`MAX_CLIENTS`] (once the idle ones are closed). An accept that fails for another reason
    /// than none waiting (out of descriptors) is counted, and accepting rests a while.
    fn accept(&mut self) {
        self.accept_after = None;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if !peer_uid(&stream).is_ok_and(|uid| uid == self.uid) {
                        self.feed.refused_other_user += 1;
                        continue;
                    }
                    if self.clients.len() >= MAX_CLIENTS {
                        self.drop_idle(Instant::now());
                    }
                    if self.clients.len() >= MAX_CLIENTS || stream.set_nonblocking(true).is_err() {
                        self.feed.refused_busy += 1;
                        continue;
                    }
                    self.feed.accepted += 1;
                    self.clients.push(Client::new(stream));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // Out of descriptors or memory: the connection stays queued, and `poll` would
                // say it is there at once, again and again; rest instead.
                Err(_) => {
                    self.feed.accept_failed += 1;
                    self.accept_after = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    /// Opens a capture window for client `i` (`capture <seconds>`): the answer is the
    /// [`msg::CaptureStart`] line, after which the connection carries the capture; or an error,
    /// with the connection still a snapshot one.
    fn open_window(&mut self, i: usize, seconds: Result<f64, String>) -> Arc<Vec<u8>> {
        let error = |error: String| Arc::new(serde_json::to_vec(&msg::ErrorReply { error }).unwrap_or_default());
        let seconds = match seconds {
            Ok(s) => s,
            Err(why) => return error(why),
        };
        if let Some(w) = &self.window {
            self.feed.captures_refused += 1;
            let left = w.ends.saturating_duration_since(Instant::now()).as_secs_f64();
            return error(format!(
                "a capture window is already open in this program (one at a time; it ends in {left:.1} s): ask again after it"
            ));
        }
        let (sink, start_ns) = match WindowSink::open() {
            Ok(opened) => opened,
            Err(e) => return error(format!("the capture window could not start: {e}")),
        };
        let window = Duration::from_secs_f64(seconds);
        let start = msg::CaptureStart {
            capture: msg::CAPTURE_VERSION,
            program: self.program.clone(),
            pid: self.pid,
            start_ns,
            window_s: seconds,
        };
        crate::collector::add_sink(sink.clone());
        // The application spans each call was made in, for the report's cost per request.
        crate::spans::want();
        self.window = Some(OpenWindow {
            sink,
            start_ns,
            end_ns: start_ns.saturating_add(window.as_nanos() as u64),
            ends: Instant::now() + window,
            closed: false,
        });
        self.feed.captures += 1;
        self.clients[i].capturing = true;
        Arc::new(serde_json::to_vec(&start).unwrap_or_default())
    }

    /// The window open now, as the snapshot says it.
    fn capture_window(&self) -> Option<msg::CaptureWindow> {
        self.window.as_ref().map(|w| {
            let (records, dropped) = w.sink.counts();
            msg::CaptureWindow { start_ns: w.start_ns, end_ns: w.end_ns, records, dropped }
        })
    }

    /// The answer to one request line (without its newline).
    fn answer(&mut self, request: &str) -> Arc<Vec<u8>> {
        if request != SNAPSHOT_REQUEST {
            let reply = msg::ErrorReply {
                error: format!(
                    "unknown request {request:?}; this program answers {SNAPSHOT_REQUEST:?} and \"{CAPTURE_REQUEST} <seconds>\""
                ),
            };
            return Arc::new(serde_json::to_vec(&reply).unwrap_or_default());
        }
        let fresh = match self.cached.take() {
            Some((at, snapshot)) if at.elapsed() < REUSE => (at, snapshot),
            _ => (Instant::now(), self.snapshot()),
        };
        let (at, mut snapshot) = fresh;
        // The feed's own counts are always current (they cost nothing to read).
        snapshot.feed = msg::Feed { clients: self.clients.len() as u32, ..self.feed };
        snapshot.capture_window = self.capture_window();
        let line = Arc::new(serde_json::to_vec(&snapshot).unwrap_or_default());
        self.cached = Some((at, snapshot));
        line
    }

    fn snapshot(&self) -> msg::Snapshot {
        let now_ns = crate::clock::now_ns();
        let (sites, window_s) = self.windows.sites(now_ns, self.started_ns);
        let (devices, devices_note) = match crate::hooks::leaves().devices().map(|d| d.live_devices()) {
            None => (Vec::new(), Some("no device monitor runs in this program".to_owned())),
            Some(Err(why)) => (Vec::new(), Some(why)),
            Some(Ok(d)) if d.is_empty() => (d, Some("the device monitor has found no device (yet)".to_owned())),
            Some(Ok(d)) => (d, None),
        };
        msg::Snapshot {
            protocol: msg::PROTOCOL,
            program: self.program.clone(),
            pid: self.pid,
            writer: env!("CARGO_PKG_VERSION").to_owned(),
            time_ns: now_ns,
            started_ns: self.started_ns,
            window_s,
            off: !crate::switch::is_on(),
            sites,
            devices,
            devices_note,
            losses: crate::diagnostics::losses()
                .snapshot()
                .into_iter()
                .map(|(what, count)| msg::Loss { what: what.to_owned(), count })
                .collect(),
            notes: crate::diagnostics::notes(),
            feed: msg::Feed { clients: self.clients.len() as u32, ..self.feed },
            capture: Some(msg::CAPTURE_VERSION),
            capture_window: self.capture_window(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspan_capture::live::MAX_REQUEST;
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::DirBuilderExt;

    fn connect(path: &Path) -> (BufReader<UnixStream>, UnixStream) {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (BufReader::new(s.try_clone().unwrap()), s)
    }

    fn ask(r: &mut BufReader<UnixStream>, w: &mut UnixStream, request: &str) -> String {
        writeln!(w, "{request}").unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        line
    }

    /// One test for the socket's whole life: the feed is one per process.
    #[test]
    fn the_socket_serves_snapshots_to_its_user_only_and_drops_who_stops_reading() {
        let dir = std::env::temp_dir().join(format!("gpuspan-live-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        let live = Live::start(&dir).unwrap();
        assert!(matches!(Live::start(&dir), Err(LiveError::AlreadyRunning)));
        let path = live.path().to_owned();
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert!(path.file_name().unwrap().to_str().unwrap().ends_with(&format!("-{}.live.sock", std::process::id())));

        let (mut r, mut w) = connect(&path);
        let snap: msg::Snapshot = serde_json::from_str(&ask(&mut r, &mut w, "snapshot")).unwrap();
        assert_eq!((snap.protocol, snap.pid), (msg::PROTOCOL, std::process::id()));
        let err: msg::ErrorReply = serde_json::from_str(&ask(&mut r, &mut w, "bogus")).unwrap();
        assert!(err.error.contains("snapshot"), "{}", err.error);

        // A client that asks and never reads: closed once its answers pile up, while the first
        // one is still served.
        let stalled = UnixStream::connect(&path).unwrap();
        stalled.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut asked = 0;
        while asked < 100_000 && (&stalled).write_all(b"snapshot\n").is_ok() {
            asked += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let dropped = loop {
            let snap: msg::Snapshot = serde_json::from_str(&ask(&mut r, &mut w, "snapshot")).unwrap();
            if snap.feed.dropped_stalled >= 1 || Instant::now() > deadline {
                break snap.feed;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(dropped.dropped_stalled, 1, "{dropped:?} after {asked} requests");

        // A request line longer than allowed closes the connection.
        let (mut r2, mut w2) = connect(&path);
        w2.write_all(&vec![b'x'; MAX_REQUEST + 10]).unwrap();
        let mut line = String::new();
        assert_eq!(r2.read_line(&mut line).unwrap_or(0), 0, "closed: {line:?}");

        live.stop();
        assert!(!path.exists(), "the socket is removed at the end");
        assert!(UnixStream::connect(&path).is_err());
        let _ = fs::remove_dir_all(&dir);
    }
}
