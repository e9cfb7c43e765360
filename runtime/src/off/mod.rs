//! The public API with the `enabled` feature off: the same items, with the same signatures, doing
//! nothing, so that a program never needs `#[cfg]` around gpuspan (as fastrace and tracy-client
//! do). Each item's documentation is on its instrumented twin; here each says what it does
//! instead.

use crate::Summary;

/// Does nothing without the `enabled` feature: there is nothing to turn on.
pub fn set_enabled(_on: bool) {}

/// Always `true` without the `enabled` feature: nothing is ever pending.
pub fn flush() -> bool {
    true
}

/// Empty without the `enabled` feature: nothing was measured. It still prints, as a table with
/// no rows.
pub fn summary() -> Summary {
    Summary::empty()
}

/// Captures nothing without the `enabled` feature: no call produces a record.
#[cfg(feature = "testing")]
#[derive(Debug)]
pub struct Capture {
    _private: (),
}

#[cfg(feature = "testing")]
impl Capture {
    /// Does nothing without the `enabled` feature.
    pub fn start() -> Capture {
        Capture { _private: () }
    }

    /// Does nothing without the `enabled` feature.
    pub fn start_all_threads() -> Capture {
        Capture { _private: () }
    }

    /// Always empty without the `enabled` feature.
    pub fn records(&self) -> Vec<crate::Record> {
        Vec::new()
    }

    /// Always empty without the `enabled` feature.
    pub fn of(&self, _name: &str) -> Vec<crate::Record> {
        Vec::new()
    }
}
