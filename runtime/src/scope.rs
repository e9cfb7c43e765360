//! The RAII scope every annotated call opens. Entering costs one relaxed load when gpuspan is
//! off; leaving hands the measurement to its backend, or straight to the pipeline for host
//! timing. Nothing here blocks on the GPU.

use crate::probe::Exit;
use crate::record::{Interval, Record};
use crate::site::Site;
use crate::{clock, pipeline, switch, thread};
use std::mem::ManuallyDrop;
use tracing::Span;

/// An open measurement of one call. Created by the code `#[gpu_kernel]` and `#[gpu_transfer]`
/// generate; ends when dropped, also when the call unwinds.
#[derive(Debug)]
#[must_use]
pub struct Scope {
    /// `ManuallyDrop` so that the field has no drop glue of its own: `Drop for Scope` takes it
    /// out, and a scope opened while off needs no out-of-line drop call.
    active: ManuallyDrop<Option<Active>>,
}

/// The host `tracing` span: entered for the whole call of a sync function, per poll for async.
///
/// A plain [`Span`] entered through its dispatcher rather than an `EnteredSpan`, so that a
/// [`Scope`] is `Send` and an instrumented future can be `tokio::spawn`ed. A sync scope is a
/// hidden local of a function that cannot suspend, so it is exited on the thread that entered it.
#[derive(Debug)]
enum HostSpan {
    /// Entered on the current thread; exited when the scope closes.
    Entered(Span),
    /// Not entered: an async call's span, entered around each poll.
    Idle(Span),
    /// No subscriber wants the span (or it was closed): nothing to enter, exit or drop.
    Off,
}

impl HostSpan {
    #[inline]
    fn enter(span: Span) -> HostSpan {
        if span.is_disabled() {
            HostSpan::Off
        } else {
            span.with_subscriber(|(id, dispatch)| dispatch.enter(id));
            HostSpan::Entered(span)
        }
    }

    /// Leaves the span entered by [`HostSpan::enter`] and keeps it, not entered.
    fn detach(&mut self) {
        if let HostSpan::Entered(span) = std::mem::replace(self, HostSpan::Off) {
            span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
            *self = HostSpan::Idle(span);
        }
    }

    /// Exits the span, marking it as an error first if the call failed, and hands it back to be
    /// dropped once the call is described (its parent names the call's application spans).
    #[inline]
    fn close(&mut self, error: bool) -> Option<Span> {
        let span = match std::mem::replace(self, HostSpan::Off) {
            HostSpan::Entered(span) => {
                span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
                span
            }
            HostSpan::Idle(s) => s,
            HostSpan::Off => return None,
        };
        if error {
            span.record("error", true);
        }
        Some(span)
    }
}

#[derive(Debug)]
pub(crate) struct Active {
    pub site: &'static Site,
    /// 0 for a host-timed scope until it needs a record: most never do.
    pub scope_id: u64,
    pub thread: u32,
    span: HostSpan,
    /// Raw clock ticks; converted when the record is built.
    host_start: u64,
    bytes: Option<u64>,
    error: bool,
    /// Taken before the call's clock starts, for `track_memory` sites.
    memory_before: Option<crate::memory::MemoryMark>,
    pub gpu: GpuScope,
    /// This scope has a slot on its thread's `wgpu::attach` stack.
    #[cfg(feature = "wgpu")]
    attach_slot: bool,
    /// Where this call's spans hang in the trace; read before the host span is entered.
    parent: crate::parent::Parent,
    /// The application spans the call was made in: taken when the call becomes a record, and
    /// only while a capture wants them.
    spans: crate::spans::Chain,
    /// An NVTX range of this site is pushed on the current thread (a tool is attached).
    #[cfg(feature = "nvtx")]
    nvtx: bool,
}

/// The backend's part of an open scope.
#[derive(Debug)]
pub(crate) enum GpuScope {
    None,
    #[cfg(feature = "wgpu")]
    Wgpu(crate::wgpu::WgpuScope),
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaScope),
}

impl GpuScope {
    #[allow(unused_variables)] // without backends with per-thread state
    fn suspend(&mut self, scope_id: u64) {
        #[cfg(feature = "cuda")]
        if let GpuScope::Cuda(c) = self {
            c.suspend(scope_id);
        }
        #[cfg(feature = "wgpu")]
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
        Scope { active: ManuallyDrop::new(None) }
    }

