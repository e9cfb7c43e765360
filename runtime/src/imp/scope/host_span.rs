//! A scope's host `tracing` span and how it is entered, left and closed.

use tracing::Span;

/// The host `tracing` span: entered for the whole call of a sync function, per poll for async.
///
/// A plain [`Span`] entered through its dispatcher rather than an `EnteredSpan`, so that a
/// [`Scope`](super::Scope) is `Send` and an instrumented future can be `tokio::spawn`ed. A sync scope is a
/// hidden local of a function that cannot suspend, so it is exited on the thread that entered it.
#[derive(Debug)]
pub(super) enum HostSpan {
    /// Entered on the current thread; exited when the scope closes.
    Entered(Span),
    /// Not entered: an async call's span, entered around each poll.
    Idle(Span),
    /// No subscriber wants the span (or it was closed): nothing to enter, exit or drop.
    Off,
}

std::thread_local! {
    /// Set while an async call's scope opens ([`crate::__private::open_idle`]): its span is
    /// entered per poll by the future, not on opening.
    static OPEN_IDLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `open` with the spans it opens left idle (not entered).
pub(crate) fn opening_idle<R>(open: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            OPEN_IDLE.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(OPEN_IDLE.with(|c| c.replace(true)));
    open()
}

impl HostSpan {
    #[inline]
    pub(super) fn enter(span: Span) -> HostSpan {
        if span.is_disabled() {
            HostSpan::Off
        } else if OPEN_IDLE.with(std::cell::Cell::get) {
            HostSpan::Idle(span)
        } else {
            span.with_subscriber(|(id, dispatch)| dispatch.enter(id));
            HostSpan::Entered(span)
        }
    }

    /// Leaves the span entered by [`HostSpan::enter`] and keeps it, not entered.
    pub(super) fn detach(&mut self) {
        if let HostSpan::Entered(span) = self {
            span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
            *self = HostSpan::Idle(std::mem::replace(span, Span::none()));
        }
    }

    /// Exits the span, marking it as an error first if the call failed, and hands it back to be
    /// dropped once the call is described (its parent names the call's application spans). By
    /// value, so that a span no subscriber wanted leaves nothing to drop.
    #[inline(always)]
    pub(super) fn close(self, error: bool) -> Option<Span> {
        if matches!(self, HostSpan::Off) {
            return None;
        }
        self.close_span(error)
    }

    #[inline(never)]
    fn close_span(self, error: bool) -> Option<Span> {
        let span = match self {
            HostSpan::Entered(span) => {
                span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
                span
            }
            HostSpan::Idle(s) => s,
            HostSpan::Off => return None,
        };
        if error {
            span.record("error", true);
        }
        Some(span)
    }
}
