//! Timing each pass an instrumented encoder begins: a slot pair from the device's bracket
//! batches (`pool.rs`) as the pass's `timestamp_writes` (the pass-level mechanism of decision 52,
//! so `TIMESTAMP_QUERY` alone is enough), resolved with the batch once the pass's commands have
//! executed. The pass is then an activity of the scope that owns it (`wgpu/pass_sum.rs`), or a
//! record of its own, `unattributed`.
//!
//! A copy or clear the encoder records between passes is timed the same way where the device
//! has in-encoder timestamps: the slot pair written with `write_timestamp` just before and after
//! it, so its time (and the bandwidth from it) is its own. It is a copy activity with its bytes.

use super::super::device::DeviceState;
use super::super::pool::{self, Slots, Timed};
use super::super::{attach, Mode};
use super::{wgpu, Shared};
use crate::diagnostics::note_once;
use crate::record::{Activity, ActivityKind, Interval, KernelGeometry, Record};
use crate::site::{Backend, Site, SiteDesc, SiteKind};
use crate::wgpu::pass_sum::{self, Owner, PassSum};
use std::borrow::Cow;
use std::sync::Arc;

/// Passes with user labels beyond this many distinct ones share one `unattributed` site.
const MAX_UNATTRIBUTED_SITES: usize = 256;

/// Passes no scope owns, past [`MAX_UNATTRIBUTED_SITES`] labels.
static UNATTRIBUTED: Site = Site::new(SiteDesc {
    module_path: "gpuspan::wgpu::unattributed",
    ..crate::site::site_desc!("unattributed wgpu pass", SiteKind::Kernel, Backend::Wgpu)
});
inventory::submit! { crate::site::SiteRef(&UNATTRIBUTED) }

/// Passes begun outside every scope while several unrelated selected spans were entered
/// (decision 55): not guessed between; each record names them.
static DURING_SEVERAL: Site = Site::new(SiteDesc {
    module_path: "gpuspan::wgpu::unattributed",
    ..crate::site::site_desc!("during several spans", SiteKind::Kernel, Backend::Wgpu)
});
inventory::submit! { crate::site::SiteRef(&DURING_SEVERAL) }

/// The per-pass record of a pass a scope owns: never submitted, it carries the pass's host
/// interval to the placement of its timestamps.
static OWNED: Site = Site::new(crate::site::site_desc!("wgpu pass", SiteKind::Kernel, Backend::Wgpu));

/// One pass being recorded.
#[derive(Debug)]
pub(crate) struct PassTimer {
    device: Arc<DeviceState>,
    slots: Slots,
    /// The pass keeps its own timestamp writes: they are copied into `slots` (`OwnWrites`).
    own: bool,
    owner: Option<PassSum>,
    /// No owner: the unrelated selected spans entered when it began, where there were several.
    during: Option<Arc<str>>,
    label: Option<Arc<str>>,
    encoder_label: Option<Arc<str>>,
    index: u32,
    pipeline: Option<Arc<str>>,
    thread: u32,
    begun_ns: u64,
    /// What it is: a pass (a kernel), or a copy or clear with its bytes.
    kind: ActivityKind,
    /// A copy's or clear's name: the encoder command (`copy_buffer_to_buffer`).
    command: Option<&'static str>,
}

impl PassTimer {
    /// A pass is begun in an encoder of the instrumented device: `None` when it is not timed
    /// apart (its scope is timed by other means, the device has no timestamps, or too many
    /// batches are waiting).
    pub(crate) fn begin(
        shared: &Shared,
        label: Option<&str>,
        encoder_label: Option<&str>,
        index: u32,
        user_writes: Option<(&wgpu::QuerySet, Option<u32>, Option<u32>)>,
        reads: &mut Vec<OwnWrites>,
    ) -> Option<PassTimer> {
        let device = shared.state.clone();
        if device.mode == Mode::Host {
            return None;
        }
        let (owner, during) = match pass_sum::owner(attach::claim_for_pass) {
            Owner::Timed => return None,
            Owner::Scope(sum) => (Some(sum), None),
            Owner::Nobody => (None, None),
            Owner::Several(names) => (None, Some(names)),
        };
        let (slots, own) = match user_writes {
            None => (pool::take(&device, &shared.queue)?, false),
            // The pass keeps its own writes, and is read from them.
            Some((set, Some(start), Some(end))) => {
                let (slots, buffer) = pool::take_foreign(&device, &shared.queue)?;
                reads.push(OwnWrites { set: set.clone(), start, end, buffer });
                (slots, true)
            }
            Some(_) => {
                note_once(format_args!(
                    "a pass on an instrumented wgpu device writes only one of its own start and end timestamps: \
                     gpuspan leaves them as they are and does not time that pass"
                ));
                return None;
            }
        };
        if let Some(sum) = &owner {
            sum.pass_begun();
        }
        let (thread, _) = crate::thread::next_scope();
        Some(PassTimer {
            device,
            slots,
            own,
            owner,
            during,
            label: label.map(Arc::from),
            encoder_label: encoder_label.map(Arc::from),
            index,
            pipeline: None,
            thread,
            begun_ns: crate::clock::now_ns(),
            kind: ActivityKind::Kernel(KernelGeometry::default()),
            command: None,
        })
    }

