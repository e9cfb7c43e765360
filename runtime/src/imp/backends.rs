//! The one core file that lists the GPU backends: the part of an open scope each backend owns
//! ([`GpuScope`], dispatched statically to [`BackendScope`]), and the per-thread stacks a scope
//! sits on while it runs ([`Stacks`]: NVTX ranges, the `wgpu::attach` slots). `scope.rs` calls
//! only what is here and names no backend. Adding a backend: docs/architecture.md, "Adding a
//! backend".

use crate::call::Call;
use crate::site::Site;

mod open;

/// What the scope asks of a backend's part of it. Implemented by each backend's scope type
/// (`cuda::CudaScope`, `wgpu::scope::WgpuScope`); every method but [`BackendScope::finish`]
/// has the behaviour of a backend without per-thread state.
pub(crate) trait BackendScope: Sized {
    /// The backend reads the call's ends itself, on its own clock (a CUPTI window), and can
    /// close a plain scope in place ([`BackendScope::close_in_place`]). The start it gave at
    /// open is then given up if the scope suspends: from there the host clock times it.
    #[inline(always)]
    fn own_clock(&self) -> bool {
        false
    }

    /// Whether a measurement attached to the scope (`gpuspan::wgpu::attach`) replaces this
    /// part: one that times the call no better than the attachment would.
    #[inline(always)]
    fn takes_attach(&self) -> bool {
        false
    }

    /// An async call stops running on this thread: per-thread state (CUPTI's correlation
    /// stack, the CUDA events' list) is left until [`BackendScope::resume`].
    #[inline(always)]
    fn suspend(&mut self, _scope_id: u64) {}

    /// An async call runs again, perhaps on another thread.
    #[inline(always)]
    fn resume(&mut self, _scope_id: u64) {}

    /// Closes a scope that has nothing but its call to hand over (no span, memory marks,
    /// error), as most of an [`BackendScope::own_clock`] backend's are: `call` builds the
    /// call from the end the backend reads. Only called when `own_clock` is true.
    #[inline(always)]
    fn close_in_place(&mut self, call: impl FnOnce(u64) -> Call) {
        let _ = call;
    }

    /// The scope ended: its record waits for the GPU's timing.
    fn finish(self, call: Call);

    /// Replaced by an attached measurement ([`BackendScope::takes_attach`]).
    #[inline(always)]
    fn supersede(self) {}

    /// A measurement no scope collects.
    #[inline(always)]
    fn forget(self) {}

    /// A selected span's scope tags its thread's GPU work around each entry of the span, on
    /// whichever thread enters it ([`span_enter`], [`span_exit`]).
    #[inline(always)]
    fn tags_span_entries(&self) -> bool {
        false
    }
}

/// A scope with no GPU part ([`GpuScope::None`]): timed by the host clock, handed straight to
/// the pipeline; an attached measurement replaces it.
#[derive(Debug)]
struct HostTimed;

impl BackendScope for HostTimed {
    #[inline(always)]
    fn takes_attach(&self) -> bool {
        true
    }

    #[inline(always)]
    fn finish(self, call: Call) {
        crate::collector::submit(call.into_record());
    }
}

/// The backend's part of an open scope: one variant per backend, whose payload is uninhabited
/// (and the variant takes no room) when the backend is not compiled in ([`Absent`]), so that a
/// scope costs no allocation or indirection and the dispatch names no feature.
#[derive(Debug)]
pub(crate) enum GpuScope {
    /// Timed by the host clock (tracking memory, or a backend that could not start).
    None,
    Wgpu(wgpu::Scope),
    Cuda(cuda::Scope),
    /// A selected span's scope where both time spans (CUPTI, and a registered wgpu device):
    /// boxed, as only spans have one.
    #[cfg(all(feature = "cuda", feature = "_wgpu"))]
    Both(Box<both::BothScope>),
}

/// A backend not compiled in: its scope type, which has no value.
#[derive(Debug)]
#[cfg_attr(all(feature = "cuda", feature = "_wgpu"), allow(dead_code))] // with both, unnamed
pub(crate) enum Absent {}

impl BackendScope for Absent {
    fn finish(self, _: Call) {
        match self {}
    }
}

/// `$call` with `$b` bound to the backend's part; `$none` (the same call on [`HostTimed`]) for
/// [`GpuScope::None`].
macro_rules! each_backend {
    ($self:expr, $b:ident => $call:expr, $none:expr) => {
        match $self {
            GpuScope::None => $none,
            GpuScope::Wgpu($b) => $call,
            GpuScope::Cuda($b) => $call,
            #[cfg(all(feature = "cuda", feature = "_wgpu"))]
            GpuScope::Both($b) => $call,
        }
    };
}

