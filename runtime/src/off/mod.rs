//! The public API with the `enabled` feature off: the same items, with the same signatures, doing
//! nothing, so that a program never needs `#[cfg]` around gpuspan (as fastrace and tracy-client
//! do). Each item's documentation is on its instrumented twin; here each says what it does
//! instead.

use crate::record::Record;
use crate::site::Site;
use crate::Summary;
use std::time::Duration;

/// The default threshold: calls shorter than this are only aggregated (the same value as with
/// `enabled`, so code deriving settings from it behaves alike).
pub const DEFAULT_THRESHOLD_US: u64 = 100;

/// Does nothing without the `enabled` feature: there is nothing to turn on.
pub fn set_enabled(_on: bool) {}

/// Always `true` without the `enabled` feature: nothing is ever pending.
pub fn flush_timeout(_timeout: Duration) -> bool {
    true
}

/// Always `true` without the `enabled` feature: nothing is ever pending.
pub fn flush() -> bool {
    true
}

/// Empty without the `enabled` feature: no site is registered.
pub fn all_sites() -> Vec<&'static Site> {
    Vec::new()
}

/// Empty without the `enabled` feature: nothing was measured. It still prints, as a table with
/// no rows.
pub fn summary() -> Summary {
    Summary {
        reached: Vec::new(),
        never_reached: Vec::new(),
        still_running: Vec::new(),
        off: false,
        losses: Vec::new(),
        trust: Vec::new(),
        notes: Vec::new(),
    }
}

/// Captures nothing without the `enabled` feature: no call produces a record.
#[derive(Debug)]
pub struct Capture {
    _private: (),
}

impl Capture {
    /// Does nothing without the `enabled` feature.
    pub fn start() -> Capture {
        Capture { _private: () }
    }

    /// Always empty without the `enabled` feature.
    pub fn records(&self) -> Vec<Record> {
        Vec::new()
    }

    /// Always empty without the `enabled` feature.
    pub fn of(&self, _name: &str) -> Vec<Record> {
        Vec::new()
    }
}
