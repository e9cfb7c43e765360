//! Attribution: which annotated call every CUPTI record belongs to, and when a call has all of
//! its records so that it can be handed on.
//!
//! # The rule
//!
//! Each scope pushes its id as a CUPTI external correlation id. For every driver or runtime API
//! call made while it is pushed, CUPTI writes an `EXTERNAL_CORRELATION` record (scope id →
//! CUPTI correlation id) next to the API record; kernels, copies and sets carry the correlation
//! id of the API call that enqueued them. A scope is resolved when all of these hold:
//!
//! 1. it has ended on the host (no more API calls can join it);
//! 2. **fence**: every activity buffer CUPTI had asked for when the scope ended has come back.
//!    Host-side records (API and external correlation) are written during the call, so they lie
//!    in those buffers: after the fence, the scope's set of correlation ids is complete;
//! 3. **expectations**: every API call of the scope that enqueues GPU work (a launch, memcpy,
//!    memset or graph launch that returned success) has at least one activity record. Device
//!    records are written when the work finishes, possibly into a later buffer.
//!
//! Waiting for a buffer never blocks the caller: CUPTI hands buffers back when they fill, and
//! gpuspan's resolver thread asks for completed ones every few milliseconds while scopes are
//! pending (`cuptiActivityFlushAll(0)`, which returns only buffers whose records are complete);
//! `gpuspan::flush()` does the same until nothing is pending or its deadline passes.
//!
//! A correlation id that has no external id once every buffer up to the one holding its record
//! has come back was called outside any scope: its activities become records of the
//! `unattributed` site. So do activities that arrive after their scope was resolved (which rule 3
//! makes rare: only a graph launch whose records straddle buffers). A scope whose expectations
//! are still unmet [`STALE_NS`] after its fence passed is resolved with what it has, and counted.

use super::callbacks::{work_of, Work};
use super::records::{self, Raw, RawApi};
use crate::record::{Activity, ActivityKind, DeviceLabel, GpuTiming, Interval, KernelGeometry, MemoryKind, Record};
use crate::site::{Backend, Site, SiteDesc, SiteKind};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// The site of GPU work launched outside every annotated call.
pub(crate) static UNATTRIBUTED: Site = Site::new(SiteDesc {
    name: "unattributed",
    function: "unattributed",
    kind: SiteKind::Kernel,
    backend: Backend::Cuda,
    module_path: "gpuspan::cuda",
    file: file!(),
    line: line!(),
    direction: None,
    threshold_us: None,
    trace_all: false,
    track_memory: false,
});
inventory::submit! { crate::site::SiteRef(&UNATTRIBUTED) }

/// How long a scope past its fence waits for missing device records before it is resolved
/// with what it has.
pub(crate) const STALE_NS: u64 = 30_000_000_000;

/// External correlation kind gpuspan pushes (`CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`).
pub const EXTERNAL_KIND: u32 =
    cudarc::cupti::sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 as u32;

#[derive(Debug)]
struct Ended {
    record: Record,
    fence: u64,
    /// Host time the fence was first seen passed, for [`STALE_NS`].
    fence_passed_ns: Option<u64>,
}

#[derive(Debug, Default)]
struct Pending {
    ended: Option<Ended>,
    correlation_ids: Vec<u32>,
    expected: Vec<(u32, Work)>,
    activities: Vec<(u32, Activity)>,
}

/// Which buffers came back: all up to `prefix`, and those in `above`.
#[derive(Debug, Default)]
struct Delivered {
    prefix: u64,
    above: BTreeSet<u64>,
}

impl Delivered {
    fn mark(&mut self, seq: u64) {
        if seq <= self.prefix {
            return;
        }
        self.above.insert(seq);
        while self.above.remove(&(self.prefix + 1)) {
            self.prefix += 1;
        }
    }
}

/// Counts of what a resolver did, for tests and the GPU report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// Scopes handed on with their activities.
    pub scopes_resolved: u64,
    /// Activities no scope claimed: recorded under the `unattributed` site.
    pub unattributed_activities: u64,
    /// Scopes resolved with what they had once their records stopped coming.
    pub stale_scopes: u64,
    /// Activities without valid timestamps (incomplete records from a forced flush).
    pub invalid_activities: u64,
}