impl GpuScope {
    /// [`BackendScope::own_clock`].
    #[inline(always)]
    pub(crate) fn own_clock(&self) -> bool {
        each_backend!(self, b => BackendScope::own_clock(b), HostTimed.own_clock())
    }

    /// [`BackendScope::takes_attach`].
    #[inline(always)]
    pub(crate) fn takes_attach(&self) -> bool {
        each_backend!(self, b => BackendScope::takes_attach(b), HostTimed.takes_attach())
    }

    #[inline(always)]
    pub(crate) fn suspend(&mut self, scope_id: u64) {
        each_backend!(self, b => BackendScope::suspend(b, scope_id), HostTimed.suspend(scope_id))
    }

    #[inline(always)]
    pub(crate) fn resume(&mut self, scope_id: u64) {
        each_backend!(self, b => BackendScope::resume(b, scope_id), HostTimed.resume(scope_id))
    }

    /// [`BackendScope::close_in_place`].
    #[inline(always)]
    pub(crate) fn close_in_place(&mut self, call: impl FnOnce(u64) -> Call) {
        each_backend!(self, b => BackendScope::close_in_place(b, call), HostTimed.close_in_place(call))
    }

    /// Hands the finished call to its backend, or to the pipeline for host timing.
    #[inline(always)]
    pub(crate) fn finish(self, call: Call) {
        each_backend!(self, b => BackendScope::finish(b, call), HostTimed.finish(call))
    }

    /// [`BackendScope::tags_span_entries`].
    pub(crate) fn tags_span_entries(&self) -> bool {
        each_backend!(self, b => BackendScope::tags_span_entries(b), HostTimed.tags_span_entries())
    }

    /// A measurement attached to the scope: it replaces this part if this part takes one
    /// (which is then superseded), else it is forgotten. Whether it was taken.
    pub(crate) fn take_attached(&mut self, attached: GpuScope) -> bool {
        if self.takes_attach() {
            let replaced = std::mem::replace(self, attached);
            each_backend!(replaced, b => BackendScope::supersede(b), HostTimed.supersede());
            true
        } else {
            each_backend!(attached, b => BackendScope::forget(b), HostTimed.forget());
            false
        }
    }
}

/// The backend that times bare scopes (no GPU resource in the signature) once it started, if
/// any: CUDA under CUPTI or events attributes a bare site's CUDA work to it. One relaxed load.
#[inline(always)]
pub(crate) fn watches_bare() -> bool {
    cuda::watching()
}

/// Whether any backend compiled in tags span entries ([`BackendScope::tags_span_entries`]):
/// without one, the span layer keeps no per-thread entries.
pub(crate) const SPAN_ENTRIES: bool = cfg!(feature = "cuda");

/// A span is selected (`span_scopes`): a backend that must be timing before the framework's
/// first launch, which nothing annotated announces, starts now (CUDA, where a driver and a
/// device are present).
#[inline(always)]
pub(crate) fn span_selected() {
    cuda::start_for_spans();
}

/// `init()` ran: a backend that a program uses before its first annotated call starts now
/// (CUDA, in a program that uses it, so that work launched before is seen).
pub(crate) fn at_init() {
    cuda::start_at_init();
}

/// The run ends, after the sinks: a backend says what it could not see (CUDA: bare kernels that
/// never started its timing).
pub(crate) fn at_shutdown() {
    cuda::at_shutdown();
}

/// The backend a selected span's site names: the one that can time spans in this process (its
/// rows are labelled by the backend that did, `SiteSummary::backend_label`).
pub(crate) fn span_backend() -> crate::site::Backend {
    use crate::site::Backend;
    if cfg!(feature = "_wgpu") {
        Backend::Wgpu
    } else if cfg!(feature = "cuda") {
        Backend::Cuda
    } else {
        Backend::Host
    }
}

/// The GPU part of a selected span's scope: CUPTI's tag when it times this process, a wgpu
/// bracket on each registered device, or both (`BothScope`: the one the program used times it).
pub(crate) fn span_gpu(site: &'static Site) -> GpuScope {
    if let Some(c) = cuda::span_scope() {
        return match wgpu::span_bracket_if_registered(site) {
            Some(w) => both::both(w, c),
            None => GpuScope::Cuda(c),
        };
    }
    wgpu::span_bracket(site)
}

/// What a selected span keeps for the backends that give it the work begun on the threads that
/// entered it: the passes of instrumented wgpu devices (`wgpu/pass_sum.rs`). Zero-sized without
/// wgpu. A clone shares the same work (the span's life keeps one for attribution by time).
#[derive(Debug, Default, Clone)]
pub(crate) struct SpanWork {
    passes: wgpu::SpanPasses,
}

