//! Attribution's unit tests: buffers, peer copies, and work CUPTI timed before its call.
use super::super::finish::device_labels;
use super::*;
use crate::site::{Backend, Site, SiteDesc, SiteKind};

impl Resolver {
    /// `rule` answers whose a call outside every scope is, by time, instead of the span
    /// layer's log.
    fn set_by_time(&mut self, rule: fn(u64) -> ByTime) {
        self.by_time = rule;
    }

    /// `rule` names the unselected spans entered at a host instant, instead of the span
    /// layer's census.
    fn set_unselected_at(&mut self, rule: fn(u64) -> Option<Arc<str>>) {
        self.unselected_at = rule;
    }
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
        direction: Some(crate::site::Direction::GpuToGpu),
        ..crate::site::site_desc!("peer", SiteKind::Transfer, Backend::Cuda)
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
    r.buffer(1, 1_000, &[Raw::External(ext), Raw::Api(api)], &mut |_| None);
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
        flags: 1,
        peer: Some(PeerDevices { src_device: 0, dst_device: 1 }),
    };
    r.buffer(2, 2_000, &[Raw::Memcpy(copy)], &mut |_| None);
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

/// A copy CUPTI timestamps before the call that launched it (its GPU-clock normalisation is
/// off, which the CPU-clock calibration cannot see): the launch fact contradicts the
/// calibration, which is flagged for measuring again, and the copy is placed no earlier than its
/// call, so the causality check finds nothing to move; the stated error covers the placement.
#[test]
fn work_timed_before_its_launching_call_is_placed_after_it_by_the_facts() {
    use super::super::records::{ApiDomain, RawExternal, RawMemcpy};
    use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as D;
    static COPY: Site = Site::new(SiteDesc {
        direction: Some(crate::site::Direction::CpuToGpu),
        ..crate::site::site_desc!("early", SiteKind::Transfer, Backend::Cuda)
    });
    let mut r = Resolver::new(device_labels(vec!["GPU A".into()]));
    // CUPTI's CPU clock is the host's, known to ±50 ns.
    let cal = crate::placement::ClockMap { offset_ns: 0, error_ns: 50, taken_at_ns: 1_000 };
    r.calibrate(|again| {
        assert!(!again, "nothing contradicted it yet");
        cal
    });
    r.ended(Record::new(&COPY, 6, 1, Interval { start_ns: 1_000, end_ns: 2_000 }), 1);
    let api = RawApi {
        domain: ApiDomain::Driver,
        cbid: D::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 as u32,
        start: 1_100,
        end: 1_200,
        thread_id: 1,
        correlation_id: 78,
        return_value: 0,
    };
    let ext = RawExternal { external_kind: EXTERNAL_KIND, external_id: 6, correlation_id: 78 };
    let copy = RawMemcpy {
        copy_kind: 1,
        src_kind: 1,
        dst_kind: 3,
        bytes: 4096,
        start: 700, // 400 ns before its call started
        end: 900,
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: 78,
        flags: 1,
        peer: None,
    };
    r.buffer(1, 5_000, &[Raw::External(ext), Raw::Api(api), Raw::Memcpy(copy)], &mut |_| None);
    let mut out = r.poll(10_000);
    assert_eq!(out.len(), 1);
    let gpu = out[0].gpu.clone().expect("GPU timing");
    // No earlier than the call's start as the calibration maps it at the earliest.
    assert!(gpu.interval.start_ns >= 1_100 - 50 - 1, "{gpu:?}");
    assert_eq!(gpu.interval.duration_ns(), 200, "placing moves, never stretches");
    // The truth (the copy ran somewhere between its launch and its buffer's delivery) lies
    // within the stated error.
    assert!(gpu.interval.end_ns + gpu.clock_error_ns >= 5_000 && gpu.interval.start_ns <= 1_100 + gpu.clock_error_ns);
    let mut asked_again = false;
    r.calibrate(|again| {
        asked_again = again;
        cal
    });
    assert!(asked_again, "the calibration is measured again");
    crate::collector::collector().checks.enforce(&mut out[0]);
    assert_eq!(out[0].clock_corrected_ns, 0, "nothing left for the causality check to move");
    assert!(
        r.clock_lines()[0].starts_with("GPU clock of GPU 0: GPU A (CUPTI): 1 records placed"),
        "{:?}",
        r.clock_lines()
    );
}