/// The attribution state. Fed with buffers and ended scopes in any order; hands out resolved
/// records. Lent to tests by `replay` so that they can replay captured CUPTI traffic through it.
#[derive(Debug)]
pub struct Resolver {
    scopes: HashMap<u64, Pending>,
    correlation: HashMap<u32, u64>,
    /// Work-enqueuing API records without an external id, with the buffer they came in.
    api_waiting: Vec<(u64, RawApi)>,
    /// Work-enqueuing API calls made outside every scope: their host interval.
    outside: HashMap<u32, Interval>,
    /// Activities whose correlation id is not known yet, with the buffer they came in.
    orphans: Vec<(u64, u32, Activity)>,
    delivered: Delivered,
    names: HashMap<u64, &'static str>,
    devices: Vec<DeviceLabel>,
    counts: Counts,
    /// CUPTI's clock minus the host clock, and the error of that offset.
    clock_offset_ns: i64,
    clock_error_ns: u64,
}

impl Resolver {
    /// `devices[i]` labels CUPTI device id `i`.
    pub fn new(devices: Vec<DeviceLabel>) -> Self {
        Resolver {
            scopes: HashMap::new(),
            correlation: HashMap::new(),
            api_waiting: Vec::new(),
            outside: HashMap::new(),
            orphans: Vec::new(),
            delivered: Delivered::default(),
            names: HashMap::new(),
            devices,
            counts: Counts::default(),
            clock_offset_ns: 0,
            clock_error_ns: 0,
        }
    }

    /// How CUPTI's timestamps map onto the host clock: `host = cupti - offset_ns`, within
    /// `error_ns`. Replays of captured traffic leave it at 0.
    pub fn set_clock(&mut self, offset_ns: i64, error_ns: u64) {
        self.clock_offset_ns = offset_ns;
        self.clock_error_ns = error_ns;
    }

    fn host_ns(&self, cupti_ns: u64) -> u64 {
        (cupti_ns as i64 - self.clock_offset_ns).max(0) as u64
    }

    /// What it has done so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Scopes that ended and are not resolved yet, plus activities not yet attributed.
    pub fn pending(&self) -> usize {
        self.scopes.values().filter(|p| p.ended.is_some()).count() + self.orphans.len() + self.api_waiting.len()
    }

    /// A scope ended; `fence` = number of buffers CUPTI had requested by then.
    pub fn ended(&mut self, record: Record, fence: u64) {
        let p = self.scopes.entry(record.scope_id).or_default();
        p.ended = Some(Ended { record, fence, fence_passed_ns: None });
    }

    /// Buffer `seq` came back with these records; `name` reads the kernel name behind a pointer.
    pub fn buffer(&mut self, seq: u64, records: &[Raw], name: &mut dyn FnMut(u64) -> Option<String>) {
        // External correlation records first: within a buffer they precede their API records,
        // but nothing below depends on that order.
        for r in records {
            if let Raw::External(e) = r {
                if e.external_kind == EXTERNAL_KIND {
                    self.correlation.insert(e.correlation_id, e.external_id);
                    self.scopes.entry(e.external_id).or_default().correlation_ids.push(e.correlation_id);
                }
            }
        }
        for r in records {
            match r {
                Raw::Api(a) => {
                    let Some(work) = work_of(a.domain, a.cbid) else { continue };
                    if a.return_value != 0 {
                        continue; // a failed call enqueues nothing
                    }
                    match self.correlation.get(&a.correlation_id) {
                        Some(scope) => {
                            self.scopes.entry(*scope).or_default().expected.push((a.correlation_id, work));
                        }
                        None => self.api_waiting.push((seq, a.clone())),
                    }
                }
                Raw::Kernel(_) | Raw::Memcpy(_) | Raw::Memset(_) => {
                    let Some(c) = r.correlation_id() else { continue };
                    let Some(activity) = self.activity(r, name) else {
                        self.counts.invalid_activities += 1;
                        continue;
                    };
                    match self.correlation.get(&c) {
                        Some(scope) => self.scopes.entry(*scope).or_default().activities.push((c, activity)),
                        None => self.orphans.push((seq, c, activity)),
                    }
                }
                Raw::External(_) | Raw::Other { .. } => {}
            }
        }
        self.delivered.mark(seq);
    }