/// A selected span is entered on this thread (every entry, whatever its scope's backend).
pub(crate) fn span_work_enter(span: u64, work: &SpanWork) {
    wgpu::span_entered(span, &work.passes);
}

/// This thread's entry of a selected span ends.
pub(crate) fn span_work_exit(span: u64) {
    wgpu::span_exited(span);
}

/// The span closes: the work begun for it replaces its scope's GPU part (`gpu`, a bracket), so
/// that the span is timed by the sum of its passes.
pub(crate) fn span_work_close(work: &SpanWork, gpu: Option<&mut GpuScope>) {
    if let Some(summed) = wgpu::summed(&work.passes) {
        match gpu {
            Some(gpu) => {
                gpu.take_attached(GpuScope::Wgpu(summed));
            }
            None => summed.forget(),
        }
    }
}

/// How a backend tagged one entry of a selected span on a thread ([`span_enter`]), for
/// [`span_exit`] to end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanEntry {
    /// Nothing tagged (nothing to end).
    Untagged,
    /// A window of the thread's time opened at this reading of the backend's clock (CUPTI).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Window(u64),
    /// The scope's id pushed (CUPTI's external correlation id), to pop.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Pushed,
}

/// A selected span whose scope [tags entries](BackendScope::tags_span_entries) is entered on
/// this thread: its backend gives it the thread's GPU work until [`span_exit`] (CUPTI: a
/// window of the thread's time, else its id pushed).
#[inline]
pub(crate) fn span_enter(scope_id: u64) -> SpanEntry {
    cuda::span_enter(scope_id)
}

/// The entry [`span_enter`] made on this thread ends.
#[inline]
pub(crate) fn span_exit(site: &'static Site, scope_id: u64, entry: SpanEntry) {
    cuda::span_exit(site, scope_id, entry);
}

/// The per-thread stacks an open scope sits on while it runs on a thread: an NVTX range (for
/// Nsight, feature `nvtx`) and a slot on the `wgpu::attach` stacks. Zero-sized without them.
#[derive(Debug, Default)]
pub(crate) struct Stacks {
    /// This scope's slot on its thread's `wgpu::attach` stack.
    attach: wgpu::AttachSlot,
    /// This site's NVTX range on the current thread, if pushed (a tool is attached).
    nvtx: nvtx::Range,
}

impl Stacks {
    /// A scope opens on this thread: the slots that must be there before its clock starts.
    /// `timed`: its GPU part times it already (an attachment is not taken).
    #[inline(always)]
    pub(crate) fn push(site: &'static Site, timed: bool) -> Stacks {
        Stacks { attach: wgpu::AttachSlot::push(site, timed), ..Stacks::default() }
    }

    /// On no thread's stacks (a selected span's scope, entered on any thread).
    #[inline(always)]
    pub(crate) fn none() -> Stacks {
        Stacks::default()
    }

    /// The ranges a tool shows for the call, pushed once its clock started.
    #[inline(always)]
    pub(crate) fn push_ranges(&mut self, site: &'static Site) {
        self.nvtx.push(site);
    }

    /// Pops this scope's ranges, if it pushed any: a range lives on one thread's stack.
    #[inline(always)]
    pub(crate) fn pop_ranges(&mut self) {
        self.nvtx.pop();
    }

    /// An async scope runs again on this thread: `parked_as` is its scope id if it may have a
    /// slot parked (held by a guard across an `.await`), which it finds again; else it pushes
    /// fresh ones.
    #[inline(always)]
    pub(crate) fn resume(&mut self, site: &'static Site, parked_as: Option<u64>, timed: bool) {
        self.attach.resume(site, parked_as, timed);
    }

    /// A scope closing while suspended with a guard open (a cancelled future) takes its parked
    /// slot back, with the measurement the guard left in it as it was dropped.
    #[inline(always)]
    pub(crate) fn unpark_to_close(&mut self, site: &'static Site, scope_id: u64) {
        self.attach.unpark_to_close(site, scope_id);
    }

    /// An async scope suspends with an attach guard open (held across an `.await`): its slot is
    /// parked under the guard's scope id (with its thread), which the scope takes.
    #[inline(always)]
    pub(crate) fn park(&mut self) -> Option<(u32, u64)> {
        self.attach.park()
    }

    /// Takes the scope's slot off the `wgpu::attach` stack, with the measurement an attached
    /// recorder left there and its ids.
    #[inline(always)]
    pub(crate) fn collect(&mut self) -> Option<((u32, u64), GpuScope)> {
        self.attach.collect().map(|(ids, w)| (ids, GpuScope::Wgpu(w)))
    }
}

