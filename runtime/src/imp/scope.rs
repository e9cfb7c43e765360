//! The RAII scope every annotated call opens. Entering costs one relaxed load when gpuspan is
//! off; leaving hands the measurement to its backend, or straight to the pipeline for host
//! timing. Nothing here blocks on the GPU, and nothing here names a backend: a scope's GPU
//! part and its thread stacks are `backends.rs`'s.
//!
//! One close path, each step taking what it can and passing the rest on: `close` counts a short
//! host call in its thread's ring (the common case); `close_full` lets a backend that reads its
//! own ends close a plain scope in place (`BackendScope::close_in_place`: a CUPTI window);
//! everything else goes through `close_general` → `Active::close` (a host call too short for
//! its site still only counted) → `Active::hand_over`, which builds the `Call` and gives it to
//! the backend (`BackendScope::finish`) or the pipeline.

pub(crate) use crate::backends::GpuScope;
use crate::backends::Stacks;
pub(crate) use crate::call::Call;
use crate::probe::Exit;
use crate::site::Site;
use crate::{clock, sampling, thread};
pub(crate) use host_span::opening_idle;
use host_span::HostSpan;
use std::mem::ManuallyDrop;
use tracing::Span;

mod host_span;

/// An open measurement of one call. Created by the code `#[gpu_kernel]` and `#[gpu_transfer]`
/// generate; ends when dropped, also when the call unwinds.
#[derive(Debug)]
#[must_use]
pub struct Scope {
    /// `ManuallyDrop` so that the field has no drop glue of its own: `Drop for Scope` takes it
    /// out, and a scope opened while off needs no out-of-line drop call.
    state: ManuallyDrop<State>,
}

#[derive(Debug)]
enum State {
    /// Opened while gpuspan was off: records nothing.
    Off,
    /// Timed by the host clock alone (most calls): a few words written at open, and at close
    /// one ring entry unless the call is long enough to export.
    Host(Host),
    /// Measured by a backend, or tracking memory.
    Full(Active),
}

/// What every open scope holds, and all that a host-timed call needs.
#[derive(Debug)]
struct Host {
    site: &'static Site,
    span: HostSpan,
    /// Raw clock ticks, read after the span was entered; converted when the call is counted or
    /// its record built.
    start: u64,
    bytes: Option<u64>,
    error: bool,
    /// Where this call's spans hang in the trace; read before the host span is entered.
    parent: crate::parent::Parent,
    /// The application spans the call was made in: taken when the call becomes a record, and
    /// only while a capture wants them.
    spans: crate::spans::Chain,
    /// Its places on its thread's stacks (`backends.rs`).
    stacks: Stacks,
}

#[derive(Debug)]
pub(crate) struct Active {
    host: Host,
    /// 0 for a host-timed scope until it needs a record: most never do.
    pub scope_id: u64,
    pub thread: u32,
    /// Taken before the call's clock starts, for `track_memory` sites; boxed (rare, 40 bytes).
    memory_before: Option<Box<crate::memory::MemoryMark>>,
    pub gpu: GpuScope,
    /// A selected span's fields (`span_scopes.rs`), set as its scope closes.
    fields: Option<Box<crate::record::Fields>>,
}

impl Scope {
    /// The scope of a call made while gpuspan is off at run time: records nothing.
    #[inline(always)]
    pub fn off() -> Scope {
        Scope { state: ManuallyDrop::new(State::Off) }
    }

    /// A scope timed by the host clock only. Called only once gpuspan is known to be on (inside
    /// `__private::open`, which tests the switch).
    #[inline]
    pub fn host(site: &'static Site, span: Span, bytes: Option<u64>) -> Scope {
        // Once a backend watches bare sites, their GPU work is attributed to them (one load
        // otherwise).
        if crate::backends::watches_bare() {
            return Self::open_bare(site, span, bytes);
        }
        if site.desc.track_memory {
            return Self::host_tracking_memory(site, span, bytes);
        }
        site.mark_entered();
        // A span no subscriber wanted owns nothing: forgotten, not dropped (an out-of-line call
        // whose only work, with tracing's `log` feature, is a "--" line for a span never entered).
        if span.is_disabled() {
            std::mem::forget(span);
            Self::host_with(site, HostSpan::Off, bytes)
        } else {
            Self::host_with(site, HostSpan::enter(span), bytes)
        }
    }