    /// Resolves everything that can be; `now_ns` is the host clock (for `STALE_NS`).
    pub fn poll(&mut self, now_ns: u64) -> Vec<Record> {
        let mut out = Vec::new();
        let prefix = self.delivered.prefix;

        // API calls without an external id, once their buffer and all before it are in.
        let mut i = 0;
        while i < self.api_waiting.len() {
            let (seq, a) = &self.api_waiting[i];
            if let Some(scope) = self.correlation.get(&a.correlation_id) {
                if let Some(work) = work_of(a.domain, a.cbid) {
                    self.scopes.entry(*scope).or_default().expected.push((a.correlation_id, work));
                }
                self.api_waiting.swap_remove(i);
            } else if *seq <= prefix {
                let host = Interval { start_ns: self.host_ns(a.start), end_ns: self.host_ns(a.end) };
                self.outside.insert(a.correlation_id, host);
                self.api_waiting.swap_remove(i);
            } else {
                i += 1;
            }
        }

        // Activities whose correlation id was unknown when they arrived.
        let mut i = 0;
        while i < self.orphans.len() {
            let (seq, c, _) = &self.orphans[i];
            let c = *c;
            if let Some(scope) = self.correlation.get(&c).copied() {
                let (_, _, a) = self.orphans.swap_remove(i);
                self.scopes.entry(scope).or_default().activities.push((c, a));
            } else if *seq <= prefix {
                let (_, _, a) = self.orphans.swap_remove(i);
                let host = self.outside.get(&c).copied().unwrap_or(a.interval);
                self.counts.unattributed_activities += 1;
                out.push(unattributed(a, host, self.clock_error_ns));
            } else {
                i += 1;
            }
        }
        if self.outside.len() > 100_000 {
            self.outside.clear(); // calls whose activities never came (kinds gpuspan does not record)
        }

        // Scopes.
        let ready: Vec<u64> = self
            .scopes
            .iter_mut()
            .filter_map(|(id, p)| {
                let e = p.ended.as_mut()?;
                if prefix < e.fence {
                    return None;
                }
                let passed = *e.fence_passed_ns.get_or_insert(now_ns);
                let complete = p.expected.iter().all(|(c, _)| p.activities.iter().any(|(ac, _)| ac == c));
                if complete {
                    return Some(*id);
                }
                if now_ns.saturating_sub(passed) >= STALE_NS {
                    self.counts.stale_scopes += 1;
                    return Some(*id);
                }
                None
            })
            .collect();
        for id in ready {
            let Some(p) = self.scopes.remove(&id) else { continue };
            for c in &p.correlation_ids {
                self.correlation.remove(c);
            }
            let Some(e) = p.ended else { continue };
            self.counts.scopes_resolved += 1;
            out.push(finish(e.record, p.activities.into_iter().map(|(_, a)| a).collect(), self.clock_error_ns));
        }
        out
    }

    fn device(&self, id: u32) -> Option<DeviceLabel> {
        self.devices.get(id as usize).cloned()
    }

    fn kernel_name(&mut self, ptr: u64, name: &mut dyn FnMut(u64) -> Option<String>) -> &'static str {
        if let Some(n) = self.names.get(&ptr) {
            return n;
        }
        let n: &'static str = match name(ptr) {
            Some(mangled) => Box::leak(demangle(&mangled).into_boxed_str()),
            None => "kernel",
        };
        self.names.insert(ptr, n);
        n
    }

    fn activity(&mut self, r: &Raw, name: &mut dyn FnMut(u64) -> Option<String>) -> Option<Activity> {
        let off = self.clock_offset_ns;
        let host = |t: u64| (t as i64 - off).max(0) as u64;
        let valid = |s: u64, e: u64| (s > 0 && e >= s).then(|| Interval { start_ns: host(s), end_ns: host(e) });
        Some(match r {
            Raw::Kernel(k) => {
                let interval = valid(k.start, k.end)?;
                let dim = |v: [i32; 3]| v.map(|x| x.max(0) as u32);
                Activity {
                    name: Cow::Borrowed(self.kernel_name(k.name_ptr, name)),
                    interval,
                    kind: ActivityKind::Kernel(KernelGeometry {
                        grid: dim(k.grid),
                        block: dim(k.block),
                        registers_per_thread: k.registers_per_thread.into(),
                        static_shared_bytes: k.static_shared.max(0) as u32,
                        dynamic_shared_bytes: k.dynamic_shared.max(0) as u32,
                    }),
                    stream: Some(k.stream.into()),
                    device: self.device(k.device),
                    src_device: None,
                    dst_device: None,
                }
            }
            Raw::Memcpy(m) => Activity {
                name: Cow::Borrowed(records::copy_name(m.copy_kind)),
                interval: valid(m.start, m.end)?,
                kind: ActivityKind::Copy {
                    bytes: m.bytes,
                    // A MEMCPY2 record is device to device whatever its copy kind says.
                    direction: records::copy_direction(m.copy_kind)
                        .or(m.peer.map(|_| crate::site::Direction::GpuToGpu)),
                    src: records::memory_kind(m.src_kind.into()),
                    dst: records::memory_kind(m.dst_kind.into()),
                },
                stream: Some(m.stream.into()),
                device: self.device(m.device),
                src_device: m.peer.and_then(|p| self.device(p.src_device)),
                dst_device: m.peer.and_then(|p| self.device(p.dst_device)),
            },
            Raw::Memset(m) => Activity {
                name: Cow::Borrowed("memset"),
                interval: valid(m.start, m.end)?,
                kind: ActivityKind::Set { bytes: m.bytes },
                stream: Some(m.stream.into()),
                device: self.device(m.device),
                src_device: None,
                dst_device: None,
            },
            _ => return None,
        })
    }
}

