//! wgpu timing: timestamp queries through wgpu-profiler, placed on the host clock.
//!
//! A function with a `&mut CommandEncoder` (or `ComputePass`/`RenderPass`) parameter gets a
//! query in that recorder; one with only a `&Queue` has its submissions bracketed by timestamp
//! writes in gpuspan's own command buffers: one submitted before the body, and one carried by
//! each of the body's own submissions on that queue (`bracket.rs`), so the bracket ends with the
//! last of them; queue order makes the interval cover the work in between, pending
//! `write_buffer` copies included. A bracket's timestamps are slots of a batch shared by many
//! brackets (`pool.rs`). Queries are resolved off the caller's path by the resolver thread; the
//! caller never waits on the GPU.
//!
//! ```no_run
//! # async fn setup(adapter: wgpu::Adapter) {
//! let (device, queue) = adapter
//!     .request_device(&wgpu::DeviceDescriptor {
//!         required_features: gpuspan::wgpu::timestamp_features(&adapter),
//!         ..Default::default()
//!     })
//!     .await
//!     .unwrap();
//! gpuspan::wgpu::register(&adapter, &device, &queue);
//! # }
//! ```

pub(crate) mod attach;
mod bounds;
pub(crate) mod bracket;
mod calibration;
mod device;
mod frame;
mod pool;
mod read_back;
mod resolver;
pub(crate) mod resources;

pub use attach::attach;
pub use read_back::read_buffer;
pub use resources::{AsHandle, AsRecorder};
// Sealed: the bound of `attach` and of `AsRecorder::Recorder`, implemented by wgpu's encoder and
// passes only, so nameable nowhere outside.
use resources::Recorder;

use crate::diagnostics::note_once;
use crate::probe::Exit;
use crate::record::Record;
use crate::scope::{GpuScope, Scope};
use crate::site::Site;
use bracket::Bracket;
use device::DeviceState;
use frame::Frame;
use std::sync::Arc;
use tracing::Span;
use wgpu_profiler::{GpuProfiler, GpuProfilerQuery};

/// The timestamp features of `adapter` that gpuspan can use; add them to
/// `DeviceDescriptor::required_features`. Without `TIMESTAMP_QUERY` gpuspan times wgpu work on
/// the host and says so.
pub fn timestamp_features(adapter: &wgpu::Adapter) -> wgpu::Features {
    adapter.features() & GpuProfiler::ALL_WGPU_TIMER_FEATURES
}

/// Tells gpuspan about a device and its queue, so that functions that only take a command
/// encoder or pass can be timed, and names the device after the adapter in traces.
pub fn register(adapter: &wgpu::Adapter, device: &wgpu::Device, queue: &wgpu::Queue) {
    let info = adapter.get_info();
    let name = format!("{} ({:?})", info.name, info.backend);
    let state = device::register(device, Some(queue), Some(&name));
    // Lets the device monitor match this device's records to its GPU by PCI bus id.
    remember_adapter(state.label.id, info);
    check_features(&state);
}

/// The adapters registered devices came from, by gpuspan's device index.
static ADAPTERS: std::sync::RwLock<Vec<(u32, wgpu::AdapterInfo)>> = std::sync::RwLock::new(Vec::new());

fn remember_adapter(id: u32, info: wgpu::AdapterInfo) {
    if let Ok(mut a) = ADAPTERS.write() {
        a.retain(|(i, _)| *i != id);
        a.push((id, info));
    }
}

/// The adapter the registered device `id` came from.
#[allow(dead_code)] // read by the device monitor, when it is compiled in
pub(crate) fn adapter_info(id: u32) -> Option<wgpu::AdapterInfo> {
    ADAPTERS.read().ok()?.iter().find(|(i, _)| *i == id).map(|(_, info)| info.clone())
}

fn check_features(d: &DeviceState) -> bool {
    let needed = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    if d.features.contains(needed) {
        return true;
    }
    note_once(format_args!(
        "{} was created without {:?}: its wgpu scopes are timed on the host. Request \
         gpuspan::wgpu::timestamp_features(&adapter) in DeviceDescriptor::required_features",
        d.label.name,
        needed - d.features
    ));
    false
}

