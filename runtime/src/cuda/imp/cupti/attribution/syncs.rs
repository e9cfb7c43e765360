//! The synchronizing calls that returned (CUPTI's `SYNCHRONIZATION` records), kept so that
//! work they waited for is held to have ended before they returned (issue 39: kernels were
//! placed ending after the `cuStreamSynchronize` behind them had returned).

use crate::cuda::cupti::records::Synchronized;
use crate::record::Interval;

/// Calls kept: records are placed at most seconds after their work, and a program that
/// synchronizes thousands of times a second keeps its last ones.
const KEPT: usize = 4096;
/// Calls looked at for one piece of work, from the first that began after it was enqueued.
const LOOKED_AT: usize = 64;

/// Synchronizing calls on CUPTI's CPU clock, by start.
#[derive(Debug, Default)]
pub(crate) struct Syncs(Vec<(Synchronized, Interval)>);

impl Syncs {
    /// A call that waited for `what` over `call` (CUPTI's CPU clock) returned.
    pub(crate) fn add(&mut self, what: Synchronized, call: Interval) {
        let at = self.0.partition_point(|(_, c)| c.start_ns <= call.start_ns);
        self.0.insert(at, (what, call));
        if self.0.len() > KEPT {
            self.0.drain(..KEPT / 4);
        }
    }

    /// The earliest return of a call that waited for work on `stream` of `context` enqueued by
    /// a call that returned at `enqueued_ns`: the work had ended by then.
    pub(crate) fn ended_by(&self, context: u32, stream: u32, enqueued_ns: u64) -> Option<u64> {
        let from = self.0.partition_point(|(_, c)| c.start_ns < enqueued_ns);
        self.0[from..]
            .iter()
            .take(LOOKED_AT)
            .filter(|(what, _)| match what {
                Synchronized::Stream(s) => *s == stream,
                Synchronized::Context(c) => *c == context,
            })
            .map(|(_, c)| c.end_ns)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_ends_by_the_first_synchronize_of_its_stream_or_context_after_it_was_enqueued() {
        let mut s = Syncs::default();
        let call = |start_ns, end_ns| Interval { start_ns, end_ns };
        s.add(Synchronized::Stream(7), call(100, 200));
        s.add(Synchronized::Stream(8), call(300, 350));
        s.add(Synchronized::Context(1), call(400, 900));
        s.add(Synchronized::Stream(7), call(250, 500));
        assert_eq!(s.ended_by(1, 7, 90), Some(200), "the first one on its stream");
        assert_eq!(s.ended_by(1, 7, 150), Some(500), "not one that began before it was enqueued");
        assert_eq!(s.ended_by(1, 8, 310), Some(900), "its context's");
        assert_eq!(s.ended_by(2, 9, 0), None, "another context's stream");
    }
}