    /// A host scope that also marks memory: the whole state, out of line (its own frame).
    #[cold]
    #[inline(never)]
    fn host_tracking_memory(site: &'static Site, span: Span, bytes: Option<u64>) -> Scope {
        Self::open_with(site, span, bytes, false, |_| (GpuScope::None, clock::raw()))
    }

    #[inline(always)]
    fn host_with(site: &'static Site, span: HostSpan, bytes: Option<u64>) -> Scope {
        let parent = crate::parent::capture();
        let stacks = Stacks::push(site, false);
        let start = clock::raw();
        Scope { state: ManuallyDrop::new(State::Host(Host::new(site, span, start, bytes, parent, stacks))) }
    }

    #[inline(always)]
    fn open_with(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        backend: bool,
        start_gpu: impl FnOnce(u64) -> (GpuScope, u64),
    ) -> Scope {
        site.mark_entered();
        // A backend needs the id now (it tags GPU work with it); a host scope takes one only if
        // it ends up as a record.
        let (thread, scope_id) = if backend { thread::next_scope() } else { (0, 0) };
        let memory_before = site.desc.track_memory.then(|| Box::new(memory_mark()));
        let parent = crate::parent::capture();
        let span = HostSpan::enter(span);
        let (gpu, start) = start_gpu(scope_id);
        let stacks = Stacks::push(site, !gpu.takes_attach());
        Scope {
            state: ManuallyDrop::new(State::Full(Active {
                host: Host::new(site, span, start, bytes, parent, stacks),
                scope_id,
                thread,
                memory_before,
                gpu,
                fields: None,
            })),
        }
    }

    /// The scope of a selected application span (`span_scopes.rs`): opened at the span's first
    /// entry and closed when the span closes, entered meanwhile on any number of threads, even
    /// at once. So it is on no thread's stacks (NVTX, `wgpu::attach`), its host span is the
    /// application's own (not gpuspan's), and the layer keeps each entry's per-thread state
    /// (CUPTI's correlation id) itself. The host clock first, as in [`Scope::open`].
    pub(crate) fn span_scope(site: &'static Site, start_gpu: impl FnOnce(u64) -> GpuScope) -> Scope {
        site.mark_entered();
        let (thread, scope_id) = thread::next_scope();
        // The span's own context: its GPU spans are its children (no host span is made for it).
        let parent = crate::parent::capture_span();
        let start = clock::raw();
        let gpu = start_gpu(scope_id);
        let host = Host {
            site,
            span: HostSpan::Off,
            start,
            bytes: None,
            error: false,
            parent,
            spans: None,
            stacks: Stacks::none(),
        };
        Scope {
            state: ManuallyDrop::new(State::Full(Active {
                host,
                scope_id,
                thread,
                memory_before: None,
                gpu,
                fields: None,
            })),
        }
    }

    /// A selected span's chain: the span itself and those enclosing it (`spans::of_span`).
    pub(crate) fn set_chain(&mut self, chain: crate::spans::Chain) {
        if let State::Full(a) = &mut *self.state {
            a.host.spans = chain;
        }
    }

    /// A selected span's fields, for its record.
    pub(crate) fn set_fields(&mut self, fields: crate::record::Fields) {
        if let (State::Full(a), false) = (&mut *self.state, fields.is_empty()) {
            a.fields = Some(Box::new(fields));
        }
    }

    fn host_mut(&mut self) -> Option<&mut Host> {
        match &mut *self.state {
            State::Host(h) => Some(h),
            State::Full(a) => Some(&mut a.host),
            State::Off => None,
        }
    }

    /// The value leaving the function by `return` or its tail.
    #[inline]
    pub fn exit(&mut self, exit: Exit) {
        if exit == Exit::Error {
            if let Some(h) = self.host_mut() {
                h.error = true;
            }
        }
    }

    /// The value tested by a `?`: an `Err` leaves the function.
    #[inline]
    pub fn try_exit(&mut self, exit: Exit) {
        self.exit(exit);
    }

    /// An async call stops running on this thread: backends with per-thread state (CUPTI's
    /// correlation stack) leave it until [`Scope::resume`].
    pub(crate) fn suspend(&mut self) {
        park(&mut self.state);
        collect(&mut self.state);
        if let State::Full(a) = &mut *self.state {
            let own_clock = a.gpu.own_clock();
            a.gpu.suspend(a.scope_id);
            if own_clock {
                // Its window is given up before the body ran: timed by the host clock from here.
                a.host.start = clock::raw();
            }
        }
        if let Some(h) = self.host_mut() {
            h.stacks.pop_ranges();
        }
    }

