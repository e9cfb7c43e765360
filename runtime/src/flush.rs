//! Bringing pending GPU measurements home: each backend registers how to resolve what it still
//! holds, and `flush` runs them all within a deadline.

use std::sync::Mutex;
use std::time::{Duration, Instant};

type Flusher = fn(Instant) -> bool;

static FLUSHERS: Mutex<Vec<Flusher>> = Mutex::new(Vec::new());

/// Called once by a backend when it first holds pending work. A flusher resolves what it can
/// before the deadline and says whether nothing is left pending.
#[allow(dead_code)] // used by the backend features
pub(crate) fn register(f: Flusher) {
    if let Ok(mut v) = FLUSHERS.lock() {
        if !v.iter().any(|g| std::ptr::fn_addr_eq(*g, f)) {
            v.push(f);
        }
    }
}

/// Resolves pending GPU measurements (waiting at most `timeout`) and hands them to the
/// aggregates and exporters. Returns `true` when nothing is left pending.
pub fn flush_timeout(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let flushers = FLUSHERS.lock().map(|v| v.clone()).unwrap_or_default();
    // Every flusher runs, whatever the ones before it returned (so no short-circuiting `all`).
    let results: Vec<bool> = flushers.into_iter().map(|f| f(deadline)).collect();
    results.into_iter().all(|done| done)
}

/// [`flush_timeout`] with five seconds.
pub fn flush() -> bool {
    flush_timeout(Duration::from_secs(5))
}