/// A launch on a thread with no scope (a framework's device thread): the one selected span
/// entered elsewhere at its start gets it, labelled `time`, and waits for its kernel; a launch
/// while two unrelated spans were entered goes to `during several spans`, naming them; one while
/// none was stays `unattributed`.
#[test]
fn launches_outside_every_scope_go_by_time_to_the_one_span_entered_then_and_are_never_guessed() {
    use super::super::records::{ApiDomain, RawKernel};
    use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as D;
    // The span layer's log, synthetic: span scope 40 entered over [1_000, 2_000), two unrelated
    // spans over [3_000, 4_000), nobody after.
    fn rule(t: u64) -> ByTime {
        match t {
            1_000..2_000 => ByTime::One(40),
            3_000..4_000 => ByTime::Several("forward_pass ×2".into()),
            _ => ByTime::Nobody,
        }
    }
    static SPAN: std::sync::LazyLock<&'static Site> = std::sync::LazyLock::new(|| {
        Box::leak(Box::new(Site::for_span(crate::site::site_desc!("forward_pass", SiteKind::Kernel, Backend::Cuda))))
    });
    let mut r = Resolver::new(device_labels(vec!["GPU A".into()]));
    r.set_by_time(rule);
    // The census of unselected spans saw `serve` entered after 4_500.
    r.set_unselected_at(|t| (t >= 4_500).then(|| "serve".into()));
    let launch = |correlation_id: u32, start: u64| {
        Raw::Api(RawApi {
            domain: ApiDomain::Driver,
            cbid: D::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32,
            start,
            end: start + 10,
            thread_id: 9, // the device thread: no window, no pushed id
            correlation_id,
            return_value: 0,
        })
    };
    let kernel = |correlation_id: u32, start: u64| {
        Raw::Kernel(RawKernel {
            start,
            end: start + 100,
            device: 0,
            context: 1,
            stream: 7,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            registers_per_thread: 8,
            static_shared: 0,
            dynamic_shared: 0,
            correlation_id,
            name_ptr: 0,
        })
    };
    // The launches arrive first; the span's scope ends with fence 1.
    r.buffer(1, 5_000, &[launch(1, 1_100), launch(2, 1_500), launch(3, 3_100), launch(4, 5_000)], &mut |_| None);
    r.ended(Record::new(*SPAN, 40, 1, Interval { start_ns: 900, end_ns: 2_100 }), 1);
    let first = r.poll(6_000);
    assert!(first.iter().all(|x| x.scope_id != 40), "the span waits for its two kernels: {first:?}");
    r.buffer(2, 7_000, &[kernel(1, 1_200), kernel(2, 1_600), kernel(3, 3_200), kernel(4, 5_100)], &mut |_| None);
    let mut out = first;
    // A span's scope resolves after the second snapshot following its end: by then every
    // window of its entries is in, whichever thread's queue held it.
    r.observe(&Snapshot { now: 9_000, open: vec![] });
    out.extend(r.poll(7_500));
    assert!(out.iter().all(|x| x.scope_id != 40), "one snapshot after its end: it waits");
    r.observe(&Snapshot { now: 9_000, open: vec![] });
    out.extend(r.poll(8_000));
    out.extend(r.force());
    let span: Vec<_> = out.iter().filter(|x| x.scope_id == 40).collect();
    assert_eq!(span.len(), 1, "{out:?}");
    assert_eq!(r.counts().deadline_scopes, 0, "resolved by the poll, not the deadline");
    assert_eq!(span[0].activities.len(), 2, "both launches made while it alone was entered");
    assert_eq!(span[0].attributed, Some(Attributed::Time));
    let several: Vec<_> = out.iter().filter(|x| x.site.desc.name == "during several spans").collect();
    assert_eq!(several.len(), 1, "{out:?}");
    assert_eq!(several[0].attributed, Some(Attributed::Ambiguous));
    assert!(several[0]
        .attributes()
        .contains(&("gpuspan.during_spans", crate::record::Value::Str("forward_pass ×2".into()))));
    assert_eq!(several[0].gpu.as_ref().map(|g| g.busy_ns), Some(100), "its GPU time is reported");
    let nobody: Vec<_> = out.iter().filter(|x| x.site.desc.name == "unattributed").collect();
    assert_eq!(nobody.len(), 1, "launched when no span was entered: {out:?}");
    assert_eq!(nobody[0].attributed, None);
    assert!(
        nobody[0].attributes().contains(&("gpuspan.open_span", crate::record::Value::Str("serve".into()))),
        "unowned work names the unselected span entered at its launch: {:?}",
        nobody[0].attributes()
    );
    let c = r.counts();
    assert_eq!((c.calls_by_time, c.during_several_activities, c.unattributed_activities), (2, 1, 1));
}