/// The wgpu backend's side of the seam, with it compiled in: its scope, span brackets, the
/// passes a span sums, and the `wgpu::attach` slot.
#[cfg(feature = "_wgpu")]
mod wgpu {
    use super::{GpuScope, SpanWork};
    use crate::site::Site;
    pub(crate) use crate::wgpu::pass_sum::{span_entered, span_exited, SpanPasses};
    use crate::wgpu::scope as wgpu_scope;
    pub(crate) use crate::wgpu::scope::WgpuScope as Scope;

    pub(super) fn span_bracket(site: &'static Site) -> GpuScope {
        wgpu_scope::span_bracket(site)
    }

    /// A bracket on a device registered with its queue, if there is one.
    pub(super) fn span_bracket_if_registered(site: &'static Site) -> Option<Scope> {
        match wgpu_scope::span_bracket_if_registered(site) {
            Some(GpuScope::Wgpu(w)) => Some(w),
            _ => None,
        }
    }

    /// The scope timed by the passes a span's threads ran, if they ran any.
    pub(super) fn summed(passes: &SpanPasses) -> Option<Scope> {
        passes.take().and_then(Scope::summed)
    }

    impl SpanWork {
        /// The passes instrumented devices ran for the span.
        pub(crate) fn passes(&self) -> &SpanPasses {
            &self.passes
        }
    }

    /// Whether the scope has a slot on its thread's `wgpu::attach` stack.
    #[derive(Debug, Default)]
    pub(super) struct AttachSlot(bool);

    impl AttachSlot {
        #[inline(always)]
        pub(super) fn push(site: &'static Site, timed: bool) -> AttachSlot {
            AttachSlot(wgpu_scope::attach_push(site, timed))
        }

        #[inline(always)]
        pub(super) fn resume(&mut self, site: &'static Site, parked_as: Option<u64>, timed: bool) {
            let parked = parked_as.is_some_and(|id| wgpu_scope::attach_unpark(id, site, timed));
            self.0 = parked || wgpu_scope::attach_push(site, timed);
        }

        #[inline(always)]
        pub(super) fn unpark_to_close(&mut self, site: &'static Site, scope_id: u64) {
            if !self.0 && wgpu_scope::attach_unpark(scope_id, site, false) {
                self.0 = true;
            }
        }

        #[inline(always)]
        pub(super) fn park(&mut self) -> Option<(u32, u64)> {
            if self.0 {
                let ids = wgpu_scope::attach_park()?;
                self.0 = false;
                return Some(ids);
            }
            None
        }

        #[inline(always)]
        pub(super) fn collect(&mut self) -> Option<((u32, u64), Scope)> {
            if std::mem::take(&mut self.0) {
                return wgpu_scope::attach_pop();
            }
            None
        }
    }
}

/// Without wgpu: no scope, no brackets, no passes, no slot (all zero-sized).
#[cfg(not(feature = "_wgpu"))]
mod wgpu {
    pub(crate) use super::Absent as Scope;
    use super::GpuScope;
    use crate::site::Site;

    pub(super) fn span_bracket(_: &'static Site) -> GpuScope {
        GpuScope::None
    }

    pub(super) fn span_bracket_if_registered(_: &'static Site) -> Option<Scope> {
        None
    }

    #[derive(Debug, Default, Clone)]
    pub(super) struct SpanPasses;

    pub(super) fn span_entered(_: u64, _: &SpanPasses) {}

    pub(super) fn span_exited(_: u64) {}

    pub(super) fn summed(_: &SpanPasses) -> Option<Scope> {
        None
    }

    #[derive(Debug, Default)]
    pub(super) struct AttachSlot;

    impl AttachSlot {
        #[inline(always)]
        pub(super) fn push(_: &'static Site, _: bool) -> AttachSlot {
            AttachSlot
        }

        #[inline(always)]
        pub(super) fn resume(&mut self, _: &'static Site, _: Option<u64>, _: bool) {}

        #[inline(always)]
        pub(super) fn unpark_to_close(&mut self, _: &'static Site, _: u64) {}

        #[inline(always)]
        pub(super) fn park(&mut self) -> Option<(u32, u64)> {
            None
        }

        #[inline(always)]
        pub(super) fn collect(&mut self) -> Option<((u32, u64), Scope)> {
            None
        }
    }
}

/// The CUDA backend's side of the seam, with it compiled in: its scope, bare scopes, and the
/// tags of span entries (CUPTI).
#[cfg(feature = "cuda")]
mod cuda {
    pub(crate) use crate::cuda::{
        at_shutdown, span_enter, span_exit, span_scope, start_at_init, start_for_spans, watching, CudaScope as Scope,
    };
}

/// Without CUDA: no scope, nothing watches bare scopes, span entries are not tagged.
#[cfg(not(feature = "cuda"))]
mod cuda {
    pub(crate) use super::Absent as Scope;
    use super::SpanEntry;
    use crate::site::Site;

