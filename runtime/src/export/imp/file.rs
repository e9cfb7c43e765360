//! How gpuspan writes a file, whatever is at the path: never through a symbolic link (a link
//! planted at a predictable path must not make gpuspan overwrite its target), never blocking on
//! a FIFO or a device (the program's exit must not hang on a pipe nobody reads), never half a
//! file where a reader can see it (written under a temporary name in the same directory, then
//! renamed), and by default in a directory only this user can enter.
//!
//! docs/decisions.md, decision 17, says why each rule is there.

use os::{is_loop, kind, lock_exclusive, safe_open, size_limit, uid};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// What is written through is buffered in this much memory, never more.
const BUFFER: usize = 64 * 1024;

fn refused(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{} {why}", path.display()))
}

/// Whether gpuspan may put a file at `path`: nothing is there, or a regular file is (it gets
/// replaced). Looks without opening, so that nothing at the path (a FIFO, a device) is woken.
fn check_target(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.file_type().is_symlink() => {
            Err(refused(path, "is a symbolic link; gpuspan does not write through links (name the target itself)"))
        }
        Ok(m) if !m.is_file() => {
            Err(refused(path, format_args!("is {}; gpuspan writes only regular files", kind(m.file_type()))))
        }
        Ok(_) => Ok(()),
    }
}

/// Refuses an opened file that is not a regular file (the open raced with someone replacing
/// the path).
fn regular(file: File, path: &Path) -> io::Result<File> {
    let t = file.metadata()?.file_type();
    if t.is_file() {
        Ok(file)
    } else {
        Err(refused(path, format_args!("is {}; gpuspan writes only regular files", kind(t))))
    }
}

/// Opens (creating if missing, never truncating) the regular file at `path`: never through a
/// link, never blocking.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    check_target(path)?;
    let file = safe_open(OpenOptions::new().write(true).create(true)).open(path).map_err(|e| {
        if is_loop(&e) {
            refused(path, "is a symbolic link; gpuspan does not write through links (name the target itself)")
        } else {
            e
        }
    })?;
    regular(file, path)
}

/// Opens `path` for a file one process writes as it goes (the capture), emptied once this
/// process holds it alone: an exclusive advisory lock (`flock`) is taken on it before anything
/// is written, and held until the file is closed (the process's end, a kill included). Where
/// another process holds it (every rank of a job launched with one `GPUSPAN_CAPTURE`), this
/// process writes beside it instead, under the same name with its pid before the extension
/// (`run.gpuspan` → `run.<pid>.gpuspan`), so that no run damages or replaces another. Returns
/// the file and the path it is at. Where locks are not supported (not Unix, or a file system
/// that refuses them) the path is written as given.
pub(crate) fn create_exclusive(path: &Path) -> io::Result<(File, PathBuf)> {
    let file = open_regular(path)?;
    if lock_exclusive(&file)? {
        file.set_len(0)?;
        return Ok((file, path.to_owned()));
    }
    let beside = with_pid(path);
    let file = open_regular(&beside)?;
    if !lock_exclusive(&file)? {
        return Err(refused(&beside, "is being written by another process"));
    }
    file.set_len(0)?;
    crate::diagnostics::note_once(format_args!(
        "{} is being written by another process: this one's capture goes to {}",
        path.display(),
        beside.display()
    ));
    Ok((file, beside))
}

/// `dir/name.ext` → `dir/name.<pid>.ext` (`dir/name` → `dir/name.<pid>`).
fn with_pid(path: &Path) -> PathBuf {
    let pid = std::process::id();
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{pid}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{pid}"),
    };
    path.with_file_name(name)
}

/// A file written from its start that never grows past the process's file-size limit
/// (`RLIMIT_FSIZE`, `ulimit -f`): a write that would cross it writes up to it and the next one
/// fails (`FileTooLarge`, naming the limit), where the system would raise SIGXFSZ, whose default
/// action kills the whole program. Counts the bytes that reached the file.
#[derive(Debug)]
pub(crate) struct Bounded {
    file: File,
    written: u64,
    limit: Option<u64>,
}

