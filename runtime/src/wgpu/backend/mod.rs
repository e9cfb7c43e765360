//! The wgpu backend, written once and compiled once per major (`wgpu/v30.rs`, ...), where
//! `wgpu` and `wgpu_profiler` are that major's crates: timestamp queries through wgpu-profiler,
//! placed on the host clock.
//!
//! A function with a `&mut CommandEncoder` (or `ComputePass`/`RenderPass`) parameter gets a
//! query in that recorder; one with only a `&Queue` has its submissions bracketed by timestamp
//! writes in gpuspan's own command buffers: one submitted before the body, and one carried by
//! each of the body's own submissions on that queue (`bracket.rs`), so the bracket ends with the
//! last of them; queue order makes the interval cover the work in between, pending
//! `write_buffer` copies included. A bracket's timestamps are slots of a batch shared by many
//! brackets (`pool.rs`). Queries are resolved off the caller's path by the resolver thread; the
//! caller never waits on the GPU.

pub(crate) mod attach;
mod bounds;
pub(crate) mod bracket;
mod calibration;
mod device;
mod frame;
pub(crate) mod instrument;
pub(crate) mod passes;
mod pool;
pub(crate) mod read_back;
mod resolver;
pub(crate) mod resources;

use resources::Recorder;
use super::{mapped_range, wgpu, wgpu_profiler, NAME};

use crate::diagnostics::note_once;
use crate::record::Record;
use crate::scope::GpuScope;
use crate::site::Site;
use bracket::Bracket;
use device::DeviceState;
use frame::Frame;
use std::sync::Arc;
use wgpu_profiler::{GpuProfiler, GpuProfilerQuery};

/// The timestamp features gpuspan can use (`gpuspan::wgpu::timestamp_features`).
pub(crate) const TIMER_FEATURES: wgpu::Features = GpuProfiler::ALL_WGPU_TIMER_FEATURES;

/// The registered device `device` is (registered now, with `queue` and `name` where given), or
/// the one an instrumented device forwards to; the resolver then drives its frames and batches.
/// Here, above `device.rs`, so that the registry imports neither the instrumented device nor
/// the resolver (they import it).
fn known_device(device: &wgpu::Device, queue: Option<&wgpu::Queue>, name: Option<&str>) -> Arc<DeviceState> {
    let state = instrument::state_of_device(device).unwrap_or_else(|| device::register(device, queue, name));
    resolver::register();
    state
}

/// The registered device whose queue `queue` is, or that an instrumented queue forwards to.
fn find_by_queue(queue: &wgpu::Queue) -> Option<Arc<DeviceState>> {
    instrument::state_of_queue(queue).or_else(|| device::find_by_queue(queue))
}

/// `gpuspan::wgpu::register`: names the device after the adapter in traces.
pub(crate) fn register(adapter: &wgpu::Adapter, device: &wgpu::Device, queue: &wgpu::Queue) {
    // An instrumented device records passes that no annotated call (nor the run-time switch)
    // announces: the run's settings are resolved now if nothing did before (a no-op after `init`).
    crate::settings::from_env_once();
    let info = adapter.get_info();
    let name = format!("{} ({:?})", info.name, info.backend);
    let state = known_device(device, Some(queue), Some(&name));
    // Lets the device monitor match this device's records to its GPU by PCI bus id.
    remember_adapter(state.label.id, crate::wgpu::Info::facts(&info));
    check_features(&state);
}

