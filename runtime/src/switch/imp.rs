//! The switch's state: read once from `GPUSPAN`, then one relaxed load per scope.

use std::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

// process-wide because it is the off switch a scope reads before anything else (one
// relaxed load when off); `GPUSPAN` and `set_enabled` are the process's.
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether scopes record anything. The environment is read once, on the first call, so that
/// with `GPUSPAN=off` not even the first call opens a span. The generated code tests this before
/// evaluating anything else.
#[inline(always)]
pub fn is_on() -> bool {
    match STATE.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => read_env(),
    }
}

/// Whether gpuspan may be on: one load and one compare, `false` only once it is known to be
/// off. The generated code tests this and calls `__private::open` (out of line) when it
/// holds, so that with `GPUSPAN=off` the annotated function runs its body and nothing else.
#[inline(always)]
pub fn might_be_on() -> bool {
    STATE.load(Ordering::Relaxed) != OFF
}

#[cold]
fn read_env() -> bool {
    // The first use: the run's settings are resolved with the switch (a no-op after `init`).
    crate::settings::from_env_once();
    let on = crate::env::enabled();
    // A race with `set_enabled` keeps the explicit setting: the environment only fills UNKNOWN.
    let _ = STATE.compare_exchange(UNKNOWN, if on { ON } else { OFF }, Ordering::Relaxed, Ordering::Relaxed);
    STATE.load(Ordering::Relaxed) == ON
}

/// [`set_enabled`](super::set_enabled): the explicit setting wins over `GPUSPAN`.
pub(super) fn set(on: bool) {
    // The switch will not read the environment: the settings are resolved here instead.
    crate::settings::from_env_once();
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
}