    /// A scope timed by the host clock only.
    #[inline]
    pub fn host(site: &'static Site, span: Span, bytes: Option<u64>) -> Scope {
        // Once CUDA is timed, a bare site's CUDA work is attributed to it (one load otherwise).
        #[cfg(feature = "cuda")]
        if crate::cuda::watching() {
            return Self::cuda_watched(site, span, bytes);
        }
        Self::open_with(site, span, bytes, None::<fn(u64) -> GpuScope>)
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
        Self::open_with(site, span, bytes, Some(start_gpu))
    }

    #[inline(always)]
    fn open_with(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        start_gpu: Option<impl FnOnce(u64) -> GpuScope>,
    ) -> Scope {
        if !switch::is_on() {
            return Scope { active: ManuallyDrop::new(None) };
        }
        site.mark_entered();
        // A backend needs the id now (it tags GPU work with it); a host scope takes one only if
        // it ends up as a record.
        let (thread, scope_id) = if start_gpu.is_some() { thread::next_scope() } else { (0, 0) };
        let memory_before = site.desc.track_memory.then(crate::memory::mark);
        let host_start = clock::raw();
        let gpu = match start_gpu {
            Some(start) => start(scope_id),
            None => GpuScope::None,
        };
        #[cfg(feature = "wgpu")]
        let attach_slot = crate::wgpu::attach::push(site, !matches!(gpu, GpuScope::None));
        #[cfg(feature = "nvtx")]
        let nvtx = crate::nvtx::push(site);
        Scope {
            active: ManuallyDrop::new(Some(Active {
                site,
                scope_id,
                thread,
                parent: crate::parent::capture(),
                spans: None,
                span: HostSpan::enter(span),
                host_start,
                bytes,
                error: false,
                memory_before,
                gpu,
                #[cfg(feature = "wgpu")]
                attach_slot,
                #[cfg(feature = "nvtx")]
                nvtx,
            })),
        }
    }

    /// Measuring (gpuspan was on when the scope opened).
    #[allow(dead_code)] // used by the backend features
    pub(crate) fn is_active(&self) -> bool {
        self.active.is_some()
    }

    #[allow(dead_code)] // used by the backend features
    pub(crate) fn gpu_mut(&mut self) -> Option<&mut GpuScope> {
        self.active.as_mut().map(|a| &mut a.gpu)
    }