/// The wgpu part of an open scope.
#[derive(Debug)]
pub(crate) enum WgpuScope {
    /// A query in the user's encoder or pass, in a profiler frame.
    Recorder(RecorderScope),
    /// Timestamps around the call's submissions on a queue (`bracket.rs`).
    Bracket(Bracket),
    /// A selected span's brackets, one on each registered device's queue (`span_bracket`).
    SpanBrackets(Vec<Bracket>),
}

/// A scope timed by a query in a recorder.
pub(crate) struct RecorderScope {
    frame: Arc<Frame>,
    query: Option<GpuProfilerQuery>,
    /// An async scope's frame left its thread at the first suspension: `Some(true)` when this
    /// scope owns the frame, `Some(false)` when it was nested in another's frame.
    detached: Option<bool>,
}

impl std::fmt::Debug for RecorderScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecorderScope").field("frame", &self.frame).field("open", &self.query.is_some()).finish()
    }
}

impl WgpuScope {
    fn begin_in_recorder<R: Recorder>(
        site: &'static Site,
        scope_id: u64,
        recorder: &mut R,
        device: Option<&wgpu::Device>,
    ) -> Result<WgpuScope, &'static str> {
        let state = match device {
            Some(d) => device::register(d, None, None),
            None => match device::only() {
                Some(d) => d,
                None => {
                    note_once(format_args!(
                        "`{}` records into a wgpu encoder, but gpuspan does not know which device it belongs to: \
                         call gpuspan::wgpu::register(&adapter, &device, &queue) once (or add `device = ...`); \
                         timing it on the host",
                        site.desc.name
                    ));
                    return Err("device not registered");
                }
            },
        };
        let inside = if recorder.is_pass() {
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
        } else {
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        };
        if !check_features(&state) || !state.features.contains(inside) {
            return Err("device without timestamp queries");
        }
        if state.queue.get().is_none() {
            note_once(format_args!(
                "`{}`: gpuspan needs the device's queue to read its timestamps: call \
                 gpuspan::wgpu::register(&adapter, &device, &queue) once; timing it on the host",
                site.desc.name
            ));
            return Err("queue not registered");
        }
        let frame = Frame::enter(&state).ok_or("no query frame: too many in flight, or the thread is exiting")?;
        let query = frame.begin(scope_id, recorder);
        Ok(WgpuScope::Recorder(RecorderScope { frame, query, detached: None }))
    }

    fn begin_on_queue(
        site: &'static Site,
        queue: &wgpu::Queue,
        device: Option<&wgpu::Device>,
    ) -> Result<WgpuScope, &'static str> {
        let state = match device {
            Some(d) => device::register(d, Some(queue), None),
            None => match device::find_by_queue(queue) {
                Some(d) => d,
                None => {
                    note_once(format_args!(
                        "`{}` takes a wgpu queue but gpuspan does not know its device: call \
                         gpuspan::wgpu::register(&adapter, &device, &queue) once (or add a `&Device` parameter); \
                         timing it on the host",
                        site.desc.name
                    ));
                    return Err("device not registered");
                }
            },
        };
        if !check_features(&state) {
            return Err("device without timestamp queries");
        }
        let bracket = Bracket::open(state, queue).ok_or("too many queue brackets waiting for their timestamps")?;
        Ok(WgpuScope::Bracket(bracket))
    }

    /// A function that only takes a device: the submissions on the queue registered with it
    /// are bracketed.
    fn begin_on_device(site: &'static Site, device: &wgpu::Device) -> Result<WgpuScope, &'static str> {
        let state = device::register(device, None, None);
        let Some(queue) = state.queue.get().cloned() else {
            note_once(format_args!(
                "`{}` takes only a wgpu device and gpuspan does not know its queue: call \
                 gpuspan::wgpu::register(&adapter, &device, &queue) once (or add `queue = ...`); timing it on the host",
                site.desc.name
            ));
            return Err("device's queue not registered");
        };
        Self::begin_on_queue(site, &queue, Some(device))
    }

    fn end_in_recorder<R: Recorder>(&mut self, recorder: &mut R) {
        // A bracket ends with its submissions, or in `finish`.
        if let WgpuScope::Recorder(RecorderScope { frame, query, detached }) = self {
            if let Some(q) = query.take() {
                frame.end_in_recorder(q, recorder, *detached);
            }
        }
    }

    /// The frame of a query in a recorder.
    fn frame(&self) -> Option<Arc<Frame>> {
        match self {
            WgpuScope::Recorder(r) => Some(r.frame.clone()),
            WgpuScope::Bracket(_) | WgpuScope::SpanBrackets(_) => None,
        }
    }

    /// An attached guard's query whose frame was taken off its thread while it was open (see
    /// `Frame::detach_from_thread`): `owner` when the query owned the frame.
    fn set_detached(&mut self, owner: bool) {
        if let WgpuScope::Recorder(r) = self {
            r.detached = Some(owner);
        }
    }

    /// An async scope stops running on this thread (see `Frame::detach_from_thread`). A
    /// bracket is on no thread's stack.
    pub(crate) fn suspend(&mut self) {
        if let WgpuScope::Recorder(r) = self {
            // Only an open query holds a nesting level of its frame on this thread: a closed one
            // (an attachment collected as its scope suspends) left it when it was closed, and
            // leaving again would take the level of a caller's scope nested in the same frame.
            if r.detached.is_none() && r.query.is_some() {
                r.detached = Some(r.frame.detach_from_thread());
            }
        }
    }

    /// A measurement no scope will collect (an attached recorder outlived its scope): its
    /// frame stops waiting for a record.
    pub(crate) fn forget(self) {
        match self {
            WgpuScope::Recorder(r) => r.frame.forget_scope(),
            // Dropped: it writes its end and its batch stops waiting for it.
            WgpuScope::Bracket(b) => drop(b),
            WgpuScope::SpanBrackets(bs) => drop(bs),
        }
    }

    /// Replaced by an attached encoder's measurement (`attach.rs`): a bracket leaves without
    /// counting a loss.
    pub(crate) fn supersede(self) {
        match self {
            WgpuScope::Bracket(b) => b.supersede(),
            WgpuScope::SpanBrackets(bs) => bs.into_iter().for_each(Bracket::supersede),
            recorder => recorder.forget(),
        }
    }

    pub(crate) fn finish(self, mut record: Record) {
        record.read_back = read_back::take_phases();
        match self {
            WgpuScope::Recorder(mut r) => {
                if let Some(q) = r.query.take() {
                    r.frame.abandon(q, r.detached);
                }
                r.frame.attach(record);
            }
            WgpuScope::Bracket(b) => b.finish(record),
            WgpuScope::SpanBrackets(bs) => finish_span_brackets(bs, record),
        }
    }
}

