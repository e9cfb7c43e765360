//! A call's record from the activities attributed to it: GPU envelope, busy time, bytes,
//! device, the pinning hint; and the record of work no call claimed.

use crate::record::{Activity, ActivityKind, DeviceLabel, GpuTiming, Interval, MemoryKind, Record, STAGED_PEER_COPY};
use crate::site::{Backend, Site, SiteDesc, SiteKind};
use std::sync::Arc;

/// The site of GPU work launched outside every annotated call.
pub(crate) static UNATTRIBUTED: Site = Site::new(SiteDesc {
    module_path: "gpuspan::cuda",
    ..crate::site::site_desc!("unattributed", SiteKind::Kernel, Backend::Cuda)
});
inventory::submit! { crate::site::SiteRef(&UNATTRIBUTED) }

/// The site of GPU work launched outside every scope while several unrelated selected spans
/// were entered (decision 55): which one asked for it is not guessed. Each record names them.
pub(crate) static DURING_SEVERAL: Site = Site::new(SiteDesc {
    module_path: "gpuspan::cuda",
    ..crate::site::site_desc!("during several spans", SiteKind::Kernel, Backend::Cuda)
});
inventory::submit! { crate::site::SiteRef(&DURING_SEVERAL) }

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
    if pair_staged_peer_halves(&mut activities) {
        crate::diagnostics::note_once(format_args!(
            "`{}` copied between GPUs through host memory (CUPTI reports such a copy as a DtoH on the source and an \
             HtoD on the destination): its records do not time the transfer, so it gets no bandwidth. Peer access \
             does not cover memory from CUDA's stream-ordered pools (cudarc allocates there where the device has \
             them): grant it with cuMemPoolSetAccess on each device's default pool, and the copy goes GPU to GPU",
            record.site.desc.name
        ));
    }
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

/// Joins each pair of halves of a copy between two GPUs that the driver staged through host
/// memory into one activity from the source to the destination ([`STAGED_PEER_COPY`]): CUDA 13's
/// CUPTI gave `cuMemcpyPeerAsync` between two H200s as a "DtoH" on the source device and, after
/// it, an "HtoD" on the destination, both with device memory at each end and the copy's bytes,
/// and no `MEMCPY2` record (tests/fixtures/cuda/two-h200-rank0.dump). A half pairs with the
/// first later half of the other kind, on another device, of as many bytes. `activities` are in
/// start order. Whether any pair was joined.
fn pair_staged_peer_halves(activities: &mut Vec<Activity>) -> bool {
    use crate::site::Direction::{CpuToGpu, GpuToCpu, GpuToGpu};
    let half = |a: &Activity, want| match a.kind {
        ActivityKind::Copy { bytes, direction, src: MemoryKind::Device, dst: MemoryKind::Device }
            if direction == Some(want) && a.device.is_some() && a.src_device.is_none() =>
        {
            Some(bytes)
        }
        _ => None,
    };
    let mut joined = false;
    let mut i = 0;
    while i < activities.len() {
        let Some(bytes) = half(&activities[i], GpuToCpu) else {
            i += 1;
            continue;
        };
        let partner = (i + 1..activities.len())
            .find(|&j| half(&activities[j], CpuToGpu) == Some(bytes) && activities[j].device != activities[i].device);
        let Some(j) = partner else {
            i += 1;
            continue;
        };
        let second = activities.remove(j);
        let first = &mut activities[i];
        first.name = STAGED_PEER_COPY.into();
        first.interval.end_ns = first.interval.end_ns.max(second.interval.end_ns);
        first.kind =
            ActivityKind::Copy { bytes, direction: Some(GpuToGpu), src: MemoryKind::Device, dst: MemoryKind::Device };
        first.src_device = first.device.clone();
        first.dst_device = second.device;
        joined = true;
        i += 1;
    }
    joined
}

/// Work no call or span owned; `open_span` names the unselected span entered at its launch,
/// where the census knew one (`span_scopes::unselected_at`).
pub(super) fn unattributed(a: Activity, host: Interval, clock_error_ns: u64, open_span: Option<Arc<str>>) -> Record {
    let bytes = match a.kind {
        ActivityKind::Copy { bytes, .. } | ActivityKind::Set { bytes } => Some(bytes),
        ActivityKind::Kernel(_) => None,
    };
    let mut record = Record::new(&UNATTRIBUTED, 0, 0, host);
    record.bytes = bytes;
    if let Some(name) = open_span {
        record.fields.push((crate::record::OPEN_SPAN, crate::record::Value::Str(name.to_string().into())));
    }
    finish(record, vec![a], clock_error_ns)
}

pub(super) fn during_several(a: Activity, host: Interval, clock_error_ns: u64, spans: Arc<str>) -> Record {
    crate::diagnostics::note_once(format_args!(
        "GPU work was launched on a thread outside every selected span while several unrelated ones were entered \
         ({spans}): it is not guessed between them but listed as `during several spans` (its records name them). \
         Enter the span on the launching thread (`Span::current()` sent with the work) to attribute it"
    ));
    let mut record = unattributed(a, host, clock_error_ns, None);
    record.site = &DURING_SEVERAL;
    record.fields.push((crate::record::DURING_SPANS, crate::record::Value::Str(spans.to_string().into())));
    record.attributed = Some(crate::record::Attributed::Ambiguous);
    record
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
    fn demangles_cxx_and_keeps_c_names() {
        assert_eq!(demangle("_Z4spinyPy"), "spin(unsigned long long, unsigned long long*)");
        assert_eq!(demangle("saxpy"), "saxpy");
    }
}