    /// A copy or clear (`command`, of `kind`: its bytes) is recorded in an encoder of the
    /// instrumented device: timed by `write_timestamp`s around it, so only where the device has
    /// in-encoder timestamps. `None`: not timed apart (no such timestamps, its scope is timed by
    /// other means, or too many batches are waiting); the caller counts its bytes.
    pub(crate) fn begin_copy(shared: &Shared, command: &'static str, kind: ActivityKind) -> Option<PassTimer> {
        let device = shared.state.clone();
        if device.mode != Mode::InEncoders {
            return None;
        }
        let (owner, during) = match pass_sum::owner(attach::claim_for_pass) {
            Owner::Timed => return None,
            Owner::Scope(sum) => (Some(sum), None),
            Owner::Nobody => (None, None),
            Owner::Several(names) => (None, Some(names)),
        };
        let slots = pool::take(&device, &shared.queue)?;
        if let Some(sum) = &owner {
            sum.pass_begun();
        }
        let (thread, _) = crate::thread::next_scope();
        Some(PassTimer {
            device,
            slots,
            own: false,
            owner,
            during,
            label: None,
            encoder_label: None,
            index: 0,
            pipeline: None,
            thread,
            begun_ns: crate::clock::now_ns(),
            kind,
            command: Some(command),
        })
    }

    /// Records `copy` between the copy's two timestamps, then ends it.
    pub(crate) fn time_copy(self, encoder: &mut wgpu::CommandEncoder, copy: impl FnOnce(&mut wgpu::CommandEncoder)) {
        self.slots.write_start(encoder);
        copy(encoder);
        self.slots.write_end(encoder);
        self.end(|f| encoder.on_submitted_work_done(f));
    }

    /// gpuspan's writes for the pass: the query set, its start and end slots.
    pub(crate) fn writes(&self) -> Option<(wgpu::QuerySet, u32, u32)> {
        if self.own {
            return None;
        }
        let (set, start, end) = self.slots.pass_writes();
        Some((set.clone(), start, end))
    }

    /// The pass's name: its label, else its first pipeline's, else its encoder's and its index
    /// in the encoder.
    fn name(&self) -> Cow<'static, str> {
        if let Some(c) = self.command {
            return Cow::Borrowed(c);
        }
        if let Some(l) = self.label.as_ref().or(self.pipeline.as_ref()) {
            return Cow::Owned(l.to_string());
        }
        match &self.encoder_label {
            Some(e) => Cow::Owned(format!("{e} pass {}", self.index)),
            None => Cow::Owned(format!("pass {}", self.index)),
        }
    }

    /// The pass ended: its record (and activity) wait in the batch for its timestamps, once its
    /// commands executed (`when_executed` runs its callback then, or drops it unrun if they
    /// never are).
    fn end(self, when_executed: impl FnOnce(Box<dyn FnOnce() + Send>)) {
        let slots = self.slots.clone();
        let name = self.name();
        let host = Interval { start_ns: self.begun_ns, end_ns: crate::clock::now_ns() };
        let mut record = Record::new(&OWNED, 0, self.thread, host);
        record.bytes = bytes_of(&self.kind);
        if self.owner.is_none() {
            name_unowned(&mut record, self.during.as_ref(), self.begun_ns);
        }
        record.activities.push(Activity {
            name,
            interval: host,
            kind: self.kind,
            stream: None,
            device: Some(self.device.label.clone()),
            src_device: None,
            dst_device: None,
        });
        let pending = Pending { device: self.device.clone(), slots, owner: self.owner.clone(), record: Some(record) };
        when_executed(Box::new(move || pending.executed()));
    }
}

/// A pass that keeps its own timestamp writes: its encoder resolves them into `buffer` when it
/// is finished, and the batch reads them from there (`pool::take_foreign`).
#[derive(Debug)]
pub(crate) struct OwnWrites {
    set: wgpu::QuerySet,
    start: u32,
    end: u32,
    buffer: wgpu::Buffer,
}

impl OwnWrites {
    /// Encoded as the encoder finishes, after the pass.
    pub(crate) fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.set, self.start..self.start + 1, &self.buffer, 0);
        encoder.resolve_query_set(&self.set, self.end..self.end + 1, &self.buffer, pool::FOREIGN_END);
    }
}

/// A pass whose commands are waiting to execute.
struct Pending {
    device: Arc<DeviceState>,
    slots: Slots,
    owner: Option<PassSum>,
    record: Option<Record>,
}

impl Pending {
    fn executed(mut self) {
        if let Some(record) = self.record.take() {
            let owner = self.owner.take();
            pool::finish(&self.device, &self.slots, Timed::InstrumentedPass(owner), Some(record), false);
        }
    }
}