/// A selected span closed with a bracket on each registered device's queue: the devices that
/// took a submission while it was open get its record (one each, their brackets' GPU
/// intervals), the others leave without one. None of them (or no way to tell): the first.
fn finish_span_brackets(mut brackets: Vec<Bracket>, record: Record) {
    let touched: Vec<bool> = brackets.iter_mut().map(|b| b.end_for_span().unwrap_or(true)).collect();
    let mut keep: Vec<usize> = (0..brackets.len()).filter(|&i| touched[i]).collect();
    if keep.is_empty() {
        keep.push(0);
    }
    let last = keep.last().copied();
    let mut record = Some(record);
    for (i, b) in brackets.into_iter().enumerate() {
        let r = match keep.contains(&i) {
            true if Some(i) == last => record.take(),
            true => record.clone(),
            false => None,
        };
        match r {
            Some(r) => b.finish(r),
            None => b.supersede(),
        }
    }
}

/// The scope's GPU part, or host timing with the reason kept for the summary.
fn started(site: &'static Site, begun: Result<WgpuScope, &'static str>) -> GpuScope {
    match begun {
        Ok(w) => GpuScope::Wgpu(w),
        Err(why) => {
            site.timed_on_host(why);
            GpuScope::None
        }
    }
}

/// The wgpu part of a selected application span's scope (`span_scopes.rs`): a bracket on the
/// queue of each registered device that has one, opened at the span's first entry and ended
/// when the span closes (labelled `exit`, as a bracket whose submissions gpuspan did not see);
/// the devices that took a submission meanwhile get the record ([`finish_span_brackets`]).
/// Host timing, with the reason kept for the summary, where there is none.
pub(crate) fn span_bracket(site: &'static Site) -> GpuScope {
    let devices: Vec<_> = device::all().into_iter().filter(|d| d.queue.get().is_some()).collect();
    if devices.is_empty() {
        site.timed_on_host("no wgpu device registered with its queue");
        return GpuScope::None;
    }
    let mut brackets = Vec::with_capacity(devices.len());
    let mut why = "device without timestamp queries";
    for state in devices {
        if !check_features(&state) {
            continue;
        }
        let Some(queue) = state.queue.get().cloned() else { continue };
        match Bracket::open(state, &queue) {
            Some(b) => brackets.push(b),
            None => why = "too many queue brackets waiting for their timestamps",
        }
    }
    let scope = match brackets.len() {
        0 => Err(why),
        1 => Ok(WgpuScope::Bracket(brackets.remove(0))),
        _ => Ok(WgpuScope::SpanBrackets(brackets)),
    };
    started(site, scope)
}

