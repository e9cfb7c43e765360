//! `gpuspan::wgpu::attach`: the encoder or pass an annotated function creates in its own body,
//! handed to the function's scope once it exists (the guard pattern of wgpu-profiler's `scope`).
//!
//! Every scope open on a thread has a slot here, innermost last: pushed when the scope opens (or
//! an async scope resumes), popped when it closes (or suspends). [`attach`] opens a query for the
//! innermost slot's scope in the recorder; the guard closes it when dropped and leaves the
//! measurement in the slot, where the scope collects it when it closes.

use super::frame::Frame;
use super::{device, wgpu, Recorder, WgpuScope};
use crate::diagnostics::note_once;
use crate::site::Site;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One open scope, as `attach` sees it.
pub(super) struct Slot {
    site: &'static Site,
    /// `(thread, scope id)`, taken when a host-timed scope gets its first attachment.
    ids: Option<(u32, u64)>,
    /// The scope already has an exact GPU source (a recorder parameter, CUDA). A queue bracket
    /// is not one: an attachment replaces it.
    timed: bool,
    /// The device the function named (`device = ...`), for attachments in it.
    device: Option<Arc<device::DeviceState>>,
    /// A guard is open on this scope.
    guarded: bool,
    /// The measurement of a closed guard, waiting for the scope to close.
    attached: Option<WgpuScope>,
    /// The frame the open guard's query is in: taken off the thread when the scope suspends.
    guard_frame: Option<Arc<Frame>>,
    /// Set when the scope suspended with the guard open: whether the guard's query owned its
    /// frame (`Frame::detach_from_thread`), which the guard needs to close it on any thread.
    guard_detached: Option<bool>,
    /// On a pass-level device, where the passes the scope begins get their timestamp writes
    /// (`passes.rs`): its encoder parameter's scope, or its open guard's.
    passes: Option<super::passes::Target>,
    /// An async scope timed by the sum of its passes, running again after an `.await`: the
    /// passes begun now are added to those it summed before it suspended (`resume_summed`).
    summed: Option<crate::wgpu::pass_sum::PassSum>,
}

thread_local! {
    static OPEN: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

/// A scope opens (or an async one resumes) on this thread. Returns whether a slot was pushed.
pub(crate) fn push(site: &'static Site, timed: bool) -> bool {
    let slot = Slot {
        site,
        ids: None,
        timed,
        device: None,
        guarded: false,
        attached: None,
        guard_frame: None,
        guard_detached: None,
        passes: None,
        summed: None,
    };
    OPEN.try_with(|o| o.borrow_mut().push(slot)).is_ok()
}

/// The scope just opened names its device: attachments in it use that device.
pub(crate) fn set_device(device: &wgpu::Device) {
    let state = super::known_device(device, None, None);
    let _ = OPEN.try_with(|o| {
        if let Some(slot) = o.borrow_mut().last_mut() {
            slot.device = Some(state);
        }
    });
}

/// The scope just opened brackets a queue of `device`: an attachment in it, which replaces the
/// bracket, uses that device.
pub(crate) fn set_device_state(device: Arc<device::DeviceState>) {
    let _ = OPEN.try_with(|o| {
        if let Some(slot) = o.borrow_mut().last_mut() {
            slot.device = Some(device);
        }
    });
}

/// The scope just opened times an encoder on a pass-level device: the passes its body begins
/// get timestamp writes for it.
pub(crate) fn set_pass_target(target: super::passes::Target) {
    let _ = OPEN.try_with(|o| {
        if let Some(slot) = o.borrow_mut().last_mut() {
            slot.passes = Some(target);
        }
    });
}

/// The timestamp writes for a pass being begun in the innermost scope on this thread, when that
/// scope is timed by its passes (`passes.rs`, `Target::writes`).
pub(crate) fn pass_writes(user_has_writes: bool) -> Option<(wgpu::QuerySet, Option<u32>, u32)> {
    OPEN.try_with(|o| o.borrow().last().and_then(|s| s.passes.as_ref()?.writes(user_has_writes))).ok().flatten()
}

/// The innermost annotated call open on this thread, for a pass an instrumented encoder begins
/// (`wgpu/pass_sum.rs`, `owner`): a call already timed (a recorder parameter, an attached
/// encoder) holds the pass in its own timing; any other gets the pass's time, summed with its
/// other passes, in place of its bracket or host timing. `None`: no call is open here.
pub(crate) fn claim_for_pass() -> Option<crate::wgpu::pass_sum::Owner> {
    use crate::wgpu::pass_sum::{Owner, PassSum};
    OPEN.try_with(|o| {
        let mut open = o.borrow_mut();
        let slot = open.last_mut()?;
        if let Some(sum) = &slot.summed {
            return Some(Owner::Scope(sum.clone()));
        }
        if slot.timed || slot.guarded {
            return Some(Owner::Timed);
        }
        match &slot.attached {
            Some(WgpuScope::Summed(sum)) => Some(Owner::Scope(sum.clone())),
            Some(_) => Some(Owner::Timed),
            None => {
                let sum = PassSum::default();
                slot.ids.get_or_insert_with(crate::thread::next_scope);
                slot.attached = Some(WgpuScope::Summed(sum.clone()));
                Some(Owner::Scope(sum))
            }
        }
    })
    .ok()
    .flatten()
}

/// The innermost scope, an async one timed by its passes, runs again on this thread (after an
/// `.await`): the passes it begins now are summed with those before (`claim_for_pass`).
pub(crate) fn resume_summed(sum: crate::wgpu::pass_sum::PassSum) {
    let _ = OPEN.try_with(|o| {
        if let Some(slot) = o.borrow_mut().last_mut() {
            slot.summed = Some(sum);
        }
    });
}

/// The name of the innermost annotated call open on this thread, if one is: the owner of the
/// memory an instrumented device allocates now (`wgpu/memory.rs`).
pub(crate) fn innermost_call() -> Option<&'static str> {
    OPEN.try_with(|o| o.borrow().last().map(|s| s.site.desc.name)).ok().flatten()
}

