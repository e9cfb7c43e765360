//! The RAII scope every annotated call opens. Entering costs one relaxed load when gpuspan is
//! off; leaving hands the measurement to its backend, or straight to the pipeline for host
//! timing. Nothing here blocks on the GPU.

pub(crate) use crate::call::Call;
use crate::probe::Exit;
use crate::site::Site;
use crate::{clock, pipeline, sampling, thread};
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
    /// This scope has a slot on its thread's `wgpu::attach` stack.
    #[cfg(feature = "_wgpu")]
    attach_slot: bool,
    /// An NVTX range of this site is pushed on the current thread (a tool is attached).
    #[cfg(feature = "nvtx")]
    nvtx: bool,
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

/// The backend's part of an open scope.
#[derive(Debug)]
pub(crate) enum GpuScope {
    None,
    #[cfg(feature = "_wgpu")]
    Wgpu(crate::wgpu::scope::WgpuScope),
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaScope),
}

impl GpuScope {
    /// The scope is timed by a CUDA window: its host start is the window's (CUPTI's clock).
    #[inline(always)]
    fn is_window(&self) -> bool {
        #[cfg(feature = "cuda")]
        if let GpuScope::Cuda(crate::cuda::CudaScope::Window) = self {
            return true;
        }
        false
    }

    /// Whether `gpuspan::wgpu::attach` may time this scope: when it has no GPU source, or only
    /// a queue bracket, which an attached encoder replaces (it times the call's own commands
    /// exactly; the bracket is an upper bound).
    #[cfg(feature = "_wgpu")]
    fn takes_attach(&self) -> bool {
        match self {
            GpuScope::None => true,
            GpuScope::Wgpu(w) => w.is_bracket(),
            #[cfg(feature = "cuda")]
            GpuScope::Cuda(_) => false,
        }
    }

    #[allow(unused_variables)] // without backends with per-thread state
    fn suspend(&mut self, scope_id: u64) {
        #[cfg(feature = "cuda")]
        if let GpuScope::Cuda(c) = self {
            c.suspend(scope_id);
        }
        #[cfg(feature = "_wgpu")]
        if let GpuScope::Wgpu(w) = self {
            w.suspend();
        }
    }

    #[allow(unused_variables)]
    fn resume(&mut self, scope_id: u64) {
        #[cfg(feature = "cuda")]
        if let GpuScope::Cuda(c) = self {
            c.resume(scope_id);
        }
    }
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
        // Once CUDA is timed, a bare site's CUDA work is attributed to it (one load otherwise).
        #[cfg(feature = "cuda")]
        if crate::cuda::watching() {
            return Self::cuda_watched(site, span, bytes);
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
        #[cfg(feature = "_wgpu")]
        let attach_slot = crate::wgpu::scope::attach_push(site, false);
        let start = clock::raw();
        Scope {
            state: ManuallyDrop::new(State::Host(Host::new(
                site,
                span,
                start,
                bytes,
                parent,
                #[cfg(feature = "_wgpu")]
                attach_slot,
            ))),
        }
    }

    /// Opens a scope, letting the backend start its measurement once the ids are known.
    #[allow(dead_code)] // used by the backend features
    #[inline]
    pub(crate) fn open(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        start_gpu: impl FnOnce(u64) -> GpuScope,
    ) -> Scope {
        // The host clock first: a wgpu bracket's start is a submission the call contains.
        Self::open_with(site, span, bytes, true, |id| {
            let start = clock::raw();
            (start_gpu(id), start)
        })
    }