/// A selected span's entries are windows of their threads (decision 71): a launch inside one is
/// the span's, by thread; an annotated scope's window inside an entry owns its own launches; a
/// launch on the same thread between two entries is not the span's. The span's end, drained
/// before another thread's entry (the threads' queues are drained one after another), waits for
/// the next snapshot's drain, which has it. A window that comes after the span was handed on
/// adds nothing (counted).
#[test]
fn a_selected_spans_entries_are_windows_of_their_threads_and_its_end_waits_for_them() {
    use super::super::records::{ApiDomain, RawKernel};
    use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as D;
    static SPAN: std::sync::LazyLock<&'static Site> = std::sync::LazyLock::new(|| {
        Box::leak(Box::new(Site::for_span(crate::site::site_desc!("request", SiteKind::Kernel, Backend::Cuda))))
    });
    static INNER: Site = Site::new(crate::site::site_desc!("inner", SiteKind::Kernel, Backend::Cuda));
    let mut r = Resolver::new(device_labels(vec!["GPU A".into()]));
    r.set_by_time(|_| ByTime::Nobody);
    r.set_unselected_at(|_| None);
    let launch = |correlation_id: u32, thread_id: u32, start: u64| {
        Raw::Api(RawApi {
            domain: ApiDomain::Driver,
            cbid: D::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32,
            start,
            end: start + 5,
            thread_id,
            correlation_id,
            return_value: 0,
        })
    };
    let kernel = |correlation_id: u32| {
        Raw::Kernel(RawKernel {
            start: 1_000 + u64::from(correlation_id) * 100,
            end: 1_050 + u64::from(correlation_id) * 100,
            device: 0,
            context: 1,
            stream: 7,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            registers_per_thread: 8,
            static_shared: 0,
            dynamic_shared: 0,
            correlation_id,
            name_ptr: 0,
        })
    };
    // Thread 1's queue: the span's entry [100, 200], an annotated scope (41) inside its second
    // entry [300, 400], that entry; then the span's end, from thread 3 where it closed. Thread 2's
    // entry [150, 260] is still open at the snapshot taken before this drain.
    r.span_window(40, 1, Window { thread: 1, start: 100, end: 200 });
    r.ended_in(
        Record::new(&INNER, 41, 1, Interval { start_ns: 320, end_ns: 350 }),
        1,
        Some(Window { thread: 1, start: 320, end: 350 }),
    );
    r.span_window(40, 1, Window { thread: 1, start: 300, end: 400 });
    r.ended(Record::new(*SPAN, 40, 3, Interval { start_ns: 90, end_ns: 500 }), 1);
    r.observe(&Snapshot { now: 1_000, open: vec![(2, 150)] });
    let calls = [launch(1, 1, 120), launch(2, 1, 250), launch(3, 1, 330), launch(4, 1, 380), launch(5, 2, 200)];
    r.buffer(1, 2_000, &calls, &mut |_| None);
    r.buffer(2, 3_000, &(1..=5).map(kernel).collect::<Vec<_>>(), &mut |_| None);
    let mut out = r.poll(3_000);
    assert!(out.iter().all(|x| x.scope_id != 40), "its end waits for the next drain: {out:?}");
    let inner: Vec<_> = out.iter().filter(|x| x.scope_id == 41).collect();
    assert_eq!(inner.len(), 1, "{out:?}");
    assert_eq!(inner[0].activities.len(), 1, "the annotated scope inside an entry owns its launch");
    let between: Vec<_> = out.iter().filter(|x| x.site.desc.name == "unattributed").collect();
    assert_eq!(between.len(), 1, "the launch between two entries is not the span's: {out:?}");
    // The next drain: thread 2's entry, then the snapshot.
    r.span_window(40, 1, Window { thread: 2, start: 150, end: 260 });
    r.observe(&Snapshot { now: 1_100, open: vec![] });
    out = r.poll(4_000);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].scope_id, 40);
    assert_eq!(out[0].activities.len(), 3, "both threads' entries' launches: {out:?}");
    assert_eq!(out[0].attributed, Some(Attributed::Thread));
    assert_eq!(r.threads.owner(1, 120), Owner::Outside, "its windows left once their fence passed");
    // A window of the span after it was handed on (a thread's queue drained late): nothing.
    r.span_window(40, 2, Window { thread: 4, start: 450, end: 460 });
    assert_eq!(r.threads.owner(4, 455), Owner::Outside);
    let c = r.counts();
    assert_eq!((c.late_span_windows, c.window_scopes, c.deadline_scopes, c.stale_scopes), (1, 1, 0, 0));
    assert_eq!(r.pending(), 0);
}