/// Demangles a C++ kernel name; `extern "C"` names and anything unparsable stay as they are.
pub(crate) fn demangle(mangled: &str) -> String {
    cpp_demangle::Symbol::new(mangled).ok().and_then(|s| s.demangle().ok()).unwrap_or_else(|| mangled.to_owned())
}

/// Length of the union of the intervals (time the GPU was busy with at least one of them).
pub(crate) fn busy_ns(intervals: &mut [Interval]) -> u64 {
    intervals.sort_by_key(|i| i.start_ns);
    let mut total = 0;
    let mut cur: Option<Interval> = None;
    for i in intervals.iter() {
        match &mut cur {
            Some(c) if i.start_ns <= c.end_ns => c.end_ns = c.end_ns.max(i.end_ns),
            _ => {
                if let Some(c) = cur.take() {
                    total += c.duration_ns();
                }
                cur = Some(*i);
            }
        }
    }
    total + cur.map_or(0, |c| c.duration_ns())
}

/// The record of a call with its activities: GPU envelope, busy time, bytes, device.
/// `clock_error_ns` bounds the mapping of CUPTI's clock onto the host clock.
pub(crate) fn finish(mut record: Record, mut activities: Vec<Activity>, clock_error_ns: u64) -> Record {
    activities.sort_by_key(|a| a.interval.start_ns);
    if activities.is_empty() {
        return record; // no GPU work was launched inside: host timing, labelled as such
    }
    let mut intervals: Vec<Interval> = activities.iter().map(|a| a.interval).collect();
    let envelope = Interval {
        start_ns: intervals.iter().map(|i| i.start_ns).min().unwrap_or(0),
        end_ns: intervals.iter().map(|i| i.end_ns).max().unwrap_or(0),
    };
    let device = activities[0].device.clone().filter(|d| activities.iter().all(|a| a.device.as_ref() == Some(d)));
    record.gpu = Some(GpuTiming {
        interval: envelope,
        busy_ns: busy_ns(&mut intervals),
        source: crate::record::TimingSource::Cupti,
        clock_error_ns,
        bracketed: false,
        bracket_at_exit: false,
        device,
    });
    let copied: Option<u64> = activities
        .iter()
        .filter_map(|a| match a.kind {
            ActivityKind::Copy { bytes, .. } => Some(bytes),
            _ => None,
        })
        .reduce(|a, b| a + b);
    if record.bytes.is_none() {
        record.bytes = copied;
    }
    let pageable = activities.iter().any(|a| {
        matches!(
            a.kind,
            ActivityKind::Copy { src: MemoryKind::Pageable, .. } | ActivityKind::Copy { dst: MemoryKind::Pageable, .. }
        )
    });
    if pageable && record.site.desc.kind == SiteKind::Transfer {
        crate::diagnostics::note_once(format_args!(
            "`{}` copies pageable host memory: a pinned host buffer (cudarc: CudaContext::alloc_pinned) usually \
             transfers several times faster",
            record.site.desc.name
        ));
    }
    record.activities = activities;
    record
}