impl Scope {
    /// A scope timed by queries in a command encoder or pass.
    #[inline]
    pub fn wgpu_recorder<R: Recorder>(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        recorder: &mut R,
        device: Option<&wgpu::Device>,
    ) -> Scope {
        Scope::open(site, span, bytes, |scope_id| {
            started(site, WgpuScope::begin_in_recorder(site, scope_id, recorder, device))
        })
    }

    /// A scope whose submissions on `queue` are bracketed by timestamp writes.
    #[inline]
    pub fn wgpu_queue(
        site: &'static Site,
        span: Span,
        bytes: Option<u64>,
        queue: &wgpu::Queue,
        device: Option<&wgpu::Device>,
    ) -> Scope {
        let mut scope =
            Scope::open(site, span, bytes, |_| started(site, WgpuScope::begin_on_queue(site, queue, device)));
        scope.offer_bracket_device();
        scope
    }

    /// An `attach` in a bracketed call replaces the bracket: it records on the bracket's device.
    fn offer_bracket_device(&mut self) {
        if let Some(GpuScope::Wgpu(WgpuScope::Bracket(b))) = self.gpu_mut() {
            attach::set_device_state(b.device());
        }
    }

    /// A host-timed scope whose function records into a recorder it creates and hands over with
    /// [`attach`]: the attachment uses `device`.
    #[inline]
    pub fn wgpu_attachable(site: &'static Site, span: Span, bytes: Option<u64>, device: &wgpu::Device) -> Scope {
        let scope = Scope::open(site, span, bytes, |_| GpuScope::None);
        if scope.is_active() {
            attach::set_device(device);
        }
        scope
    }

    /// A scope whose submissions on the device's registered queue are bracketed.
    #[inline]
    pub fn wgpu_device(site: &'static Site, span: Span, bytes: Option<u64>, device: &wgpu::Device) -> Scope {
        let mut scope = Scope::open(site, span, bytes, |_| started(site, WgpuScope::begin_on_device(site, device)));
        scope.offer_bracket_device();
        scope
    }

    /// The function leaves: closes the query in the recorder it was opened in.
    #[inline]
    pub fn exit_recorder<R: Recorder>(&mut self, exit: Exit, recorder: &mut R) {
        self.exit(exit);
        if let Some(GpuScope::Wgpu(w)) = self.gpu_mut() {
            w.end_in_recorder(recorder);
        }
    }

    /// A `?` in the function: when it leaves (`Err`, `None`), the query is closed.
    #[inline]
    pub fn try_exit_recorder<R: Recorder>(&mut self, exit: Exit, recorder: &mut R) {
        if matches!(exit, Exit::Error | Exit::Early) {
            self.exit_recorder(exit, recorder);
        }
    }
}