    /// [`Scope::open`] for a backend that reads the call's start itself: `start_gpu` gives its
    /// part and the start (a CUDA window's start is the call's, on CUPTI's clock: decision 46).
    #[cfg(feature = "cuda")]
    #[inline]
    pub(crate) fn open_timed(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        start_gpu: impl FnOnce(u64) -> (GpuScope, u64),
    ) -> Scope {
        Self::open_with(site, span, bytes, true, start_gpu)
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
        let memory_before = site.desc.track_memory.then(|| Box::new(crate::memory::mark()));
        let parent = crate::parent::capture();
        let span = HostSpan::enter(span);
        let (gpu, start) = start_gpu(scope_id);
        #[cfg(feature = "_wgpu")]
        let attach_slot = crate::wgpu::scope::attach_push(site, !gpu.takes_attach());
        Scope {
            state: ManuallyDrop::new(State::Full(Active {
                host: Host::new(
                    site,
                    span,
                    start,
                    bytes,
                    parent,
                    #[cfg(feature = "_wgpu")]
                    attach_slot,
                ),
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
            #[cfg(feature = "_wgpu")]
            attach_slot: false,
            #[cfg(feature = "nvtx")]
            nvtx: false,
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

    /// The id a backend tags this scope's GPU work with (0 for a host-timed scope).
    #[allow(dead_code)] // used by the backend features
    pub(crate) fn scope_id(&self) -> u64 {
        match &*self.state {
            State::Full(a) => a.scope_id,
            State::Host(_) | State::Off => 0,
        }
    }

    /// Measuring (gpuspan was on when the scope opened).
    #[allow(dead_code)] // used by the backend features
    pub(crate) fn is_active(&self) -> bool {
        !matches!(*self.state, State::Off)
    }

    #[allow(dead_code)] // used by the backend features
    pub(crate) fn gpu_mut(&mut self) -> Option<&mut GpuScope> {
        match &mut *self.state {
            State::Full(a) => Some(&mut a.gpu),
            State::Host(_) | State::Off => None,
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
        #[cfg(feature = "_wgpu")]
        park_attachment(&mut self.state);
        #[cfg(feature = "_wgpu")]
        collect_attachment(&mut self.state);
        if let State::Full(a) = &mut *self.state {
            let windowed = a.gpu.is_window();
            a.gpu.suspend(a.scope_id);
            if windowed {
                // Its window is given up before the body ran: timed by the host clock from here.
                a.host.start = clock::raw();
            }
        }
        #[cfg(feature = "nvtx")]
        if let Some(h) = self.host_mut() {
            h.pop_nvtx();
        }
    }

    /// An async call runs again, perhaps on another thread.
    pub(crate) fn resume(&mut self) {
        #[cfg(feature = "_wgpu")]
        {
            let timed = matches!(&*self.state, State::Full(a) if !a.gpu.takes_attach());
            // A guard held across the `.await` finds its slot again.
            let parked = matches!(&*self.state, State::Full(a) if crate::wgpu::scope::attach_unpark(a.scope_id, a.host.site, timed));
            if let Some(h) = self.host_mut() {
                h.attach_slot = parked || crate::wgpu::scope::attach_push(h.site, timed);
            }
        }
        if let State::Full(a) = &mut *self.state {
            a.gpu.resume(a.scope_id);
        }
        #[cfg(feature = "nvtx")]
        if let Some(h) = self.host_mut() {
            h.nvtx = crate::nvtx::push(h.site);
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

/// Takes a closing scope off its thread's NVTX and `wgpu::attach` stacks.
#[inline(always)]
#[allow(unused_variables)] // without `nvtx` and `wgpu`
fn leave_thread_stacks(state: &mut State) {
    #[cfg(feature = "nvtx")]
    match state {
        State::Host(h) => h.pop_nvtx(),
        State::Full(a) => a.host.pop_nvtx(),
        State::Off => {}
    }
    #[cfg(feature = "_wgpu")]
    {
        // Closed while suspended with a guard open (a cancelled future): its parked slot, with
        // the measurement the guard left in it as it was dropped, is collected like any other.
        if let State::Full(a) = state {
            if !a.host.attach_slot && crate::wgpu::scope::attach_unpark(a.scope_id, a.host.site, false) {
                a.host.attach_slot = true;
            }
        }
        collect_attachment(state);
    }
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
        if h.site.on_global_floor && sampling::below_floor(ticks) && !h.error && !panicking {
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
    #[cfg(feature = "cuda")]
    if let State::Full(a) = &mut **state {
        // SAFETY: the state is never used again (see `close`).
        if unsafe { a.close_plain_window(panicking) } {
            return;
        }
    }
    close_general(state, clock::raw(), panicking);
}

/// A host call that is longer than the floor, of a site with its own threshold, failed or
/// while a sink wants every record, and every backend's scope but a plain CUDA window's.
#[inline(never)]
fn close_general(state: &mut ManuallyDrop<State>, end: u64, panicking: bool) {
    if let State::Host(h) = &mut **state {
        h.error |= panicking;
        let span = std::mem::replace(&mut h.span, HostSpan::Off).close(h.error);
        // Only a call that may become a record pays for its span chain.
        h.spans = crate::spans::capture(span.as_ref());
    }
    // SAFETY: `state` is read once, here, and never again: the scope is being dropped.
    match unsafe { ManuallyDrop::take(state) } {
        State::Host(h) => h.close(end),
        State::Full(a) => a.close(end),
        State::Off => {}
    }
}

/// An async scope suspends with an attach guard open (held across an `.await`): its slot is
/// parked under the guard's scope id, which the scope takes (a host scope becomes a full one
/// with no GPU part yet), so that it resumes with that slot and collects the guard's
/// measurement when the guard is dropped in a later poll.
#[cfg(feature = "_wgpu")]
fn park_attachment(state: &mut State) {
    let host = match state {
        State::Host(h) => h,
        State::Full(a) => &mut a.host,
        State::Off => return,
    };
    if !host.attach_slot {
        return;
    }
    let Some((thread, scope_id)) = crate::wgpu::scope::attach_park() else { return };
    host.attach_slot = false;
    match std::mem::replace(state, State::Off) {
        State::Host(host) => {
            *state =
                State::Full(Active { host, scope_id, thread, memory_before: None, gpu: GpuScope::None, fields: None });
        }
        State::Full(mut a) => {
            (a.thread, a.scope_id) = (thread, scope_id);
            *state = State::Full(a);
        }
        State::Off => {}
    }
}

/// Takes this scope's slot off the `wgpu::attach` stack, with the measurement an attached
/// recorder left there: a host scope becomes a full one timed by that measurement.
#[cfg(feature = "_wgpu")]
fn collect_attachment(state: &mut State) {
    let host = match state {
        State::Host(h) => h,
        State::Full(a) => &mut a.host,
        State::Off => return,
    };
    if !std::mem::take(&mut host.attach_slot) {
        return;
    }
    let Some(((thread, scope_id), w)) = crate::wgpu::scope::attach_pop() else { return };
    match std::mem::replace(state, State::Off) {
        State::Host(host) => {
            *state = State::Full(Active {
                host,
                scope_id,
                thread,
                memory_before: None,
                gpu: GpuScope::Wgpu(w),
                fields: None,
            });
        }
        State::Full(mut a) => {
            if a.gpu.takes_attach() {
                (a.thread, a.scope_id) = (thread, scope_id);
                // A bracket the attachment replaces writes its end and leaves its batch.
                if let GpuScope::Wgpu(bracket) = std::mem::replace(&mut a.gpu, GpuScope::Wgpu(w)) {
                    bracket.supersede();
                }
            } else {
                w.forget();
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
        #[cfg(feature = "_wgpu")] attach_slot: bool,
    ) -> Host {
        Host {
            site,
            span,
            start,
            bytes,
            error: false,
            parent,
            spans: None,
            #[cfg(feature = "_wgpu")]
            attach_slot,
            #[cfg(feature = "nvtx")]
            nvtx: crate::nvtx::push(site),
        }
    }

    /// Pops this scope's NVTX range, if it pushed one: a range lives on one thread's stack.
    #[cfg(feature = "nvtx")]
    #[inline]
    fn pop_nvtx(&mut self) {
        if std::mem::take(&mut self.nvtx) {
            crate::nvtx::pop();
        }
    }

    /// A host-timed call that `close` could not count in place (its span already closed): one
    /// too short for its site's threshold is counted into its thread's ring all the same; a
    /// longer one (or a failed one) becomes a record.
    fn close(self, end: u64) {
        let duration_ns = clock::raw_delta_ns(self.start, end);
        if !self.error && !pipeline::wants(self.site, duration_ns) {
            crate::ring::push(self.site, end.saturating_sub(self.start), self.bytes);
            return;
        }
        Active { host: self, scope_id: 0, thread: 0, memory_before: None, gpu: GpuScope::None, fields: None }
            .hand_over(end);
    }
}

impl Active {
    /// Closes a synchronous CUDA scope under CUPTI with nothing but its call to hand over (no
    /// span, memory marks or error), as most are, in place: the call is read out of the state
    /// instead of moving the whole state (`scripts/count-window`). False for any other scope.
    ///
    /// # Safety
    /// On `true` the state was consumed: it is not used, nor dropped, again.
    #[cfg(feature = "cuda")]
    unsafe fn close_plain_window(&mut self, panicking: bool) -> bool {
        if !self.gpu.is_window() {
            return false;
        }
        let h = &mut self.host;
        if !matches!(h.span, HostSpan::Off) || self.memory_before.is_some() || h.error || panicking {
            return false;
        }
        // SAFETY: owned fields are moved out or dropped once, here; the rest own nothing.
        unsafe { std::ptr::drop_in_place(&mut h.spans) };
        // SAFETY: as above (`None` for every window: only a selected span's scope has fields).
        unsafe { std::ptr::drop_in_place(&mut self.fields) };
        let (thread, scope_id) = (self.thread, self.scope_id);
        // Built where the scope is queued, after its window's end is read (`cupti::window::close`).
        // Its ends are the window's, on CUPTI's clock (the start is in `h.start`).
        crate::cuda::cupti::ended_window(|host_end| {
            // SAFETY: as above; the closure runs once, so `parent` is moved out once.
            let parent = unsafe { std::ptr::read(&h.parent) };
            // As `Active::close` and `hand_over` describe it (a CUDA scope took its id at open).
            let spans = crate::spans::capture(None);
            let (site, host_start, bytes, error, memory, on_cupti_clock) =
                (h.site, h.start, h.bytes, false, None, true);
            let fields = None;
            Call {
                site,
                scope_id,
                thread,
                error,
                on_cupti_clock,
                host_start,
                host_end,
                bytes,
                memory,
                parent,
                spans,
                fields,
            }
        });
        true
    }

    fn close(mut self, end: u64) {
        if std::thread::panicking() {
            self.host.error = true;
        }
        let span = std::mem::replace(&mut self.host.span, HostSpan::Off).close(self.host.error);
        if matches!(self.gpu, GpuScope::None) && self.memory_before.is_none() && !self.host.error {
            let duration_ns = clock::raw_delta_ns(self.host.start, end);
            if !pipeline::wants(self.host.site, duration_ns) {
                crate::ring::push(self.host.site, end.saturating_sub(self.host.start), self.host.bytes);
                return;
            }
        }
        // A selected span's scope was given its own chain as the span closed (`set_chain`).
        if !self.host.site.is_span() {
            self.host.spans = crate::spans::capture(span.as_ref());
        }
        drop(span);
        self.hand_over(end);
    }

    /// Describes the finished call and hands it to its backend (or the pipeline).
    #[inline(never)]
    fn hand_over(mut self, host_end: u64) {
        let memory = self.memory_before.map(|before| Box::new((*before, crate::memory::mark())));
        if self.scope_id == 0 {
            (self.thread, self.scope_id) = thread::next_scope();
        }
        let host = self.host;
        let call = Call {
            site: host.site,
            scope_id: self.scope_id,
            thread: self.thread,
            error: host.error,
            on_cupti_clock: false, // a CUDA window puts its own ends in (`CudaScope::finish`)
            host_start: host.start,
            host_end,
            bytes: host.bytes,
            memory,
            parent: host.parent,
            spans: host.spans,
            fields: self.fields,
        };
        match self.gpu {
            GpuScope::None => pipeline::submit(call.into_record()),
            #[cfg(feature = "_wgpu")]
            GpuScope::Wgpu(w) => w.finish(call.into_record()),
            #[cfg(feature = "cuda")]
            GpuScope::Cuda(c) => c.finish(call),
        }
    }
}

/// An instrumented future is `Send` whenever the body's future is: the scope it holds across
/// `.await` must be.
#[allow(dead_code)]
fn _scope_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Scope>();
}