/// The slots of async scopes suspended with a guard open (held across an `.await`), by scope
/// id, until they resume: the guard is closed in a later poll, perhaps on another thread
/// (`Registry::parked`, with its count).
fn parked() -> &'static Mutex<Vec<(u64, Slot)>> {
    &super::REGISTRY.parked
}

fn parked_count() -> &'static AtomicUsize {
    &super::REGISTRY.parked_count
}

/// The innermost scope suspends. When a guard on it is still open, its slot is parked until the
/// scope resumes, the guard's frame taken off this thread; returns the scope's ids, which it
/// must keep to resume with that slot.
pub(crate) fn park() -> Option<(u32, u64)> {
    let mut slot = OPEN
        .try_with(|o| {
            let mut open = o.borrow_mut();
            if !open.last().is_some_and(|s| s.guarded && s.ids.is_some()) {
                return None;
            }
            open.pop()
        })
        .ok()
        .flatten()?;
    let ids = slot.ids?;
    if let Some(frame) = &slot.guard_frame {
        slot.guard_detached = Some(frame.detach_from_thread());
    }
    let mut parked = parked().lock().unwrap_or_else(|e| e.into_inner());
    parked.push((ids.1, slot));
    parked_count().fetch_add(1, Ordering::Release);
    Some(ids)
}

/// Whether the innermost scope has a guard open, which [`park`] would park.
#[allow(dead_code)] // with one major compiled in
pub(crate) fn top_guarded() -> bool {
    OPEN.try_with(|o| o.borrow().last().is_some_and(|s| s.guarded && s.ids.is_some())).unwrap_or(false)
}

/// A scope resumes: its parked slot, if it has one, is pushed on this thread again. Returns
/// whether it was.
pub(crate) fn unpark(scope_id: u64) -> bool {
    if parked_count().load(Ordering::Acquire) == 0 {
        return false;
    }
    let slot = {
        let mut parked = parked().lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = parked.iter().position(|(id, _)| *id == scope_id) else { return false };
        parked_count().fetch_sub(1, Ordering::Release);
        parked.swap_remove(i).1
    };
    OPEN.try_with(|o| o.borrow_mut().push(slot)).is_ok()
}

/// Runs `f` on the slot of the scope `scope_id`: on this thread's stack, or parked (a guard
/// dropped while its scope is suspended: the future is being dropped, the guard first).
fn with_slot<T>(scope_id: u64, f: impl FnOnce(&mut Slot) -> T) -> Option<T> {
    let is = |s: &Slot| s.ids.is_some_and(|(_, id)| id == scope_id);
    let mut f = Some(f);
    let on_stack = OPEN
        .try_with(|o| {
            let mut open = o.borrow_mut();
            let slot = open.iter_mut().rev().find(|s| is(s))?;
            f.take().map(|f| f(slot))
        })
        .ok()
        .flatten();
    if on_stack.is_some() || parked_count().load(Ordering::Acquire) == 0 {
        return on_stack;
    }
    let mut parked = parked().lock().unwrap_or_else(|e| e.into_inner());
    let slot = parked.iter_mut().find(|(id, _)| *id == scope_id).map(|(_, s)| s)?;
    f.take().map(|f| f(slot))
}