fn unattributed(a: Activity, host: Interval, clock_error_ns: u64) -> Record {
    let bytes = match a.kind {
        ActivityKind::Copy { bytes, .. } | ActivityKind::Set { bytes } => Some(bytes),
        ActivityKind::Kernel(_) => None,
    };
    let mut record = Record::new(&UNATTRIBUTED, 0, 0, host);
    record.bytes = bytes;
    finish(record, vec![a], clock_error_ns)
}

/// Device labels for CUPTI device ids, from the driver's names.
pub fn device_labels(names: Vec<String>) -> Vec<DeviceLabel> {
    names.into_iter().enumerate().map(|(i, n)| DeviceLabel { id: i as u32, name: Arc::from(n) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_the_union() {
        let iv = |s, e| Interval { start_ns: s, end_ns: e };
        assert_eq!(busy_ns(&mut [iv(0, 10), iv(5, 15), iv(20, 30)]), 25);
        assert_eq!(busy_ns(&mut []), 0);
    }

    #[test]
    fn delivered_prefix_advances_over_gaps() {
        let mut d = Delivered::default();
        d.mark(2);
        assert_eq!(d.prefix, 0);
        d.mark(1);
        assert_eq!(d.prefix, 2);
        d.mark(4);
        d.mark(3);
        assert_eq!(d.prefix, 4);
    }

    /// A peer copy (CUPTI's MEMCPY2) joins the scope whose call enqueued it, which then waits
    /// for it like for any copy, and carries the devices it ran on, read from and wrote to.
    #[test]
    fn a_peer_copy_is_attributed_with_its_devices() {
        use super::super::records::{ApiDomain, PeerDevices, RawExternal, RawMemcpy};
        use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as D;
        static COPY: Site = Site::new(SiteDesc {
            name: "peer",
            function: "peer",
            kind: SiteKind::Transfer,
            backend: Backend::Cuda,
            module_path: "tests",
            file: file!(),
            line: line!(),
            direction: Some(crate::site::Direction::GpuToGpu),
            threshold_us: None,
            trace_all: false,
            track_memory: false,
        });
        let labels = device_labels(vec!["GPU A".into(), "GPU B".into()]);
        let mut r = Resolver::new(labels.clone());
        r.ended(Record::new(&COPY, 5, 1, Interval { start_ns: 100, end_ns: 200 }), 1);
        let api = RawApi {
            domain: ApiDomain::Driver,
            cbid: D::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync as u32,
            start: 110,
            end: 150,
            thread_id: 1,
            correlation_id: 77,
            return_value: 0,
        };
        let ext = RawExternal { external_kind: EXTERNAL_KIND, external_id: 5, correlation_id: 77 };
        r.buffer(1, &[Raw::External(ext), Raw::Api(api)], &mut |_| None);
        assert!(r.poll(1_000).is_empty(), "the copy's record has not come: the scope waits for it");
        let copy = RawMemcpy {
            copy_kind: 10,
            src_kind: 3,
            dst_kind: 3,
            bytes: 1 << 20,
            start: 300,
            end: 400,
            device: 1,
            context: 2,
            stream: 9,
            correlation_id: 77,
            peer: Some(PeerDevices { src_device: 0, dst_device: 1 }),
        };
        r.buffer(2, &[Raw::Memcpy(copy)], &mut |_| None);
        let out = r.poll(2_000);
        assert_eq!(out.len(), 1);
        let rec = &out[0];
        assert_eq!(rec.bytes, Some(1 << 20));
        assert_eq!(rec.gpu.as_ref().and_then(|g| g.device.clone()), Some(labels[1].clone()));
        let a = &rec.activities[0];
        assert_eq!((a.src_device.as_ref(), a.dst_device.as_ref()), (Some(&labels[0]), Some(&labels[1])));
        assert!(matches!(a.kind, ActivityKind::Copy { direction: Some(crate::site::Direction::GpuToGpu), .. }));
        let attrs = a.attributes(rec);
        assert!(attrs.contains(&("gpu_transfer.src_device.id", crate::record::Value::I64(0))), "{attrs:?}");
        assert!(attrs.contains(&("gpu_transfer.dst_device.id", crate::record::Value::I64(1))), "{attrs:?}");
        assert!(attrs.contains(&("gpu.device.id", crate::record::Value::I64(1))), "{attrs:?}");
    }

    #[test]
    fn demangles_cxx_and_keeps_c_names() {
        assert_eq!(demangle("_Z4spinyPy"), "spin(unsigned long long, unsigned long long*)");
        assert_eq!(demangle("saxpy"), "saxpy");
    }
}
