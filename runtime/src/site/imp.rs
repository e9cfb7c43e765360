//! What only the instrumented build does with a [`Site`]: marks a scope leaves on it, and the
//! two registries of sites (compiled in, through `inventory`; made at run time, for spans).

use super::{Site, SiteDesc};
use crate::aggregate::state::SiteStats;
use std::sync::atomic::{AtomicBool, Ordering};

/// A site's instrumented state.
#[derive(Debug)]
pub(crate) struct SiteState {
    /// The aggregates of all its calls.
    pub(crate) stats: SiteStats,
    /// Neither a threshold of its own nor `trace_all`: a short call is known in raw ticks by the
    /// global floor (`sampling::below_floor`). Fixed at compile time, so the check is one load.
    pub(crate) on_global_floor: bool,
    /// A scope of this site was opened: a site with no finished call was still running at
    /// shutdown (an annotated `main`), not never reached.
    entered: AtomicBool,
}

impl SiteState {
    /// No call yet.
    pub(super) const fn new(desc: &SiteDesc) -> SiteState {
        SiteState {
            stats: SiteStats::new(),
            on_global_floor: !desc.trace_all && desc.threshold_us.is_none(),
            entered: AtomicBool::new(false),
        }
    }
}

impl Site {
    /// The site of a selected application span (`span_scopes.rs`): registered at run time.
    pub(crate) fn for_span(desc: SiteDesc) -> Self {
        Site { span: true, ..Site::new(desc) }
    }

    /// Notes that a call of this site started: a load, and a store only the first time.
    #[inline]
    pub(crate) fn mark_entered(&self) {
        if !self.state.entered.load(Ordering::Relaxed) {
            self.state.entered.store(true, Ordering::Relaxed);
        }
    }

    /// Records why a call of this site could not get GPU timing (said once per site and reason
    /// by the caller, shown in the summary's source column).
    pub(crate) fn timed_on_host(&self, why: &'static str) {
        let _ = self.host_reason.set(why);
    }

    pub(crate) fn was_entered(&self) -> bool {
        self.state.entered.load(Ordering::Relaxed)
    }
}

/// The registration `inventory` collects; one per annotated function.
#[doc(hidden)]
#[derive(Debug)]
pub struct SiteRef(pub &'static Site);

inventory::collect!(SiteRef);

/// Sites registered at run time: one per callsite of a selected application span
/// (`span_scopes.rs`), leaked, so `&'static` as the compiled-in ones are.
/// Owned by the [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct AtRunTime(pub(crate) std::sync::Mutex<Vec<&'static Site>>);

impl AtRunTime {
    pub(crate) const fn new() -> Self {
        AtRunTime(std::sync::Mutex::new(Vec::new()))
    }
}
