//! A scope timed by the passes an instrumented device ran for it (`gpuspan::wgpu::instrument`):
//! its GPU time is the sum of those passes, each timed by its own timestamp writes, and each
//! pass is one of its activities. The scope's record waits for the last of its passes.
//!
//! Exact, not a bound: the busy time is the sum of the passes' own intervals, and the interval
//! drawn is the first pass's start to the last one's end, so the gaps between passes (the GPU
//! idle, or running other work) are the interval's length less the busy time, never counted.
//!
//! Which scope a pass belongs to is decided in one place, [`owner`]: the innermost annotated
//! call open on the thread that began the pass, else the innermost selected span entered on it,
//! else the one selected span entered on some thread when the pass began (attribution by time,
//! decision 55: a framework's device thread never enters its caller's span), else nobody (the
//! pass is then a record of its own, `unattributed`).
//!
//! Major-independent: each major's backend delivers its resolved passes here.

use crate::collector;
use crate::record::{
    attributed_of_bits, Activity, Attributed, Bits, DeviceLabel, GpuTiming, Interval, Record, TimingSource,
};
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};

/// The passes of one scope, shared by the passes in flight and the scope.
#[derive(Clone, Debug, Default)]
pub(crate) struct PassSum(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    /// Passes begun for the scope whose timestamps have not come back.
    pending: u32,
    passes: Vec<Activity>,
    clock_error_ns: u64,
    device: Option<DeviceLabel>,
    /// The scope's record, once it finished.
    record: Option<Record>,
    /// The scope finished (with a record) or was forgotten (without).
    closed: bool,
    /// The scope was forgotten: no record will hold its passes, which go back to the backend
    /// (`pass_done`) to be records of their own, `unattributed`.
    orphaned: bool,
    /// The passes' own records (each with its one activity), kept until the scope's record is
    /// made, so that an orphaned scope can hand them back.
    pass_records: Vec<Record>,
    /// How its passes were found to be its (`Bits::bit`): by thread, by time or both.
    attributed_bits: u8,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PassSum {
    /// A pass was begun for this scope: its record waits for it.
    pub(crate) fn pass_begun(&self) {
        lock(&self.0).pending += 1;
    }

    /// A pass was found to be this scope's `how`.
    fn attributed(self, how: Attributed) -> Self {
        lock(&self.0).attributed_bits |= how.bit();
        self
    }

    /// A pass's timestamps came back (`None`: they never will, counted by the caller); `pass`
    /// is its resolved record, its one activity the pass. Given back when the scope was
    /// forgotten: the caller makes it a record of its own (`unattributed`), so nothing is lost.
    #[must_use = "a pass given back belongs to nobody: submit it as unattributed"]
    pub(crate) fn pass_done(&self, pass: Option<Record>) -> Option<Record> {
        let ready = {
            let mut s = lock(&self.0);
            s.pending = s.pending.saturating_sub(1);
            if let Some(pass) = pass {
                if s.orphaned {
                    return Some(pass);
                }
                if let (Some(gpu), Some(activity)) = (&pass.gpu, pass.activities.first()) {
                    s.clock_error_ns = s.clock_error_ns.max(gpu.clock_error_ns);
                    if s.device.is_none() {
                        s.device.clone_from(&activity.device);
                    }
                    s.passes.push(activity.clone());
                    s.pass_records.push(pass);
                }
            }
            Self::take_ready(&mut s)
        };
        if let Some(r) = ready {
            collector::submit(r);
        }
        None
    }

    /// The scope finished with `record`: it is delivered once its passes are in.
    pub(crate) fn finish(self, record: Record) {
        let ready = {
            let mut s = lock(&self.0);
            s.record = Some(record);
            s.closed = true;
            Self::take_ready(&mut s)
        };
        if let Some(r) = ready {
            collector::submit(r);
        }
    }

    /// No record will come (the scope was forgotten): the passes already in are given back, to
    /// be records of their own (`unattributed`), and so are those that arrive later
    /// (`pass_done`).
    #[must_use = "the passes given back belong to nobody: submit them as unattributed"]
    pub(crate) fn forget(self) -> Vec<Record> {
        let mut s = lock(&self.0);
        s.closed = true;
        s.orphaned = true;
        s.passes.clear();
        std::mem::take(&mut s.pass_records)
    }

    /// The record, with its GPU timing from its passes, once the scope closed and no pass is
    /// pending.
    fn take_ready(s: &mut State) -> Option<Record> {
        if !s.closed || s.pending > 0 {
            return None;
        }
        let mut record = s.record.take()?;
        // Said where time had a part (by thread alone is the rule, as for CUPTI's records).
        if s.attributed_bits & Attributed::Time.bit() != 0 {
            record.attributed = attributed_of_bits(s.attributed_bits);
        }
        s.pass_records.clear();
        let mut passes = std::mem::take(&mut s.passes);
        if passes.is_empty() {
            // Every pass's timestamps were lost (counted): the call keeps its host timing.
            return Some(record);
        }
        passes.sort_by_key(|a| a.interval.start_ns);
        let busy_ns: u64 = passes.iter().map(|a| a.interval.duration_ns()).sum();
        let start_ns = passes.iter().map(|a| a.interval.start_ns).min().unwrap_or(0);
        // Each pass is placed on the host clock on its own, within the clock bound: two passes
        // placed apart may overlap there by up to that bound though they ran one after the
        // other. The interval then ends where the sum of their exact durations ends.
        let end_ns = passes.iter().map(|a| a.interval.end_ns).max().unwrap_or(0).max(start_ns + busy_ns);
        record.gpu = Some(GpuTiming {
            interval: Interval { start_ns, end_ns },
            busy_ns,
            source: TimingSource::GpuTimestamp,
            clock_error_ns: s.clock_error_ns,
            bracketed: false,
            bracket_at_exit: false,
            device: s.device.clone(),
        });
        record.activities.extend(passes);
        Some(record)
    }
}

/// Whom a pass begun on this thread belongs to.
#[derive(Debug)]
pub(crate) enum Owner {
    /// A scope whose record will sum its passes.
    Scope(PassSum),
    /// A scope already timed exactly by other means (a recorder parameter, an attached
    /// encoder): the pass is not timed apart, the scope's timing holds it.
    Timed,
    /// No scope: the pass is a record of its own, `unattributed`.
    Nobody,
    /// No scope on the thread while several unrelated selected spans were entered (named):
    /// a record of its own, `during several spans`, not guessed between them.
    Several(Arc<str>),
}

/// The one place a pass's owner is decided, when an instrumented encoder begins it: the
/// innermost annotated call open on this thread (`claim_call`, the major's `attach` stack),
/// else the innermost selected span entered on this thread, else the one selected span
/// entered on some thread now (by time; several: not guessed, named), else nobody.
pub(crate) fn owner(claim_call: impl FnOnce() -> Option<Owner>) -> Owner {
    if let Some(o) = claim_call() {
        return o;
    }
    let on_thread = SPANS.try_with(|s| s.borrow().last().map(|(_, cell)| cell.sum())).ok().flatten();
    if let Some(sum) = on_thread {
        return Owner::Scope(sum.attributed(Attributed::Thread));
    }
    use crate::span_scopes::WorkByTime;
    match crate::span_scopes::work_by_time_now() {
        WorkByTime::One(work) => Owner::Scope(work.passes().sum().attributed(Attributed::Time)),
        WorkByTime::Several(names) => Owner::Several(names),
        WorkByTime::Nobody => Owner::Nobody,
    }
}

/// A selected span's passes: made when the span is first entered, taken when it closes.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpanPasses(Arc<Mutex<Option<PassSum>>>);

impl SpanPasses {
    fn sum(&self) -> PassSum {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(PassSum::default).clone()
    }

    /// The span closes: its passes, if an instrumented device ran any for it.
    pub(crate) fn take(&self) -> Option<PassSum> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

thread_local! {
    /// The selected spans entered on this thread, innermost last: (span id, its passes).
    static SPANS: RefCell<Vec<(u64, SpanPasses)>> = const { RefCell::new(Vec::new()) };
}

/// A selected span is entered on this thread.
pub(crate) fn span_entered(span: u64, passes: &SpanPasses) {
    let _ = SPANS.try_with(|s| s.borrow_mut().push((span, passes.clone())));
}

/// This thread's entry of a selected span ends.
pub(crate) fn span_exited(span: u64) {
    let _ = SPANS.try_with(|s| {
        let mut s = s.borrow_mut();
        if let Some(i) = s.iter().rposition(|(id, _)| *id == span) {
            s.remove(i);
        }
    });
}

/// A pass no scope owns, resolved: its own record, already named and timed by the backend.
pub(crate) fn unattributed(record: Record) {
    collector::submit(record);
}

#[cfg(test)]
mod tests {
    use super::PassSum;
    use crate::record::{Activity, ActivityKind, GpuTiming, Interval, KernelGeometry, Record, TimingSource};
    use crate::site::{Backend, Site, SiteKind};

    static PASS: Site = Site::new(crate::site::site_desc!("pass", SiteKind::Kernel, Backend::Wgpu));

    fn pass(name: &'static str) -> Record {
        let interval = Interval { start_ns: 10, end_ns: 20 };
        let mut r = Record::new(&PASS, 0, 0, interval);
        r.gpu = Some(GpuTiming::new(interval, TimingSource::GpuTimestamp));
        r.activities.push(Activity::new(name, interval, ActivityKind::Kernel(KernelGeometry::default())));
        r
    }

    #[test]
    fn a_forgotten_scope_gives_back_every_pass_it_summed_or_will_receive() {
        let sum = PassSum::default();
        sum.pass_begun();
        sum.pass_begun();
        assert!(sum.pass_done(Some(pass("first"))).is_none(), "held while the scope is open");
        let later = sum.clone();
        let back = sum.forget();
        assert_eq!(back.len(), 1, "the pass already in is given back");
        assert_eq!(back[0].activities[0].name, "first");
        let back = later.pass_done(Some(pass("second"))).expect("a pass arriving after is given back");
        assert_eq!(back.activities[0].name, "second");
    }
}