/// The backend's registry (one per wgpu major compiled in).
struct Registry {
    /// The adapters registered devices came from, by gpuspan's device index.
    adapters: std::sync::RwLock<Vec<(u32, crate::wgpu::AdapterFacts)>>,
    /// Every device registered so far (`device.rs`).
    devices: std::sync::RwLock<Vec<std::sync::Arc<device::DeviceState>>>,
    /// The slots of async scopes suspended with a guard open (`attach.rs`).
    parked: std::sync::Mutex<Vec<(u64, attach::Slot)>>,
    /// How many slots are parked: resuming scopes look in `parked` only when some are.
    parked_count: std::sync::atomic::AtomicUsize,
    /// The sites of unattributed passes, by label (`instrument/pass.rs`).
    unattributed: std::sync::Mutex<Vec<(std::sync::Arc<str>, &'static Site)>>,
    /// What every instrumented device shares, for the summary (`instrument`).
    instrumented: std::sync::RwLock<Vec<std::sync::Arc<instrument::Shared>>>,
}

// process-wide because a wgpu device is registered once (`register`, or a call given its device
// and queue) and found again from whatever `&Device`, `&Queue` or encoder another call on another
// thread is handed: wgpu's handles carry no owner of gpuspan's.
static REGISTRY: Registry = Registry {
    adapters: std::sync::RwLock::new(Vec::new()),
    devices: std::sync::RwLock::new(Vec::new()),
    parked: std::sync::Mutex::new(Vec::new()),
    parked_count: std::sync::atomic::AtomicUsize::new(0),
    unattributed: std::sync::Mutex::new(Vec::new()),
    instrumented: std::sync::RwLock::new(Vec::new()),
};

fn remember_adapter(id: u32, info: crate::wgpu::AdapterFacts) {
    if let Ok(mut a) = REGISTRY.adapters.write() {
        a.retain(|(i, _)| *i != id);
        a.push((id, info));
    }
}

/// The adapter the registered device `id` came from.
#[cfg(feature = "_devices")] // read by the device monitor
pub(crate) fn adapter_info(id: u32) -> Option<crate::wgpu::AdapterFacts> {
    REGISTRY.adapters.read().ok()?.iter().find(|(i, _)| *i == id).map(|(_, info)| info.clone())
}

/// How a device's scopes are timed, from the timestamp features it was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`: queries anywhere in an encoder (wgpu-profiler's).
    InEncoders,
    /// `TIMESTAMP_QUERY` alone (Metal, WebGPU): timestamps only at the start and end of passes,
    /// through their descriptors' `timestamp_writes` (`passes.rs`).
    Passes,
    /// No timestamps: host timing.
    Host,
}

impl Mode {
    pub(crate) fn of(features: wgpu::Features) -> Mode {
        if features.contains(wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS) {
            Mode::InEncoders
        } else if features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            Mode::Passes
        } else {
            Mode::Host
        }
    }
}

/// Whether the device has timestamps at all (in encoders, or at passes only); says once what
/// a device with fewer features gets.
fn check_features(d: &DeviceState) -> bool {
    match d.mode {
        Mode::InEncoders => true,
        Mode::Passes => {
            note_once(format_args!(
                "{} has TIMESTAMP_QUERY without TIMESTAMP_QUERY_INSIDE_ENCODERS (as Metal and WebGPU): \
                 a wgpu scope that times an encoder is timed by the passes it begins (from the first \
                 one's start to the last one's end, `gpu_passes`); one given a pass is timed on the host",
                d.label.name
            ));
            true
        }
        Mode::Host => {
            note_once(format_args!(
                "{} was created without {:?}: its wgpu scopes are timed on the host. Request \
                 gpuspan::wgpu::timestamp_features(&adapter) in DeviceDescriptor::required_features",
                d.label.name,
                wgpu::Features::TIMESTAMP_QUERY - d.features
            ));
            false
        }
    }
}