impl Bounded {
    /// `file`, empty, with the limit in force now.
    pub(crate) fn new(file: File) -> Bounded {
        Bounded { file, written: 0, limit: size_limit() }
    }

    /// Bytes that reached the file.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }
}

impl io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.limit.map_or(u64::MAX, |l| l.saturating_sub(self.written));
        if room == 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("the file-size limit of {} bytes (ulimit -f) was reached", self.limit.unwrap_or(0)),
            ));
        }
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        let n = io::Write::write(&mut self.file, &buf[..take])?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::Write::flush(&mut self.file)
    }
}

/// Writes a whole file at `path` through a buffer of bounded size: `write` streams into a new
/// file created exclusively next to `path` under a temporary name, which is renamed over `path`
/// only once complete. A reader sees the old file or the whole new one, never half of one; a
/// link or anything that is not a regular file at `path` is refused (and left alone), and a
/// link put there meanwhile is replaced, never followed. It stops at the file-size limit
/// ([`Bounded`]), leaving the old file.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<Bounded>) -> io::Result<()>,
) -> io::Result<()> {
    check_target(path)?;
    let name = path.file_name().ok_or_else(|| refused(path, "names no file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (tmp, file) = create_temporary(dir, &name.to_string_lossy())?;
    let written = regular(file, &tmp).and_then(|file| {
        let mut w = BufWriter::with_capacity(BUFFER, Bounded::new(file));
        write(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?;
        fs::rename(&tmp, path)
    });
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// A new file in `dir` that did not exist before (`O_EXCL`: a link or FIFO planted at the name
/// makes the create fail instead of being opened), under a hidden name derived from `name`.
fn create_temporary(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..16 {
        let n = crate::collector::collector().temporary_names.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match safe_open(OpenOptions::new().write(true).create_new(true)).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// The directory default output goes to: `$XDG_RUNTIME_DIR/gpuspan` where the runtime directory
/// is usable (ours, private), else `gpuspan-<uid>` in the temporary directory. Created mode 0700
/// if missing; refused unless it is a real directory (not a link), owned by this user and closed
/// to everyone else, because another user who can write there could plant links or read traces.
pub(crate) fn private_dir() -> io::Result<PathBuf> {
    if let Some(runtime) = crate::env::runtime_dir() {
        if runtime.is_absolute() && check_private(&runtime).is_ok() {
            let dir = runtime.join("gpuspan");
            if ensure_private(&dir).is_ok() {
                return Ok(dir);
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("gpuspan-{}", uid()));
    ensure_private(&dir)?;
    Ok(dir)
}

/// Makes `dir` (mode 0700) unless it exists, then checks that it is private.
fn ensure_private(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    os::private_mode(&mut builder);
    match builder.create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))),
    }
    check_private(dir)
}

/// A directory (not a link to one), owned by this user, that no one else may enter or write.
fn check_private(dir: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(dir)?;
    if m.file_type().is_symlink() || !m.is_dir() {
        return Err(refused(dir, format_args!("is {}, not a directory of this user's", kind(m.file_type()))));
    }
    os::check_owner(dir, &m)
}

/// What only Unix has: no-follow and non-blocking opens, advisory locks, the file-size limit,
/// owners and modes. The other platforms' [`os`] does without them.
#[cfg(unix)]
mod os {
    use super::refused;
    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::path::Path;

    /// What kind of thing a file type is, for messages.
    pub(super) fn kind(t: fs::FileType) -> &'static str {
        use std::os::unix::fs::FileTypeExt;
        if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if t.is_symlink() {
            "a symbolic link"
        } else {
            "not a regular file"
        }
    }

    /// Open flags that make an open neither follow a link in the last component nor wait for a
    /// FIFO's reader (or a device): what is found is then checked before anything is written.
    pub(super) fn safe_open(options: &mut OpenOptions) -> &mut OpenOptions {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
    }

    /// Takes an exclusive advisory lock on `file` without waiting: `false` when another open file
    /// holds it. A file system that does not support locks counts as taken (nothing to coordinate
    /// with).
    pub(super) fn lock_exclusive(file: &File) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function borrows, open for its duration.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => Ok(false),
            Some(libc::EINTR) => lock_exclusive(file),
            Some(libc::ENOLCK | libc::EINVAL | libc::EOPNOTSUPP) => Ok(true),
            _ => Err(e),
        }
    }

    /// The soft `RLIMIT_FSIZE` in bytes; `None` when unlimited.
    pub(super) fn size_limit() -> Option<u64> {
        // SAFETY: getrlimit fills a plain C struct that may be zeroed.
        let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut l) } != 0 || l.rlim_cur == libc::RLIM_INFINITY {
            return None;
        }
        Some(l.rlim_cur as u64)
    }

    /// `O_NOFOLLOW` on a link says ELOOP.
    pub(super) fn is_loop(e: &io::Error) -> bool {
        e.raw_os_error() == Some(libc::ELOOP)
    }

    pub(super) fn uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    /// A directory gpuspan makes is mode 0700.
    pub(super) fn private_mode(builder: &mut fs::DirBuilder) {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }

    /// `dir` (metadata `m`) belongs to this user and is closed to everyone else.
    pub(super) fn check_owner(dir: &Path, m: &fs::Metadata) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        if m.uid() != uid() {
            return Err(refused(dir, format_args!("belongs to user {}, not to this user ({})", m.uid(), uid())));
        }
        if m.mode() & 0o077 != 0 {
            return Err(refused(
                dir,
                format_args!("is open to other users (mode {:o}); it must be 0700", m.mode() & 0o777),
            ));
        }
        Ok(())
    }
}