/// The innermost scope closes (or suspends): its attachment, if a guard left one.
pub(crate) fn pop() -> Option<((u32, u64), WgpuScope)> {
    let slot = OPEN.try_with(|o| o.borrow_mut().pop()).ok().flatten()?;
    Some((slot.ids?, slot.attached?))
}

/// The recorder `attach` was given, timed for the enclosing gpuspan scope until dropped.
/// Dereferences to the recorder, so encoding goes through it; drop it before `finish()`.
/// Unnameable outside (decision 18): `attach` returns it as an `impl DerefMut`.
pub(crate) struct Attached<'a, R: Recorder> {
    recorder: &'a mut R,
    scope: Option<(u64, WgpuScope)>,
}

impl<R: Recorder> std::fmt::Debug for Attached<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached").field("timed", &self.scope.is_some()).finish_non_exhaustive()
    }
}

/// `gpuspan::wgpu::attach` (documented there).
#[must_use = "the query closes when this guard is dropped: encode through it, then drop it"]
pub(crate) fn attach<R: Recorder>(recorder: &mut R) -> impl std::ops::DerefMut<Target = R> + std::fmt::Debug + '_ {
    let scope = begin(recorder);
    Attached { recorder, scope }
}

fn begin<R: Recorder>(recorder: &mut R) -> Option<(u64, WgpuScope)> {
    let (site, scope_id, device) = OPEN
        .try_with(|o| {
            let mut open = o.borrow_mut();
            let slot = open.last_mut()?;
            if slot.timed || slot.guarded || slot.attached.is_some() {
                note_once(format_args!(
                    "`{}`: gpuspan::wgpu::attach in a call that already has its GPU timing (a recorder \
                     parameter, or an earlier attach); this recorder is not timed",
                    slot.site.desc.name
                ));
                return None;
            }
            let (_, scope_id) = *slot.ids.get_or_insert_with(crate::thread::next_scope);
            slot.guarded = true;
            Some((slot.site, scope_id, slot.device.clone()))
        })
        .ok()
        .flatten()?;
    match WgpuScope::begin_in_recorder(site, scope_id, recorder, device.as_deref().map(|d| &d.device)) {
        Ok(w) => {
            let frame = w.frame();
            let passes = w.pass_target();
            let _ = OPEN.try_with(|o| {
                if let Some(slot) =
                    o.borrow_mut().iter_mut().rev().find(|s| s.ids.is_some_and(|(_, id)| id == scope_id))
                {
                    slot.guard_frame = frame;
                    slot.passes = passes;
                }
            });
            Some((scope_id, w))
        }
        Err(why) => {
            site.timed_on_host(why);
            release(scope_id, None);
            None
        }
    }
}

/// The guard closed: its measurement goes to its scope's slot, or, if that scope has already
/// closed (the guard outlived it), the query is dropped from its frame.
fn release(scope_id: u64, scope: Option<WgpuScope>) {
    let mut scope = scope;
    with_slot(scope_id, |slot| {
        slot.guarded = false;
        slot.guard_frame = None;
        slot.passes = None;
        slot.attached = scope.take();
    });
    if let Some(orphan) = scope {
        orphan.forget();
    }
}

impl<R: Recorder> Drop for Attached<'_, R> {
    fn drop(&mut self) {
        if let Some((scope_id, mut w)) = self.scope.take() {
            // Held across an `.await`, the guard's frame left the thread it was opened on.
            let detached = with_slot(scope_id, |slot| slot.guard_detached.take()).flatten();
            if let Some(owner) = detached {
                w.set_detached(owner);
            }
            w.end_in_recorder(self.recorder);
            release(scope_id, Some(w));
        }
    }
}

impl<R: Recorder> std::ops::Deref for Attached<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        self.recorder
    }
}

impl<R: Recorder> std::ops::DerefMut for Attached<'_, R> {
    fn deref_mut(&mut self) -> &mut R {
        self.recorder
    }
}
