//! The trace context a scope's spans hang under, taken when the scope opens: whether an export
//! runs, the application's current OpenTelemetry context, and the process's `TRACEPARENT`.
//! Apart from the export's pipeline (`mod.rs`, which reaches the collector), so that the record,
//! which carries a [`Parent`], names a file that imports nothing above the collector.

use opentelemetry::Context;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::RwLock;

/// Whether an export pipeline is running (scopes read it, one relaxed load, to decide whether
/// to capture their parent context), and the process's `TRACEPARENT`.
// process-wide because a scope's opening, which other crates inline, reads it: in the collector
// it would make the collector's symbol exported, and every access to the collector (the close
// path's floor included) a load through the GOT; and `TRACEPARENT` is the process's
// environment, attached once to a thread for the rest of its life.
pub(super) static PROCESS: Process = Process { active: AtomicBool::new(false), parent: RwLock::new(None) };

/// The export's process-wide facts.
pub(super) struct Process {
    /// Whether an export pipeline is running.
    pub(super) active: AtomicBool,
    /// The `TRACEPARENT` context, once per process: it is attached to the thread that started
    /// the first pipeline for the rest of that thread's life (so it is the process's, too: a
    /// second owner could not attach it again). `None` until read; `Some(None)` when unset.
    pub(super) parent: RwLock<Option<Option<Context>>>,
}

#[inline(always)]
pub(super) fn active() -> &'static AtomicBool {
    &PROCESS.active
}

/// What a scope carries to its record for [`capture_parent`].
pub(crate) type Parent = Option<Context>;

/// The OpenTelemetry context a scope's spans will be children of: the innermost span the
/// application has entered and exported (through [`Otlp::layer`] or the OpenTelemetry API).
/// `None` when no export runs, or no such span is open (the process parent applies then).
#[inline]
pub(crate) fn capture_parent() -> Parent {
    if !active().load(Relaxed) {
        return None;
    }
    current_parent()
}

/// The parent of a selected span's GPU spans (`span_scopes.rs`), asked at the span's first
/// entry: the application's span itself as the OpenTelemetry layer exports it, whatever the
/// order of the layers (ours may be told of the entry before the OpenTelemetry layer makes it
/// the current context); else what [`capture_parent`] says. Its GPU spans are then children of
/// the user's span, not of a span gpuspan makes.
pub(crate) fn capture_span_parent() -> Parent {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !active().load(Relaxed) || ENDING.get() {
        return None;
    }
    let cx = tracing::Span::current().context();
    if cx.span().span_context().is_valid() {
        return Some(cx);
    }
    current_parent()
}

#[cold]
fn current_parent() -> Option<Context> {
    use opentelemetry::trace::TraceContextExt;
    // OpenTelemetry's context is a thread-local read with `with`, which panics once it is
    // destroyed, and a panic in a thread-local destructor aborts: an annotated call made from
    // another thread-local's destructor would take the program down. So: no parent once this
    // thread has begun destroying its thread-locals.
    if ENDING.get() {
        return None;
    }
    let parent = Context::map_current(|cx| cx.has_active_span().then(|| cx.clone()));
    // First used after OpenTelemetry's context (just read), so destroyed before it (thread-locals
    // are destroyed in reverse order of first use): ENDING is set before the context goes.
    let _ = WATCH.try_with(|_| ());
    parent
}

thread_local! {
    /// This thread is destroying its thread-locals. A `Cell` without destructor: always readable.
    static ENDING: Cell<bool> = const { Cell::new(false) };
    static WATCH: EndingWatch = const { EndingWatch };
}

/// Sets [`ENDING`] when destroyed.
struct EndingWatch;

impl Drop for EndingWatch {
    fn drop(&mut self) {
        ENDING.set(true);
    }
}