impl Drop for Pending {
    /// Never executed (the encoder was dropped, or its command buffer never submitted): the
    /// slot pair leaves its batch, the owner stops waiting.
    fn drop(&mut self) {
        if self.record.take().is_some() {
            pool::finish(&self.device, &self.slots, Timed::Passes, None, false);
            if let Some(o) = self.owner.take() {
                let _nothing_given_back = o.pass_done(None);
            }
        }
    }
}

/// The recording of one pass, as its pass object holds it.
#[derive(Debug)]
pub(crate) struct Recording(Option<PassTimer>);

impl Recording {
    pub(crate) fn new(timer: Option<PassTimer>) -> Recording {
        Recording(timer)
    }

    /// A pipeline was set in the pass: the first one names a pass without a label.
    pub(crate) fn pipeline(&mut self, label: Option<&Arc<str>>) {
        if let Some(t) = &mut self.0 {
            if t.pipeline.is_none() {
                t.pipeline = label.cloned();
            }
        }
    }

    /// The pass ends.
    pub(crate) fn end(&mut self, when_executed: impl FnOnce(Box<dyn FnOnce() + Send>)) {
        if let Some(t) = self.0.take() {
            t.end(when_executed);
        }
    }
}

/// A pass no scope owns says which spans were entered when it began: the several unrelated
/// selected ones (`during`: its record goes to `during several spans`), else the unselected one
/// the census saw (`span_scopes::unselected_at`).
fn name_unowned(record: &mut Record, during: Option<&Arc<str>>, begun_ns: u64) {
    use crate::record::{Attributed, Value, DURING_SPANS, OPEN_SPAN};
    match during {
        Some(names) => {
            note_once(format_args!(
                "a pass on an instrumented wgpu device was begun on a thread outside every selected span while \
                 several unrelated ones were entered ({names}): it is not guessed between them but listed as \
                 `during several spans` (its records name them)"
            ));
            record.fields.push((DURING_SPANS, Value::Str(names.to_string().into())));
            record.attributed = Some(Attributed::Ambiguous);
        }
        None => {
            if let Some(name) = crate::span_scopes::unselected_at(begun_ns) {
                record.fields.push((OPEN_SPAN, Value::Str(name.to_string().into())));
            }
        }
    }
}

/// A copy's or clear's bytes.
fn bytes_of(kind: &ActivityKind) -> Option<u64> {
    match kind {
        ActivityKind::Copy { bytes, .. } | ActivityKind::Set { bytes } => Some(*bytes),
        ActivityKind::Kernel(_) => None,
    }
}

/// The site of unattributed passes (or copies, a transfer site) named `name`: one per name, so
/// that the summary and the report list them by name (up to [`MAX_UNATTRIBUTED_SITES`]).
fn unattributed_site(name: &str, copy: bool) -> &'static Site {
    let Ok(mut sites) = super::super::REGISTRY.unattributed.lock() else { return &UNATTRIBUTED };
    if let Some((_, s)) = sites.iter().find(|(n, s)| &**n == name && (s.desc.kind == SiteKind::Transfer) == copy) {
        return s;
    }
    if sites.len() >= MAX_UNATTRIBUTED_SITES {
        return &UNATTRIBUTED;
    }
    let leaked: &'static str = Box::leak(format!("unattributed: {name}").into_boxed_str());
    let desc = match copy {
        // A copy inside one device's memory (its bandwidth is from its own two timestamps).
        true => SiteDesc {
            module_path: "gpuspan::wgpu::unattributed",
            direction: Some(crate::site::Direction::GpuToGpu),
            ..crate::site::site_desc!(leaked, SiteKind::Transfer, Backend::Wgpu)
        },
        false => SiteDesc {
            module_path: "gpuspan::wgpu::unattributed",
            ..crate::site::site_desc!(leaked, SiteKind::Kernel, Backend::Wgpu)
        },
    };
    let site: &'static Site = Box::leak(Box::new(Site::new(desc)));
    crate::site::register_at_run_time(site);
    sites.push((Arc::from(name), site));
    site
}

/// Attributes a resolved pass: to its owner, as an activity, or as a record of its own (no
/// owner, or an owner forgotten before the pass came back).
pub(crate) fn resolved(owner: Option<PassSum>, record: Record) {
    let mut record = record;
    if let Some(gpu) = &record.gpu {
        let interval = gpu.interval;
        for a in &mut record.activities {
            a.interval = interval;
        }
    }
    let orphan = match owner {
        Some(sum) if record.gpu.is_some() && !record.activities.is_empty() => sum.pass_done(Some(record)),
        Some(sum) => sum.pass_done(None),
        None => Some(record),
    };
    if let Some(record) = orphan {
        unattributed(record);
    }
}

/// A pass no scope holds (none owned it, or its owner was forgotten): a record of its own, on
/// the `unattributed` site of its name.
pub(crate) fn unattributed(mut record: Record) {
    if record.attributed == Some(crate::record::Attributed::Ambiguous) {
        record.site = &DURING_SEVERAL;
    } else if let Some(a) = record.activities.first() {
        record.site = unattributed_site(&a.name, bytes_of(&a.kind).is_some());
    }
    pass_sum::unattributed(record);
}
