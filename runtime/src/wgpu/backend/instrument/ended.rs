//! What a timed pass (or copy) of an instrumented device was begun with, and where it goes once
//! its timestamps are read (or lost): to the scope that owns it, or to a record of its own,
//! `unattributed`. Apart from `pass.rs`, which times passes with the device's slot pairs, so
//! that the bracket pool (`pool.rs`), which delivers them, imports neither the encoder's side
//! nor the device it belongs to through it (decision 70).

use crate::diagnostics::note_once;
use crate::record::{Activity, ActivityKind, Interval, Record};
use crate::site::{Backend, Site, SiteDesc, SiteKind};
use crate::wgpu::pass_sum::{self, PassSum};
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

/// What a pass (or copy) was begun with: its record is made from it once its timestamps are read.
#[derive(Debug)]
pub(crate) struct EndedPass {
    pub(super) device: crate::record::DeviceLabel,
    pub(super) owner: Option<PassSum>,
    /// No owner: the unrelated selected spans entered when it began, where there were several.
    pub(super) during: Option<Arc<str>>,
    /// No owner, and the census of unselected spans was on when it began: its record names the
    /// one entered then (`span_scopes::named_at`).
    pub(super) census: bool,
    pub(super) label: Option<Arc<str>>,
    pub(super) encoder_label: Option<Arc<str>>,
    pub(super) index: u32,
    pub(super) pipeline: Option<Arc<str>>,
    pub(super) thread: u32,
    pub(super) begun_ns: u64,
    pub(super) ended_ns: u64,
    /// What it is: a pass (a kernel), or a copy or clear with its bytes.
    pub(super) kind: ActivityKind,
    /// A copy's or clear's name: the encoder command (`copy_buffer_to_buffer`).
    pub(super) command: Option<&'static str>,
}

impl EndedPass {
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

    /// Its record, with its activity: the host interval from its begin to its end; the GPU
    /// time is added from its timestamps (`pool::deliver`).
    pub(crate) fn record(&self) -> Record {
        let host = Interval { start_ns: self.begun_ns, end_ns: self.ended_ns };
        let mut record = Record::new(&OWNED, 0, self.thread, host);
        record.bytes = bytes_of(&self.kind);
        if self.owner.is_none() {
            name_unowned(&mut record, self.during.as_ref(), self.census.then_some(self.begun_ns));
        }
        record.activities.push(Activity {
            name: self.name(),
            interval: host,
            kind: self.kind.clone(),
            stream: None,
            device: Some(self.device.clone()),
            src_device: None,
            dst_device: None,
        });
        record
    }
}

/// A pass no scope owns says which spans were entered when it began: the several unrelated
/// selected ones (`during`: its record goes to `during several spans`), else the unselected one
/// the census saw entered at `named_at_ns` (its begin, where the census was on then).
fn name_unowned(record: &mut Record, during: Option<&Arc<str>>, named_at_ns: Option<u64>) {
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
            if let Some(name) = named_at_ns.and_then(crate::span_scopes::named_at) {
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
    crate::sites::register_at_run_time(site);
    sites.push((Arc::from(name), site));
    site
}

/// Attributes a resolved pass (`record`: with its timestamps; `None`: its batch was lost) to its
/// owner, as an activity, or as a record of its own (no owner, or an owner forgotten before the
/// pass came back).
pub(crate) fn resolved(pass: EndedPass, record: Option<Record>) {
    let mut record = record.unwrap_or_else(|| pass.record());
    let owner = pass.owner;
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