    /// An async call runs again, perhaps on another thread.
    pub(crate) fn resume(&mut self) {
        // A guard held across the `.await` finds its slot again.
        match &mut *self.state {
            State::Host(h) => h.stacks.resume(h.site, None, false),
            State::Full(a) => a.host.stacks.resume(a.host.site, Some(a.scope_id), !a.gpu.takes_attach()),
            State::Off => {}
        }
        if let State::Full(a) = &mut *self.state {
            a.gpu.resume(a.scope_id);
        }
        if let Some(h) = self.host_mut() {
            h.stacks.push_ranges(h.site);
        }
    }

    /// For async functions: the span is entered per poll instead of for the whole call.
    pub(crate) fn detach_span(&mut self) {
        self.suspend();
        if let Some(h) = self.host_mut() {
            h.span.detach();
        }
    }

    /// The host span, for entering it around a poll.
    pub(crate) fn span(&self) -> Option<&Span> {
        let host = match &*self.state {
            State::Host(h) => h,
            State::Full(a) => &a.host,
            State::Off => return None,
        };
        match &host.span {
            HostSpan::Idle(s) => Some(s),
            HostSpan::Entered(_) | HostSpan::Off => None,
        }
    }
}

/// What backends call to open their scopes and read them after (and `span_scopes`).
#[allow(dead_code)] // a build without backends calls none of it
impl Scope {
    /// Opens a scope, letting the backend start its measurement once the ids are known.
    #[inline]
    pub(crate) fn open(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        start_gpu: impl FnOnce(u64) -> GpuScope,
    ) -> Scope {
        // The host clock first: a wgpu bracket's start is a submission the call contains.
        Self::open_timed(site, span, bytes, |id| {
            let start = clock::raw();
            (start_gpu(id), start)
        })
    }

    /// [`Scope::open`] for a backend that reads the call's start itself: `start_gpu` gives its
    /// part and the start (a CUDA window's start is the call's, on CUPTI's clock: decision 46).
    #[inline]
    pub(crate) fn open_timed(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        start_gpu: impl FnOnce(u64) -> (GpuScope, u64),
    ) -> Scope {
        Self::open_with(site, span, bytes, true, start_gpu)
    }

    /// The id a backend tags this scope's GPU work with (0 for a host-timed scope).
    pub(crate) fn scope_id(&self) -> u64 {
        match &*self.state {
            State::Full(a) => a.scope_id,
            State::Host(_) | State::Off => 0,
        }
    }

    /// Measuring (gpuspan was on when the scope opened).
    pub(crate) fn is_active(&self) -> bool {
        !matches!(*self.state, State::Off)
    }

    pub(crate) fn gpu_mut(&mut self) -> Option<&mut GpuScope> {
        match &mut *self.state {
            State::Full(a) => Some(&mut a.gpu),
            State::Host(_) | State::Off => None,
        }
    }
}

impl Drop for Scope {
    /// Inlined so that a scope opened while gpuspan is off costs nothing more to close.
    #[inline(always)]
    fn drop(&mut self) {
        match *self.state {
            // Read in the caller's frame, so that `close` saves no registers: each may call out
            // of line on a rare path, and to the compiler a thread-local is a call.
            State::Host(_) => close(&mut self.state, clock::raw(), std::thread::panicking(), crate::ring::current()),
            State::Full(_) => close_full(&mut self.state),
            State::Off => {}
        }
    }
}

/// Takes a closing scope off its thread's stacks (`backends.rs`), with any measurement they
/// hand it.
#[inline(always)]
fn leave_thread_stacks(state: &mut State) {
    match state {
        State::Host(h) => h.stacks.pop_ranges(),
        State::Full(a) => {
            a.host.stacks.pop_ranges();
            // Closed while suspended with a guard open (a cancelled future): its parked slot is
            // collected like any other.
            a.host.stacks.unpark_to_close(a.host.site, a.scope_id);
        }
        State::Off => {}
    }
    collect(state);
}