    #[inline(always)]
    pub(super) fn watching() -> bool {
        false
    }

    #[inline(always)]
    pub(super) fn start_for_spans() {}

    pub(super) fn start_at_init() {}

    pub(super) fn at_shutdown() {}

    pub(super) fn span_scope() -> Option<Scope> {
        None
    }

    #[inline]
    pub(super) fn span_enter(_: u64) -> SpanEntry {
        SpanEntry::Untagged
    }

    #[inline]
    pub(super) fn span_exit(_: &'static Site, _: u64, _: SpanEntry) {}
}

/// A selected span's two parts, when both backends are compiled in: its wgpu brackets and its
/// CUDA tag. A framework user's binary often has both backends compiled in and CUDA able to
/// start on an NVIDIA machine; the span is timed by the one its program used (decision 55): the
/// brackets keep the record when a registered device took a submission while the span was open,
/// and CUDA's part then makes a record only if CUDA work came (`Call::only_if_gpu`); else the
/// CUDA part alone makes it.
#[cfg(all(feature = "cuda", feature = "_wgpu"))]
mod both {
    use super::{cuda, wgpu, BackendScope, GpuScope};
    use crate::call::Call;

    #[derive(Debug)]
    pub(crate) struct BothScope {
        wgpu: wgpu::Scope,
        cuda: cuda::Scope,
    }

    /// The scope of a span both backends time.
    pub(super) fn both(wgpu: wgpu::Scope, cuda: cuda::Scope) -> GpuScope {
        GpuScope::Both(Box::new(BothScope { wgpu, cuda }))
    }

    impl BackendScope for Box<BothScope> {
        fn suspend(&mut self, scope_id: u64) {
            self.cuda.suspend(scope_id);
        }

        fn resume(&mut self, scope_id: u64) {
            self.cuda.resume(scope_id);
        }

        fn finish(self, call: Call) {
            let BothScope { wgpu, cuda } = *self;
            let mut for_cuda = call.clone();
            if wgpu.finish_span_if_used(call.into_record()).is_none() {
                for_cuda.only_if_gpu = true; // the brackets have the record
            }
            cuda.finish(for_cuda);
        }

        fn supersede(self) {
            let BothScope { wgpu, cuda } = *self;
            wgpu.supersede();
            cuda.supersede();
        }

        fn forget(self) {
            let BothScope { wgpu, cuda } = *self;
            wgpu.forget();
            cuda.forget();
        }

        fn tags_span_entries(&self) -> bool {
            true
        }
    }
}

/// With one backend or none, a span has one part: the CUDA one where it is compiled in (then
/// wgpu's is absent and this is never called).
#[cfg(not(all(feature = "cuda", feature = "_wgpu")))]
mod both {
    use super::{cuda, wgpu, GpuScope};

    pub(super) fn both(_: wgpu::Scope, cuda: cuda::Scope) -> GpuScope {
        GpuScope::Cuda(cuda)
    }
}

/// The NVTX ranges (for Nsight), with the feature: NVTX3's injection protocol, and whether
/// this scope pushed its site's range on the current thread.
#[cfg(feature = "nvtx")]
mod nvtx;

/// Without `nvtx`: no ranges.
#[cfg(not(feature = "nvtx"))]
mod nvtx {
    use crate::site::Site;

    #[derive(Debug, Default)]
    pub(super) struct Range;

    impl Range {
        #[inline(always)]
        pub(super) fn push(&mut self, _: &'static Site) {}

        #[inline(always)]
        pub(super) fn pop(&mut self) {}
    }
}

#[cfg(test)]
mod tests {
    use super::{GpuScope, SPAN_ENTRIES};

    /// Under CUPTI a span's scope pushes its id around each entry (as selected.rs did by
    /// matching `GpuScope::Cuda`); a host-timed one does not.
    #[test]
    fn cupti_span_scopes_tag_their_entries() {
        assert!(!GpuScope::None.tags_span_entries());
        #[cfg(feature = "cuda")]
        assert!(GpuScope::Cuda(crate::cuda::CudaScope::Cupti { pushed: false }).tags_span_entries());
        assert_eq!(SPAN_ENTRIES, cfg!(feature = "cuda"));
    }
}
