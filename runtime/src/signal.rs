//! The opt-in flush on SIGINT/SIGTERM (`Config::flush_on_signal`, `GPUSPAN_ON_SIGNAL=flush`).
//!
//! Nothing happens in signal context but what signal-hook does there (a byte written to a pipe,
//! a flag read): the work, [`crate::shutdown`], runs on a watcher thread. Where the program had
//! its own handler when gpuspan was started, signal-hook calls it as before, at once, and the
//! program decides what happens next (gpuspan only makes sure its files are written). Where the
//! signal had its default action, the watcher re-raises the signal with that action once
//! everything is written, so the process still ends by the signal (exit status, core rules and
//! parent shells see what they would have seen), and a second signal during the flush ends the
//! process at once. An ignored signal stays ignored.

#[cfg(unix)]
mod imp {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// What a signal did before gpuspan looked.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Before {
        Default,
        Ignored,
        Handled,
    }

    fn before(signal: libc::c_int) -> Before {
        // SAFETY: a null new action only reads the current one into `old`, a plain C struct
        // that may be zeroed.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 {
            return Before::Handled; // unknown: leave the program's choice alone
        }
        match old.sa_sigaction {
            libc::SIG_DFL => Before::Default,
            libc::SIG_IGN => Before::Ignored,
            _ => Before::Handled,
        }
    }

    pub(crate) fn flush_on_signal() {
        crate::collector::collector().signal_handlers.call_once(|| {
            if let Err(e) = install() {
                crate::diagnostics::note_once(format_args!(
                    "could not set up the flush on SIGINT/SIGTERM ({e}); a signal ends the program without the summary and timeline"
                ));
            }
        });
    }

    fn install() -> std::io::Result<()> {
        let signals: Vec<(libc::c_int, Before)> =
            [SIGINT, SIGTERM].into_iter().map(|s| (s, before(s))).filter(|(_, b)| *b != Before::Ignored).collect();
        if signals.is_empty() {
            return Ok(());
        }
        // Set by the watcher once it starts flushing: a signal with its default action that
        // arrives after that takes effect at once (a second Ctrl-C is not made to wait).
        let flushing = Arc::new(AtomicBool::new(false));
        for (s, b) in &signals {
            if *b == Before::Default {
                signal_hook::flag::register_conditional_default(*s, flushing.clone())?;
            }
        }
        let mut iter = signal_hook::iterator::Signals::new(signals.iter().map(|(s, _)| *s))?;
        std::thread::Builder::new().name("gpuspan-signal".into()).spawn(move || {
            if let Some(signal) = iter.forever().next() {
                flushing.store(true, Ordering::SeqCst);
                let default = signals.iter().any(|(s, b)| *s == signal && *b == Before::Default);
                crate::init::shutdown_then(|| {
                    if default {
                        // Ends the process by `signal`, its default action restored.
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                    }
                });
            }
        })?;
        Ok(())
    }
}

#[cfg(unix)]
pub(crate) use imp::flush_on_signal;

#[cfg(not(unix))]
pub(crate) fn flush_on_signal() {
    crate::diagnostics::note_once("flush_on_signal is supported on Unix only; signals end the program as before");
}