/// The wgpu part of an open scope.
#[derive(Debug)]
pub(crate) enum WgpuScope {
    /// A query in the user's encoder or pass, in a profiler frame.
    Recorder(RecorderScope),
    /// Timestamps around the call's submissions on a queue (`bracket.rs`).
    Bracket(Bracket),
    /// On a pass-level device, the timestamp writes of the passes the call begins (`passes.rs`).
    Passes(passes::PassScope),
    /// A selected span's brackets, one on each registered device's queue (`span_bracket`).
    SpanBrackets(Vec<Bracket>),
    /// The passes an instrumented device ran for the scope, summed (`wgpu/pass_sum.rs`).
    Summed(crate::wgpu::pass_sum::PassSum),
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
    pub(crate) fn begin_in_recorder<R: Recorder>(
        site: &'static Site,
        scope_id: u64,
        recorder: &mut R,
        device: Option<&wgpu::Device>,
    ) -> Result<WgpuScope, &'static str> {
        let state = match device {
            Some(d) => known_device(d, None, None),
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
        if !check_features(&state) {
            return Err("device without timestamp queries");
        }
        if state.mode == Mode::Passes && recorder.is_pass() {
            note_once(format_args!(
                "`{}` is given a wgpu pass on a device without TIMESTAMP_QUERY_INSIDE_ENCODERS: a pass \
                 begun by the caller cannot get timestamp writes; timing it on the host (pass the encoder instead)",
                site.desc.name
            ));
            return Err("pass-level device: a pass begun by the caller has no timestamps (pass the encoder)");
        }
        if state.mode == Mode::InEncoders
            && recorder.is_pass()
            && !state.features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
        {
            return Err("device without timestamp queries");
        }
        let Some(queue) = state.queue.get().cloned() else {
            note_once(format_args!(
                "`{}`: gpuspan needs the device's queue to read its timestamps: call \
                 gpuspan::wgpu::register(&adapter, &device, &queue) once; timing it on the host",
                site.desc.name
            ));
            return Err("queue not registered");
        };
        if state.mode == Mode::Passes {
            let scope = passes::PassScope::open(state, &queue)
                .ok_or("too many queue brackets waiting for their timestamps")?;
            return Ok(WgpuScope::Passes(scope));
        }
        let frame = Frame::enter(&state).ok_or("no query frame: too many in flight, or the thread is exiting")?;
        let query = frame.begin(scope_id, recorder);
        Ok(WgpuScope::Recorder(RecorderScope { frame, query, detached: None }))
    }