/// Ends the measurement of an open scope and consumes its state (`state` is never used again).
/// Handles only the common case, a host call of a site on the global floor that ended before
/// it: one entry (site, ticks, bytes) in the thread's ring, the span closed if there is one.
#[inline(never)]
fn close(state: &mut ManuallyDrop<State>, end: u64, panicking: bool, ring: crate::ring::Current) {
    leave_thread_stacks(state);
    if let State::Host(h) = &mut **state {
        // A clock going backwards wraps to a huge count: the general path saturates it.
        let ticks = end.wrapping_sub(h.start);
        if h.site.state.on_global_floor && sampling::below_floor(ticks) && !h.error && !panicking {
            // Besides the span, the state owns the trace parent (an OpenTelemetry context with
            // the OTLP export). SAFETY: the state is never used again, so it is dropped once.
            unsafe { std::ptr::drop_in_place(&mut h.parent) };
            // Both ends are tail calls: this path saves no registers.
            if matches!(h.span, HostSpan::Off) {
                return crate::ring::push_to(ring, h.site, ticks, h.bytes);
            }
            return count_and_close_span(h, ticks, ring);
        }
    }
    close_general(state, end, panicking);
}

/// Counts a call that [`close`] found short, then exits and closes its span: with a subscriber,
/// not the common case of a program without one, so out of line.
#[inline(never)]
fn count_and_close_span(h: &mut Host, ticks: u64, ring: crate::ring::Current) {
    crate::ring::push_to(ring, h.site, ticks, h.bytes);
    if let HostSpan::Entered(span) = &h.span {
        span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
    }
    // SAFETY: the state is never used again (see `close`): the span is dropped once, in place.
    unsafe { std::ptr::drop_in_place(&mut h.span) };
}

/// A scope measured by a backend or tracking memory. Its end is read here rather than in the
/// caller's frame: a CUDA window, the most common, reads its own.
#[inline(never)]
fn close_full(state: &mut ManuallyDrop<State>) {
    let panicking = std::thread::panicking();
    leave_thread_stacks(state);
    if let State::Full(a) = &mut **state {
        // SAFETY: the state is never used again (see `close`).
        if unsafe { a.close_in_place(panicking) } {
            return;
        }
    }
    close_general(state, clock::raw(), panicking);
}

/// A host call that is longer than the floor, of a site with its own threshold, failed or
/// while a sink wants every record, and every backend's scope that does not close in place.
#[inline(never)]
fn close_general(state: &mut ManuallyDrop<State>, end: u64, panicking: bool) {
    // SAFETY: `state` is read once, here, and never again: the scope is being dropped.
    match unsafe { ManuallyDrop::take(state) } {
        State::Host(host) => Active::with(host, 0, 0, GpuScope::None).close(end, panicking),
        State::Full(a) => a.close(end, panicking),
        State::Off => {}
    }
}

/// An async scope suspends with an attach guard open (held across an `.await`): its slot is
/// parked under the guard's scope id, which the scope takes (a host scope becomes a full one
/// with no GPU part yet), so that it resumes with that slot and collects the guard's
/// measurement when the guard is dropped in a later poll.
#[inline(always)]
fn park(state: &mut State) {
    let host = match state {
        State::Host(h) => h,
        State::Full(a) => &mut a.host,
        State::Off => return,
    };
    if let Some(ids) = host.stacks.park() {
        adopt(state, ids, None);
    }
}

/// Takes this scope's slots off its thread's stacks, with the measurement an attached recorder
/// left there: a host scope becomes a full one timed by that measurement.
#[inline(always)]
fn collect(state: &mut State) {
    let host = match state {
        State::Host(h) => h,
        State::Full(a) => &mut a.host,
        State::Off => return,
    };
    if let Some((ids, gpu)) = host.stacks.collect() {
        adopt(state, ids, Some(gpu));
    }
}

/// The scope takes the ids (thread, scope id) its stacks handed it, and the measurement if its
/// GPU part takes one (`GpuScope::take_attached`).
#[cold]
fn adopt(state: &mut State, (thread, scope_id): (u32, u64), attached: Option<GpuScope>) {
    match std::mem::replace(state, State::Off) {
        State::Host(host) => {
            *state = State::Full(Active::with(host, thread, scope_id, attached.unwrap_or(GpuScope::None)));
        }
        State::Full(mut a) => {
            let taken = match attached {
                None => true,
                Some(gpu) => a.gpu.take_attached(gpu),
            };
            if taken {
                (a.thread, a.scope_id) = (thread, scope_id);
            }
            *state = State::Full(a);
        }
        State::Off => {}
    }
}

impl Host {
    #[inline(always)]
    fn new(
        site: &'static Site,
        span: HostSpan,
        start: u64,
        bytes: Option<u64>,
        parent: crate::parent::Parent,
        mut stacks: Stacks,
    ) -> Host {
        stacks.push_ranges(site);
        Host { site, span, start, bytes, error: false, parent, spans: None, stacks }
    }
}

