//! A scope's wgpu part, of whichever major its resources are of, for the rest of gpuspan: the
//! scopes the generated code opens, the `attach` stacks of the majors compiled in, and the
//! rewritten submissions of a bracketed body (`backend/bracket.rs`).

use crate::backends::GpuScope;
use crate::record::Record;
use crate::site::Site;
use crate::submit_probe::SubmitProbe;
use crate::wgpu::api;
use crate::wgpu::handles::AsHandle;
use std::iter::Chain;
use std::option::IntoIter;

macro_rules! scope_of_majors {
    ($($variant:ident($module:ident)),* $(,)?) => {
        /// The wgpu part of an open scope: the backend's, of its resources' major.
        #[derive(Debug)]
        pub(crate) enum WgpuScope {
            $(
                $variant(crate::wgpu::$module::backend::WgpuScope),
            )*
        }

        /// What an async body's [`BracketHandle`] holds: the bracket's major's.
        #[derive(Debug)]
        pub(crate) enum HandleOf {
            $(
                $variant(crate::wgpu::$module::backend::bracket::Shared),
            )*
        }

        $(
            impl From<crate::wgpu::$module::backend::WgpuScope> for WgpuScope {
                fn from(w: crate::wgpu::$module::backend::WgpuScope) -> WgpuScope {
                    WgpuScope::$variant(w)
                }
            }

            impl crate::wgpu::$module::backend::WgpuScope {
                /// This major's part of `scope`, when it is of this major.
                pub(crate) fn of_mut(scope: &mut WgpuScope) -> Option<&mut Self> {
                    #[allow(unreachable_patterns)] // one major compiled in
                    match scope {
                        WgpuScope::$variant(w) => Some(w),
                        _ => None,
                    }
                }
            }

            impl crate::wgpu::$module::backend::bracket::Shared {
                /// This major's handle, when `handle` is of this major.
                pub(crate) fn of(handle: &HandleOf) -> Option<&Self> {
                    #[allow(unreachable_patterns)] // one major compiled in
                    match handle {
                        HandleOf::$variant(s) => Some(s),
                        _ => None,
                    }
                }
            }
        )*

        impl WgpuScope {
            /// A scope timed by the passes of instrumented devices (`pass_sum.rs`), of whichever
            /// major: its record waits for them all, whatever their major.
            pub(crate) fn summed(sum: crate::wgpu::pass_sum::PassSum) -> Option<WgpuScope> {
                let mut sum = Some(sum);
                $(
                    if let Some(s) = sum.take() {
                        return Some(WgpuScope::$variant(crate::wgpu::$module::backend::WgpuScope::Summed(s)));
                    }
                )*
                drop(sum);
                None
            }

            /// A queue bracket, which an attached encoder replaces.
            pub(crate) fn is_bracket(&self) -> bool {
                match self {
                    $(WgpuScope::$variant(w) => w.is_bracket(),)*
                }
            }

            /// An async scope stops running on this thread.
            pub(crate) fn suspend(&mut self) {
                match self {
                    $(WgpuScope::$variant(w) => w.suspend(),)*
                }
            }

            /// An async scope runs again on this thread: when its passes time it, those it begins
            /// now (on a device of any major) are summed with the ones before its `.await`.
            pub(crate) fn resume(&self) {
                let sum = match self {
                    $(WgpuScope::$variant(w) => w.summed(),)*
                };
                if let Some(sum) = sum {
                    $(
                        crate::wgpu::$module::backend::attach::resume_summed(sum.clone());
                    )*
                }
            }

            /// A measurement no scope will collect.
            pub(crate) fn forget(self) {
                match self {
                    $(WgpuScope::$variant(w) => w.forget(),)*
                }
            }

            /// Replaced by an attached encoder's measurement.
            pub(crate) fn supersede(self) {
                match self {
                    $(WgpuScope::$variant(w) => w.supersede(),)*
                }
            }

            pub(crate) fn finish(self, record: Record) {
                match self {
                    $(WgpuScope::$variant(w) => w.finish(record),)*
                }
            }

            /// A selected span's brackets beside another backend's part: the record back when
            /// no device took a submission while the span was open.
            #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
            pub(crate) fn finish_span_if_used(self, record: Record) -> Option<Record> {
                match self {
                    $(WgpuScope::$variant(w) => w.finish_span_if_used(record),)*
                }
            }

            pub(super) fn bracket_handle(&mut self) -> Option<HandleOf> {
                match self {
                    $(WgpuScope::$variant(w) => w.bracket_handle().map(HandleOf::$variant),)*
                }
            }

            pub(super) fn offer_bracket_device(&self) {
                match self {
                    $(WgpuScope::$variant(w) => w.offer_bracket_device(),)*
                }
            }

            pub(super) fn offer_pass_target(&self) {
                match self {
                    $(WgpuScope::$variant(w) => w.offer_pass_target(),)*
                }
            }
        }

        /// The selected span's bracket, on the first major with a device registered with its
        /// queue.
        pub(crate) fn span_bracket(site: &'static Site) -> GpuScope {
            span_bracket_if_registered(site).unwrap_or_else(|| {
                site.timed_on_host("no wgpu device registered with its queue");
                GpuScope::None
            })
        }

        /// [`span_bracket`], `None` (and no reason kept) when no device is registered with its
        /// queue: another backend may time the span.
        pub(crate) fn span_bracket_if_registered(site: &'static Site) -> Option<GpuScope> {
            $(
                if let Some(gpu) = crate::wgpu::$module::backend::span_bracket(site) {
                    return Some(gpu);
                }
            )*
            None
        }

        /// The adapter the registered device `id` came from (device ids are per major: with two
        /// majors' devices registered, the first major's).
        #[cfg(feature = "_devices")] // read by the device monitor
        pub(crate) fn adapter_info(id: u32) -> Option<crate::wgpu::AdapterFacts> {
            $(
                if let Some(info) = crate::wgpu::$module::backend::adapter_info(id) {
                    return Some(info);
                }
            )*
            None
        }

        // The `attach` stacks, one per major (`backend/attach.rs`): a scope has a slot on each.
        // With one major compiled in, each is that major's call.

        /// A scope opens (or an async one resumes) on this thread. Whether its slots were pushed.
        pub(crate) fn attach_push(site: &'static Site, timed: bool) -> bool {
            let mut pushed = true;
            $(
                pushed &= crate::wgpu::$module::backend::attach::push(site, timed);
            )*
            pushed
        }

        /// The innermost scope closes (or suspends): the attachment a guard left, of any major
        /// (a second one, of another major in the same call, is not timed).
        pub(crate) fn attach_pop() -> Option<((u32, u64), WgpuScope)> {
            let mut found: Option<((u32, u64), WgpuScope)> = None;
            $(
                if let Some((ids, w)) = crate::wgpu::$module::backend::attach::pop() {
                    match found {
                        None => found = Some((ids, WgpuScope::$variant(w))),
                        Some(_) => w.forget(),
                    }
                }
            )*
            found
        }

        /// The innermost scope suspends with a guard open: its slot is parked (see
        /// `backend/attach.rs`); the other majors' slots of the scope are dropped, and pushed
        /// again when it resumes.
        pub(crate) fn attach_park() -> Option<(u32, u64)> {
            let mut guarded = false;
            $(
                guarded |= crate::wgpu::$module::backend::attach::top_guarded();
            )*
            if !guarded {
                return None;
            }
            let mut ids = None;
            $(
                match crate::wgpu::$module::backend::attach::park() {
                    Some(i) => ids = ids.or(Some(i)),
                    None => {
                        if let Some((_, w)) = crate::wgpu::$module::backend::attach::pop() {
                            w.forget();
                        }
                    }
                }
            )*
            ids
        }

        /// A scope resumes (or closes while suspended): its parked slot is pushed on this thread
        /// again, with fresh slots for the other majors. Whether one was parked.
        pub(crate) fn attach_unpark(scope_id: u64, site: &'static Site, timed: bool) -> bool {
            $(
                let $module = crate::wgpu::$module::backend::attach::unpark(scope_id);
            )*
            let mut any = false;
            $(
                any |= $module;
            )*
            if any {
                $(
                    if !$module {
                        crate::wgpu::$module::backend::attach::push(site, timed);
                    }
                )*
            }
            any
        }
    };
}
with_majors!(scope_of_majors);