/// Elsewhere: plain opens, no locks (the path is written as given), no size limit, no owners.
#[cfg(not(unix))]
mod os {
    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::path::Path;

    pub(super) fn kind(t: fs::FileType) -> &'static str {
        if t.is_dir() {
            "a directory"
        } else if t.is_symlink() {
            "a symbolic link"
        } else {
            "not a regular file"
        }
    }

    pub(super) fn safe_open(options: &mut OpenOptions) -> &mut OpenOptions {
        options
    }

    pub(super) fn lock_exclusive(_file: &File) -> io::Result<bool> {
        Ok(true)
    }

    pub(super) fn size_limit() -> Option<u64> {
        None
    }

    pub(super) fn is_loop(_: &io::Error) -> bool {
        false
    }

    pub(super) fn uid() -> u32 {
        0
    }

    pub(super) fn private_mode(_: &mut fs::DirBuilder) {}

    pub(super) fn check_owner(_: &Path, _: &fs::Metadata) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn scratch(what: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpuspan-file-test-{what}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_link_at_the_path_is_refused_and_its_target_untouched() {
        let d = scratch("link");
        let target = d.join("precious");
        fs::write(&target, "keep me").unwrap();
        let path = d.join("trace.json");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let e = write_atomically(&path, |w| w.write_all(b"{}")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
        let e = open_regular(&path).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 2, "no temporary file left behind");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_device_is_refused_without_writing() {
        let e = write_atomically(Path::new("/dev/null"), |w| w.write_all(b"{}")).unwrap_err();
        assert!(e.to_string().contains("is a device"), "{e}");
        let e = open_regular(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("is a device"), "{e}");
    }

    #[test]
    fn a_file_is_replaced_whole_and_a_failed_write_leaves_the_old_one() {
        let d = scratch("whole");
        let path = d.join("t.json");
        fs::write(&path, "old").unwrap();
        let e = write_atomically(&path, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("cut"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "cut");
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        write_atomically(&path, |w| w.write_all(&[b'x'; 200_000])).unwrap();
        let mut s = String::new();
        File::open(&path).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s.len(), 200_000);
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1, "only the file itself");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn an_open_directory_is_not_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = scratch("open");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_private(&d).unwrap_err();
        assert!(e.to_string().contains("open to other users"), "{e}");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
        check_private(&d).unwrap();
        let link = d.with_extension("link");
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(check_private(&link).is_err(), "a link to a private directory is not one");
        let _ = fs::remove_file(&link);
        let _ = fs::remove_dir_all(&d);
    }
}