    pub(crate) fn begin_on_queue(
        site: &'static Site,
        queue: &wgpu::Queue,
        device: Option<&wgpu::Device>,
    ) -> Result<WgpuScope, &'static str> {
        let state = match device {
            Some(d) => known_device(d, Some(queue), None),
            None => match find_by_queue(queue) {
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
    pub(crate) fn begin_on_device(site: &'static Site, device: &wgpu::Device) -> Result<WgpuScope, &'static str> {
        let state = known_device(device, None, None);
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

    pub(crate) fn end_in_recorder<R: Recorder>(&mut self, recorder: &mut R) {
        // A bracket ends with its submissions, or in `finish`.
        match self {
            WgpuScope::Recorder(RecorderScope { frame, query, detached }) => {
                if let Some(q) = query.take() {
                    frame.end_in_recorder(q, recorder, *detached);
                }
            }
            WgpuScope::Passes(p) => p.end_in_recorder(recorder),
            WgpuScope::Bracket(_) | WgpuScope::SpanBrackets(_) | WgpuScope::Summed(_) => {}
        }
    }

    /// The frame of a query in a recorder.
    fn frame(&self) -> Option<Arc<Frame>> {
        match self {
            WgpuScope::Recorder(r) => Some(r.frame.clone()),
            WgpuScope::Bracket(_) | WgpuScope::SpanBrackets(_) | WgpuScope::Passes(_) | WgpuScope::Summed(_) => None,
        }
    }

    /// Where the passes begun in this scope get their timestamp writes, on a pass-level device.
    pub(crate) fn pass_target(&self) -> Option<passes::Target> {
        match self {
            WgpuScope::Passes(p) => Some(p.target()),
            _ => None,
        }
    }

    /// A scope given an encoder on a pass-level device: the passes its body begins (the
    /// rewritten `begin_*_pass` calls) get timestamp writes for it.
    pub(crate) fn offer_pass_target(&self) {
        if let Some(t) = self.pass_target() {
            attach::set_pass_target(t);
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

    /// The passes an async scope timed by them summed before it suspended: it runs again.
    pub(crate) fn summed(&self) -> Option<&crate::wgpu::pass_sum::PassSum> {
        match self {
            WgpuScope::Summed(s) => Some(s),
            _ => None,
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
            WgpuScope::Passes(p) => p.forget(),
            WgpuScope::Summed(s) => s.forget().into_iter().for_each(instrument::unattributed_pass),
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

    /// A queue bracket (which an attached encoder replaces), not a query in a recorder.
    pub(crate) fn is_bracket(&self) -> bool {
        matches!(self, WgpuScope::Bracket(_))
    }

    /// An async body's handle on this scope's bracket, when it is one.
    pub(crate) fn bracket_handle(&mut self) -> Option<bracket::Shared> {
        match self {
            WgpuScope::Bracket(b) => Some(b.handle()),
            WgpuScope::Recorder(_) | WgpuScope::SpanBrackets(_) | WgpuScope::Passes(_) | WgpuScope::Summed(_) => None,
        }
    }

    /// An `attach` in a bracketed call replaces the bracket: it records on the bracket's device.
    pub(crate) fn offer_bracket_device(&self) {
        if let WgpuScope::Bracket(b) = self {
            attach::set_device_state(b.device());
        }
    }

    /// A selected span's brackets as it closes, beside CUDA's part of its scope
    /// (`backends::SpanScope`): the record goes to the devices that took a submission while it
    /// was open; when none did it is given back, for the CUDA part.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn finish_span_if_used(self, mut record: Record) -> Option<Record> {
        match self {
            WgpuScope::Bracket(b) => {
                record.read_back = read_back::take_phases();
                finish_touched_brackets(vec![b], record, false)
            }
            WgpuScope::SpanBrackets(bs) => {
                record.read_back = read_back::take_phases();
                finish_touched_brackets(bs, record, false)
            }
            other => {
                other.finish(record);
                None
            }
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
            WgpuScope::Passes(p) => p.finish(record),
            WgpuScope::Summed(s) => s.finish(record),
        }
    }
}

/// A selected span closed with a bracket on each registered device's queue: the devices that
/// took a submission while it was open get its record (one each, their brackets' GPU
/// intervals), the others leave without one. None of them (or no way to tell): the first.
fn finish_span_brackets(brackets: Vec<Bracket>, record: Record) {
    let _kept = finish_touched_brackets(brackets, record, true);
}

/// [`finish_span_brackets`]; with `first_if_none` false, when no device took a submission every
/// bracket leaves and the record is given back (another backend's part of the span times it).
fn finish_touched_brackets(mut brackets: Vec<Bracket>, record: Record, first_if_none: bool) -> Option<Record> {
    let touched: Vec<bool> = brackets.iter_mut().map(|b| b.end_for_span().unwrap_or(true)).collect();
    let mut keep: Vec<usize> = (0..brackets.len()).filter(|&i| touched[i]).collect();
    if keep.is_empty() {
        if !first_if_none {
            brackets.into_iter().for_each(Bracket::supersede);
            return Some(record);
        }
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
    None
}

/// The wgpu part of a selected application span's scope (`span_scopes.rs`): a bracket on the
/// queue of each of this major's registered devices that has one, opened at the span's first
/// entry and ended when the span closes (labelled `exit`, as a bracket whose submissions
/// gpuspan did not see); the devices that took a submission meanwhile get the record
/// ([`finish_span_brackets`]). `None` when this major has no device registered with its queue.
pub(crate) fn span_bracket(site: &'static Site) -> Option<GpuScope> {
    let devices: Vec<_> = device::all().into_iter().filter(|d| d.queue.get().is_some()).collect();
    if devices.is_empty() {
        return None;
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
        0 => {
            site.timed_on_host(why);
            return Some(GpuScope::None);
        }
        1 => WgpuScope::Bracket(brackets.remove(0)),
        _ => WgpuScope::SpanBrackets(brackets),
    };
    Some(GpuScope::Wgpu(scope.into()))
}