    /// The value leaving the function by `return` or its tail.
    #[inline]
    pub fn exit(&mut self, exit: Exit) {
        if let (Some(a), Exit::Error) = (&mut *self.active, exit) {
            a.error = true;
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
        if let Some(a) = &mut *self.active {
            #[cfg(feature = "wgpu")]
            a.collect_attachment();
            a.gpu.suspend(a.scope_id);
            // An NVTX range lives on one thread's stack: popped at every suspension.
            #[cfg(feature = "nvtx")]
            if std::mem::take(&mut a.nvtx) {
                crate::nvtx::pop();
            }
        }
    }

    /// An async call runs again, perhaps on another thread.
    pub(crate) fn resume(&mut self) {
        if let Some(a) = &mut *self.active {
            #[cfg(feature = "wgpu")]
            {
                a.attach_slot = crate::wgpu::attach::push(a.site, !matches!(a.gpu, GpuScope::None));
            }
            a.gpu.resume(a.scope_id);
            #[cfg(feature = "nvtx")]
            {
                a.nvtx = crate::nvtx::push(a.site);
            }
        }
    }

    /// For async functions: the span is entered per poll instead of for the whole call.
    pub(crate) fn detach_span(&mut self) {
        self.suspend();
        if let Some(a) = &mut *self.active {
            a.span.detach();
        }
    }

    /// The host span, for entering it around a poll.
    pub(crate) fn span(&self) -> Option<&Span> {
        match &self.active.as_ref()?.span {
            HostSpan::Idle(s) => Some(s),
            HostSpan::Entered(_) | HostSpan::Off => None,
        }
    }
}

impl Drop for Scope {
    /// Inlined so that a scope opened while gpuspan is off costs nothing more to close.
    #[inline]
    fn drop(&mut self) {
        if self.active.is_some() {
            close(&mut self.active);
        }
    }
}

/// Ends the measurement of an open scope and consumes its state (`slot` is never used again).
/// Out of line, so the caller's code stays small; works in place, because `Active` is large
/// and the common case (a short host call, only counted) needs none of it moved.
#[inline(never)]
fn close(slot: &mut ManuallyDrop<Option<Active>>) {
    let host_end = clock::raw();
    let Some(a) = slot.as_mut() else { return };
    if std::thread::panicking() {
        a.error = true;
    }
    let host_span = a.span.close(a.error);
    #[cfg(feature = "nvtx")]
    if std::mem::take(&mut a.nvtx) {
        crate::nvtx::pop();
    }
    #[cfg(feature = "wgpu")]
    a.collect_attachment();
    // The common case of a host-timed call too short to export: count it and stop, without
    // building a record.
    if matches!(a.gpu, GpuScope::None) && a.memory_before.is_none() && !a.error {
        let duration_ns = clock::raw_delta_ns(a.host_start, host_end);
        if !pipeline::wants(a.site, duration_ns) {
            crate::ring::push(a.site, duration_ns, a.bytes);
            // SAFETY: `slot` is never read again: the scope is being dropped.
            unsafe { ManuallyDrop::drop(slot) };
            return;
        }
    }
    // Only a call that becomes a record pays for its span chain.
    a.spans = crate::spans::capture(host_span.as_ref());
    drop(host_span);
    // SAFETY: as above.
    if let Some(a) = unsafe { ManuallyDrop::take(slot) } {
        a.hand_over(host_end);
    }
}

impl Active {
    /// Takes this scope's slot off the `wgpu::attach` stack, with the measurement an attached
    /// recorder left there.
    #[cfg(feature = "wgpu")]
    fn collect_attachment(&mut self) {
        if !std::mem::take(&mut self.attach_slot) {
            return;
        }
        if let Some(((thread, scope_id), w)) = crate::wgpu::attach::pop() {
            if matches!(self.gpu, GpuScope::None) {
                (self.thread, self.scope_id) = (thread, scope_id);
                self.gpu = GpuScope::Wgpu(w);
            } else {
                w.forget();
            }
        }
    }

    /// Describes the finished call and hands it to its backend (or the pipeline).
    fn hand_over(mut self, host_end: u64) {
        let memory = self.memory_before.map(|before| Box::new((before, crate::memory::mark())));
        if self.scope_id == 0 {
            (self.thread, self.scope_id) = thread::next_scope();
        }
        let call = Call {
            site: self.site,
            scope_id: self.scope_id,
            thread: self.thread,
            error: self.error,
            host_start: self.host_start,
            host_end,
            bytes: self.bytes,
            memory,
            parent: self.parent,
            spans: self.spans,
        };
        match self.gpu {
            GpuScope::None => pipeline::submit(call.into_record()),
            #[cfg(feature = "wgpu")]
            GpuScope::Wgpu(w) => w.finish(call.into_record()),
            #[cfg(feature = "cuda")]
            GpuScope::Cuda(c) => c.finish(call),
        }
    }
}

/// A finished call as its scope saw it, before it becomes a [`Record`]: small (the clock still
/// raw, memory marks boxed), so that a backend that resolves records on another thread (CUPTI)
/// hands over ~100 bytes instead of a whole record and does the conversion there.
#[derive(Debug)]
pub(crate) struct Call {
    pub site: &'static Site,
    pub scope_id: u64,
    pub thread: u32,
    pub error: bool,
    /// Raw host clock readings.
    host_start: u64,
    host_end: u64,
    bytes: Option<u64>,
    memory: Option<Box<(crate::memory::MemoryMark, crate::memory::MemoryMark)>>,
    parent: crate::parent::Parent,
    spans: crate::spans::Chain,
}

impl Call {
    pub(crate) fn into_record(self) -> Record {
        let host = Interval { start_ns: clock::raw_to_ns(self.host_start), end_ns: clock::raw_to_ns(self.host_end) };
        let mut record = Record::new(self.site, self.scope_id, self.thread, host);
        record.error = self.error;
        record.bytes = self.bytes;
        record.memory = self.memory.map(|m| *m);
        record.parent = self.parent;
        record.spans = self.spans;
        record
    }
}

/// An instrumented future is `Send` whenever the body's future is: the scope it holds across
/// `.await` must be.
#[allow(dead_code)]
fn _scope_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Scope>();
}
