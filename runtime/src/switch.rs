//! The run-time on/off switch: `GPUSPAN=off` turns every scope into one relaxed atomic load.
//! Without the `enabled` feature there is nothing to switch: only [`set_enabled`] is here, and
//! it does nothing.

// The switch itself: only the instrumented build has one.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub use imp::{is_on, might_be_on};

/// Turns instrumentation on or off for the whole process, overriding `GPUSPAN`. Does nothing
/// without the `enabled` feature: there is nothing to turn on.
pub fn set_enabled(on: bool) {
    #[cfg(feature = "enabled")]
    imp::set(on);
    #[cfg(not(feature = "enabled"))]
    let _ = on;
}