impl crate::backends::BackendScope for WgpuScope {
    /// A queue bracket, which an attached encoder replaces.
    fn takes_attach(&self) -> bool {
        self.is_bracket()
    }

    fn suspend(&mut self, _scope_id: u64) {
        WgpuScope::suspend(self);
    }

    fn resume(&mut self, _scope_id: u64) {
        WgpuScope::resume(self);
    }

    fn finish(self, call: crate::call::Call) {
        WgpuScope::finish(self, call.into_record());
    }

    fn supersede(self) {
        WgpuScope::supersede(self);
    }

    fn forget(self) {
        WgpuScope::forget(self);
    }
}

/// An async body's way to its bracket: the scope is in the future wrapping the body, out of the
/// body's reach, so the body holds this instead (empty when the scope is no bracket).
#[derive(Debug)]
pub struct BracketHandle(pub(super) Option<HandleOf>);

/// Where a rewritten submission asks for the bracket's end: the scope (sync bodies) or its
/// handle (async bodies).
pub trait BracketEnds<Q: api::Queue> {
    /// The end-timestamp buffer to append to a submission on `queue`, if it is the bracket's.
    fn end_for(&mut self, queue: &Q) -> Option<Q::CommandBuffer>;
}

impl<Q: api::Queue> BracketEnds<Q> for BracketHandle {
    #[inline]
    fn end_for(&mut self, queue: &Q) -> Option<Q::CommandBuffer> {
        queue.end_for_handle(self.0.as_ref()?)
    }
}

/// The specialized arm: the receiver is a wgpu queue (or a reference or `Arc` of one), of the
/// major `Q`.
pub trait SubmitQueue<'a, Q> {
    /// The queue being submitted to.
    fn gpuspan_submit(&self) -> QueueSubmit<'a, Q>;
}

impl<'a, Q: api::Queue, T: AsHandle<Q> + ?Sized> SubmitQueue<'a, Q> for SubmitProbe<'a, T> {
    #[inline]
    fn gpuspan_submit(&self) -> QueueSubmit<'a, Q> {
        QueueSubmit(self.0.as_handle())
    }
}

/// A submission on a wgpu queue inside a bracketed body.
#[derive(Debug)]
pub struct QueueSubmit<'a, Q>(&'a Q);

impl<Q: api::Queue> QueueSubmit<'_, Q> {
    /// The command buffers to submit: the user's, then, when this is the bracket's queue, the
    /// bracket's end.
    #[inline]
    pub fn with_end<I: IntoIterator<Item = Q::CommandBuffer>, E: BracketEnds<Q> + ?Sized>(
        self,
        buffers: I,
        ends: &mut E,
    ) -> Chain<I::IntoIter, IntoIter<Q::CommandBuffer>> {
        let end = ends.end_for(self.0);
        buffers.into_iter().chain(end)
    }
}