impl Active {
    /// A scope's full state around its host part: no memory marks or fields.
    #[inline(always)]
    fn with(host: Host, thread: u32, scope_id: u64, gpu: GpuScope) -> Active {
        Active { host, scope_id, thread, memory_before: None, gpu, fields: None }
    }

    /// Closes a scope whose backend reads its own ends ([`GpuScope::own_clock`]: a CUPTI
    /// window) with nothing but its call to hand over (no span, memory marks or error), as most
    /// are, in place: the call is read out of the state instead of moving the whole state
    /// (`scripts/count-window`). False for any other scope.
    ///
    /// # Safety
    /// On `true` the state was consumed: it is not used, nor dropped, again.
    #[inline(always)]
    unsafe fn close_in_place(&mut self, panicking: bool) -> bool {
        if !self.gpu.own_clock() {
            return false;
        }
        let h = &mut self.host;
        if !matches!(h.span, HostSpan::Off) || self.memory_before.is_some() || h.error || panicking {
            return false;
        }
        // SAFETY: owned fields are moved out or dropped once, here; the rest own nothing.
        unsafe { std::ptr::drop_in_place(&mut h.spans) };
        // SAFETY: as above (`None` for every such scope: only a selected span's scope has fields).
        unsafe { std::ptr::drop_in_place(&mut self.fields) };
        let (thread, scope_id) = (self.thread, self.scope_id);
        // Built by the backend where the scope is queued, after its end is read. Its ends are
        // the backend's, on its clock (the start is in `h.start`).
        self.gpu.close_in_place(|host_end| {
            // SAFETY: as above; the closure runs once, so `parent` is moved out once.
            let parent = unsafe { std::ptr::read(&h.parent) };
            // As `Active::close` and `hand_over` describe it (such a scope took its id at open).
            let spans = crate::spans::capture(None);
            let (site, host_start, bytes, error, memory, on_own_clock) = (h.site, h.start, h.bytes, false, None, true);
            let fields = None;
            Call {
                site,
                scope_id,
                thread,
                error,
                on_own_clock,
                host_start,
                host_end,
                bytes,
                memory,
                parent,
                spans,
                fields,
                only_if_gpu: false,
            }
        });
        true
    }

    /// Every scope that `close` and `close_in_place` did not end: its span closed; a host call
    /// (no GPU part, memory marks or error) too short for its site's threshold is counted into
    /// its thread's ring all the same; the rest is handed over.
    fn close(mut self, end: u64, panicking: bool) {
        self.host.error |= panicking;
        let span = std::mem::replace(&mut self.host.span, HostSpan::Off).close(self.host.error);
        if matches!(self.gpu, GpuScope::None) && self.memory_before.is_none() && !self.host.error {
            let duration_ns = clock::raw_delta_ns(self.host.start, end);
            if !crate::collector::wants(self.host.site, duration_ns) {
                crate::ring::push(self.host.site, end.saturating_sub(self.host.start), self.host.bytes);
                return;
            }
        }
        // Only a call that may become a record pays for its span chain. A selected span's scope
        // was given its own chain as the span closed (`set_chain`).
        if !self.host.site.is_span() {
            self.host.spans = crate::spans::capture(span.as_ref());
        }
        drop(span);
        self.hand_over(end);
    }

    /// Describes the finished call and hands it to its backend (or the pipeline).
    #[inline(never)]
    fn hand_over(mut self, host_end: u64) {
        let memory = self.memory_before.map(|before| Box::new((*before, memory_mark())));
        if self.scope_id == 0 {
            (self.thread, self.scope_id) = thread::next_scope();
        }
        let host = self.host;
        let call = Call {
            site: host.site,
            scope_id: self.scope_id,
            thread: self.thread,
            error: host.error,
            on_own_clock: false, // a backend on its own clock puts its own ends in (`BackendScope::finish`)
            host_start: host.start,
            host_end,
            bytes: host.bytes,
            memory,
            parent: host.parent,
            spans: host.spans,
            fields: self.fields,
            only_if_gpu: false,
        };
        self.gpu.finish(call);
    }
}

/// An instrumented future is `Send` whenever the body's future is: the scope it holds across
/// `.await` must be.
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<Scope>();
};

/// The process's memory marks for a `track_memory` call: its leaves' device reading and the RSS.
/// Not inlined into the scope's opening (which other crates inline), so that no code outside
/// this crate names the collector (`collector.rs` says why).
#[inline(never)]
fn memory_mark() -> crate::memory::MemoryMark {
    crate::memory::mark(crate::collector::collector().leaves.device_memory_used())
}
