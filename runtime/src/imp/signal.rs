//! The end of a run that does not reach the guard's drop: SIGINT/SIGTERM (on by default,
//! `Config::flush_on_signal`, `GPUSPAN_ON_SIGNAL`) and `std::process::exit` (an exit hook).
//!
//! **Signals.** gpuspan acts on a signal only where the signal would have ended the program: a
//! signal with its default action when gpuspan started. Its handler then does nothing but write
//! one byte to a pipe; a watcher thread runs [`crate::shutdown`] (bounded: the GPU flush and the
//! files' deadlines), restores the default action and raises the signal again, so the process
//! still ends by that signal (exit status, core rules and parent shells see what they would have
//! seen). A second signal during the flush ends the process at once. A signal the program handles
//! is left to the program: a handler installed before gpuspan is not replaced, and one installed
//! after it (directly, or through signal-hook's registry as `tokio::signal` does, which calls
//! gpuspan's handler first) owns the signal: gpuspan's handler sees it is no longer the one
//! installed and does nothing, so the program's own end (the guard's drop, a return from `main`,
//! `process::exit`) writes everything, including what it measured while shutting down. An
//! ignored signal stays ignored.
//!
//! **`process::exit`.** It runs no destructors, so the guard's drop never comes; an `atexit`
//! hook runs [`crate::shutdown`] instead (a no-op when the guard already ended the run). It does
//! nothing in a forked child that exits (the run is the parent's).

pub(crate) mod state;

/// Unix: the SIGINT/SIGTERM watcher and the `atexit` hook.
#[cfg(unix)]
mod imp {
    use super::state::Signals;
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::io::Read;
    use std::os::fd::IntoRawFd;
    use std::sync::atomic::Ordering;

    fn signals() -> &'static Signals {
        &crate::collector::collector().signals
    }

    /// Installs the SIGINT/SIGTERM handlers (once) where those signals have their default action;
    /// the watcher ends the run with `end` (`init.rs`'s `shutdown_then`, handed in so that this
    /// part of the collector names nothing above it). (`_asked`: whether the program asked for it,
    /// rather than the default; Unix has it either way.)
    pub(crate) fn flush_on_signal(_asked: bool, end: super::EndThen) {
        signals().installed.call_once(|| {
            if let Err(e) = install(end) {
                crate::diagnostics::note_once(format_args!(
                    "could not set up the flush on SIGINT/SIGTERM ({e}); a signal ends the program without the summary and timeline"
                ));
            }
        });
    }

    fn install(end: super::EndThen) -> std::io::Result<()> {
        let (mut read, write) = std::os::unix::net::UnixStream::pair()?;
        // The handler must never block: a full pipe (signals faster than the watcher reads) drops
        // the byte, and the watcher is already on its way.
        write.set_nonblocking(true)?;
        signals().wake.store(write.into_raw_fd(), Ordering::SeqCst);
        let mut ours = false;
        for signal in [SIGINT, SIGTERM] {
            ours |= install_if_default(signal)?;
        }
        if !ours {
            return Ok(()); // every signal handled or ignored by the program: nothing to watch
        }
        std::thread::Builder::new().name("gpuspan-signal".into()).spawn(move || {
            let mut byte = [0u8; 1];
            if read.read_exact(&mut byte).is_ok() {
                let signal = libc::c_int::from(byte[0]);
                end(&|| {
                    // Ends the process by `signal`, its default action restored.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                });
            }
        })?;
        Ok(())
    }

    /// Puts [`on_signal`] in place of `signal`'s default action; returns whether it did (a
    /// handled or ignored signal is put back as it was: the program's choice).
    fn install_if_default(signal: libc::c_int) -> std::io::Result<bool> {
        // SAFETY: `sigaction` with plain C structs that may be zeroed; the handler is an
        // `extern "C" fn(c_int)` that only calls async-signal-safe functions (see `on_signal`).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // Interrupted system calls restart: a program that never handled the signal never
            // saw EINTR from it either.
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &action, &mut old) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if old.sa_sigaction == libc::SIG_DFL {
                return Ok(true);
            }
            // The program's: back as it was (checked after the swap, so nothing races between).
            if libc::sigaction(signal, &old, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(false)
        }
    }

    /// Whether [`on_signal`] is still `signal`'s installed handler (not replaced by, or chained
    /// from, a handler the program installed after gpuspan). Async-signal-safe.
    fn still_ours(signal: libc::c_int) -> bool {
        // SAFETY: a null new action only reads the current one into `now`, a zeroable C struct.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        (unsafe { libc::sigaction(signal, std::ptr::null(), &mut now) }) == 0
            && now.sa_sigaction == on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
    }

    /// The handler. Signal context: atomics, `sigaction`, `write`, `raise` only, and errno kept.
    extern "C" fn on_signal(signal: libc::c_int) {
        let saved = errno::errno();
        let s = signals();
        if still_ours(signal) {
            if s.flushing.swap(true, Ordering::SeqCst) {
                // A second signal: the default action, now.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
            } else {
                let byte = signal as u8; // SIGINT = 2, SIGTERM = 15
                                         // SAFETY: writes one byte from a live local to the pipe's non-blocking write end,
                                         // which is never closed.
                let _ = unsafe { libc::write(s.wake.load(Ordering::SeqCst), (&byte as *const u8).cast(), 1) };
            }
        }
        errno::set_errno(saved);
    }

    /// Registers the exit hook (once): `process::exit` with a live guard still writes the run,
    /// by `end` (`init.rs`'s `shutdown`).
    pub(crate) fn on_exit(end: fn()) {
        signals().exit_hook.call_once(|| {
            signals().exit_pid.store(std::process::id(), Ordering::SeqCst);
            let _ = signals().exit_end.set(end);
            // SAFETY: registers a plain `extern "C" fn()` that never unwinds (see `at_exit`).
            if unsafe { libc::atexit(at_exit) } != 0 {
                crate::diagnostics::note_once(
                    "could not register the exit hook (atexit); a program that leaves by process::exit \
                     must call gpuspan::shutdown() first, or its summary and timeline are lost",
                );
            }
        });
    }

    /// Run by `exit`: ends what is still running, as [`crate::shutdown`] does.
    extern "C" fn at_exit() {
        if std::process::id() != signals().exit_pid.load(Ordering::SeqCst) {
            return; // a forked child: the run, and its files, are the parent's
        }
        // A panic must not unwind into C.
        if let Some(&end) = signals().exit_end.get() {
            let _ = std::panic::catch_unwind(end);
        }
    }
}

pub(crate) use imp::{flush_on_signal, on_exit};

/// How a signal's watcher ends the run, then runs the closure before any other end can proceed
/// (`init.rs`'s `shutdown_then`).
pub(crate) type EndThen = fn(&dyn Fn());

/// Elsewhere: no signals to catch, no `atexit`.
#[cfg(not(unix))]
mod imp {
    use super::EndThen;

    /// Said only when the program asked for it: by default, signals end the program as before.
    pub(crate) fn flush_on_signal(asked: bool, _end: EndThen) {
        if asked {
            crate::diagnostics::note_once(
                "the flush on SIGINT/SIGTERM is supported on Unix only; signals end the program as before",
            );
        }
    }

    /// Without `atexit` here, `process::exit` needs an explicit [`crate::shutdown`] first (docs/guide.md).
    pub(crate) fn on_exit(_end: fn()) {}
}
