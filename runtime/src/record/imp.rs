//! What only the instrumented build says about records: the attributes it adds, and the bit
//! sets a site's aggregate keeps of its records' timing sources and attributions.

use super::{Attributed, TimingSource};

/// The attribute naming the unrelated selected spans entered when a `during several spans`
/// record's work was launched.
pub(crate) const DURING_SPANS: &str = "gpuspan.during_spans";
/// The attribute naming the unselected span entered when unowned work was launched (the census
/// of `span_scopes::unselected_at`), so that the user learns what to select.
pub(crate) const OPEN_SPAN: &str = "gpuspan.open_span";

/// A set of [`TimingSource`]s or of [`Attributed`]s as bits (a site's records, in its
/// aggregate): one bit each, `ThreadAndTime` both of its parts.
pub(crate) trait Bits: Sized {
    /// Its bit in a set.
    fn bit(self) -> u8;
}

impl Bits for TimingSource {
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl Bits for Attributed {
    fn bit(self) -> u8 {
        match self {
            Self::Thread => 1,
            Self::Time => 2,
            Self::ThreadAndTime => 3,
            Self::Ambiguous => 4,
        }
    }
}

/// What a site's set of [`Attributed`] bits says: ambiguous, or which of thread and time.
pub(crate) fn attributed_of_bits(bits: u8) -> Option<Attributed> {
    Some(match bits {
        0 => return None,
        b if b & 4 != 0 => Attributed::Ambiguous,
        1 => Attributed::Thread,
        2 => Attributed::Time,
        _ => Attributed::ThreadAndTime,
    })
}
