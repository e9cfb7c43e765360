//! CUPTI record parsing and attribution, without a GPU: real CUPTI traffic captured on a GPU
//! machine by `examples/src/bin/cuda_capture.rs` (`scripts/gpu run`) is replayed through the same
//! parser and resolver the live path uses.
#![cfg(feature = "cuda")]

use gpuspan::{Backend, Direction, Site, SiteDesc, SiteKind};
use gpuspan_testing::cuda::replay::Resolver;
use gpuspan_testing::cuda::replay::{self as parse, dump::Frame, Raw};
use gpuspan_testing::record::{ActivityKind, Interval, MemoryKind, Record};
use std::collections::{BTreeMap, HashMap};

const CAPTURE: &[u8] = include_bytes!("../../fixtures/cuda/capture.dump");
/// Rank 0 of `multi_gpu` on two H200s (NVLink), both GPUs open, computing on the first, a peer
/// copy to the second and a two-rank NCCL all-reduce (docs/multi-gpu.md, 2026-11-24).
const TWO_GPUS: &[u8] = include_bytes!("../../fixtures/cuda/two-h200-rank0.dump");

/// One site per name found in the dump, as the annotated functions would have declared them.
fn site(name: &str) -> &'static Site {
    use std::sync::Mutex;
    static SITES: Mutex<BTreeMap<String, &'static Site>> = Mutex::new(BTreeMap::new());
    let mut sites = SITES.lock().unwrap();
    sites.entry(name.to_owned()).or_insert_with(|| {
        let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
        let kind = if name.starts_with("up_") || ["down", "d2d", "peer_copy"].contains(&name) {
            SiteKind::Transfer
        } else {
            SiteKind::Kernel
        };
        Box::leak(Box::new(Site::new(SiteDesc {
            name,
            function: name,
            kind,
            backend: Backend::Cuda,
            module_path: "cuda_capture",
            file: "examples/src/bin/cuda_capture.rs",
            line: 0,
            direction: None,
            threshold_us: None,
            trace_all: false,
            track_memory: false,
        })))
    })
}

fn frames_of(dump: &[u8]) -> Vec<Frame> {
    parse::dump::read(dump).expect("fixture reads")
}

fn frames() -> Vec<Frame> {
    frames_of(CAPTURE)
}

fn raws(offsets: &[u32], bytes: &[u8]) -> Vec<Raw> {
    parse::dump::records(offsets, bytes).map(|r| parse::parse(r).expect("record parses")).collect()
}

/// Replays the dump; returns every resolved record with the index of the frame after which it
/// resolved, and the notes with their frame index.
/// Records with the frame index after which they resolved.
type Resolved = Vec<(usize, Record)>;

fn replay() -> (Resolved, Vec<(usize, String)>) {
    let (out, notes, counts) = replay_dump(CAPTURE, 1);
    // All but the async scope and the synchronous one inside its poll (both push their ids).
    assert_eq!(counts.window_scopes + 2, counts.scopes_resolved, "{counts:?}");
    (out, notes)
}

/// Replays a dump of a process that saw `devices` GPUs: every call must resolve, in time.
fn replay_dump(dump: &[u8], devices: usize) -> (Resolved, Vec<(usize, String)>, gpuspan_testing::cuda::replay::Counts) {
    let frames = frames_of(dump);
    let names: HashMap<u64, String> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Name { ptr, name } => Some((*ptr, name.clone())),
            _ => None,
        })
        .collect();
    let labels = (0..devices).map(|i| format!("captured GPU {i}")).collect();
    let mut resolver = Resolver::new(gpuspan_testing::cuda::replay::device_labels(labels));
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut now = 0;
    let mut windows = HashMap::new();
    for (i, f) in frames.iter().enumerate() {
        match f {
            Frame::Buffer { seq, host_ns, offsets, bytes } => {
                now = *host_ns;
                // Written after the buffer came back: a valid, if late, upper bound on its work.
                resolver.buffer(*seq, *host_ns, &raws(offsets, bytes), &mut |p| names.get(&p).cloned());
            }
            Frame::Ended { scope_id, fence, host_ns, site: name } => {
                now = *host_ns;
                // The dump has no scope starts: a synchronous scope began at its window's start
                // (CUPTI's clock, the replay's host clock), a pushed one is given none (0).
                let window = windows.remove(scope_id);
                let start_ns = window.map_or(0, |w: gpuspan_testing::cuda::replay::Window| w.start);
                let record = Record::new(site(name), *scope_id, 1, Interval { start_ns, end_ns: *host_ns });
                resolver.ended_in(record, *fence, window);
            }
            Frame::Window { scope_id, window } => {
                windows.insert(*scope_id, *window);
            }
            Frame::SpanWindow { scope_id, fence, window } => resolver.span_window(*scope_id, *fence, *window),
            Frame::Threads(snapshot) => resolver.observe(snapshot),
            Frame::Note { text, .. } => notes.push((i, text.clone())),
            Frame::Requested { seq } => resolver.requested(*seq),
            Frame::Clock { offset_ns, error_ns, taken_ns } => resolver.calibrated(*offset_ns, *error_ns, *taken_ns),
            Frame::Name { .. } | Frame::Flushed { .. } => {}
        }
        out.extend(resolver.poll(now).into_iter().map(|r| (i, r)));
    }
    assert_eq!(resolver.pending(), 0, "everything captured resolves");
    assert_eq!(resolver.held_calls(), 0, "every call is decided");
    let counts = resolver.counts();
    assert_eq!(counts.deadline_scopes + counts.stale_scopes, 0, "{counts:?}");
    (out, notes, counts)
}

fn kernels(r: &Record) -> Vec<(String, [u32; 3])> {
    r.activities
        .iter()
        .filter_map(|a| match &a.kind {
            ActivityKind::Kernel(g) => Some((a.name.to_string(), g.grid)),
            _ => None,
        })
        .collect()
}

fn of<'a>(records: &'a [(usize, Record)], name: &str) -> Vec<&'a Record> {
    records.iter().filter(|(_, r)| r.site.desc.name == name).map(|(_, r)| r).collect()
}

#[test]
fn every_captured_record_parses_with_valid_fields() {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for f in frames() {
        let Frame::Buffer { offsets, bytes, .. } = f else { continue };
        for r in raws(&offsets, &bytes) {
            let k = match r {
                Raw::Kernel(k) => {
                    assert!(k.start > 1_600_000_000_000_000_000 && k.end >= k.start, "Unix-epoch ns: {k:?}");
                    assert!(k.grid.iter().chain(&k.block).all(|d| *d >= 1), "{k:?}");
                    assert_ne!(k.name_ptr, 0);
                    "kernel"
                }
                Raw::Memcpy(m) => {
                    assert!(m.end >= m.start && m.bytes > 0, "{m:?}");
                    "memcpy"
                }
                Raw::Memset(_) => "memset",
                Raw::Api(a) => {
                    assert!(a.end >= a.start, "{a:?}");
                    "api"
                }
                Raw::External(e) => {
                    assert_eq!(e.external_kind, gpuspan_testing::cuda::replay::EXTERNAL_KIND);
                    "external"
                }
                Raw::Sync(_) => "sync",
                Raw::Other { .. } => "other",
            };
            *kinds.entry(k).or_default() += 1;
        }
    }
    for k in ["kernel", "memcpy", "memset", "api", "external"] {
        assert!(kinds.get(k).is_some_and(|n| *n > 0), "no {k} record in the fixture: {kinds:?}");
    }
}

#[test]
fn copies_carry_bytes_direction_and_memory_kinds() {
    let (records, _) = replay();
    let copy = |name: &str| -> (u64, Option<Direction>, MemoryKind, MemoryKind) {
        let r = of(&records, name);
        assert_eq!(r.len(), 1, "{name}");
        match r[0].activities.as_slice() {
            [a] => match a.kind {
                ActivityKind::Copy { bytes, direction, src, dst } => (bytes, direction, src, dst),
                ref k => panic!("{name}: {k:?}"),
            },
            other => panic!("{name}: {other:?}"),
        }
    };
    let mib = 1 << 20;
    assert_eq!(copy("up_pageable"), (mib, Some(Direction::CpuToGpu), MemoryKind::Pageable, MemoryKind::Device));
    assert_eq!(copy("up_pinned"), (mib, Some(Direction::CpuToGpu), MemoryKind::Pinned, MemoryKind::Device));
    assert_eq!(copy("down"), (mib, Some(Direction::GpuToCpu), MemoryKind::Device, MemoryKind::Pageable));
    assert_eq!(copy("d2d"), (mib, Some(Direction::GpuToGpu), MemoryKind::Device, MemoryKind::Device));
    let r = of(&records, "up_pageable")[0];
    assert_eq!(r.bytes, Some(mib), "bytes filled in from CUPTI when the site gave none");
    let zero = of(&records, "zero");
    assert!(matches!(zero[0].activities[0].kind, ActivityKind::Set { bytes } if bytes == mib));
}

#[test]
fn kernels_are_named_demangled_and_attributed_to_the_innermost_scope() {
    let (records, _) = replay();
    let spins = of(&records, "spin");
    assert_eq!(spins.len(), 2);
    for s in &spins {
        assert_eq!(kernels(s), vec![("spin".to_owned(), [1, 1, 1])]);
        let g = s.gpu.as_ref().unwrap();
        assert_eq!(g.busy_ns, s.activities[0].interval.duration_ns());
    }
    let outer: Vec<_> = of(&records, "outer").iter().flat_map(|r| kernels(r)).map(|k| k.1).collect();
    assert_eq!(outer, vec![[1, 1, 1], [3, 1, 1]]);
    let inner: Vec<_> = of(&records, "inner").iter().flat_map(|r| kernels(r)).map(|k| k.1).collect();
    assert_eq!(inner, vec![[2, 1, 1], [2, 1, 1]]);
    assert_eq!(kernels(of(&records, "scale")[0])[0].0, "scale(float*, float, unsigned int)");
    let sgemm = kernels(of(&records, "sgemm")[0]);
    assert!(!sgemm.is_empty(), "cuBLAS kernels attach to the scope that called cuBLAS");
    let polls: Vec<_> = of(&records, "in_polls").iter().flat_map(|r| kernels(r)).map(|k| k.1).collect();
    assert_eq!(polls, vec![[4, 1, 1], [4, 2, 1]], "an async scope's kernels from both polls");
    let in_poll: Vec<_> = of(&records, "in_poll_sync").iter().flat_map(|r| kernels(r)).map(|k| k.1).collect();
    assert_eq!(in_poll, vec![[4, 3, 1]], "a sync scope inside a poll owns its kernel");
    let outside: Vec<_> = of(&records, "unattributed").iter().flat_map(|r| kernels(r)).map(|k| k.1).collect();
    assert!(outside.contains(&[7, 7, 1]), "the kernel launched outside every scope: {outside:?}");
}

/// CUPTI reserves a kernel's record in the current buffer at launch and returns a buffer only
/// once all its records are complete: a call's records can wait for unrelated work launched
/// before it to finish. The capture shows it; gpuspan resolves the call as soon as the buffer
/// is back, never from a half-written one.
#[test]
fn a_call_resolves_when_its_buffer_is_complete_not_before() {
    let (records, notes) = replay();
    let at = |text: &str| notes.iter().find(|(_, t)| t.starts_with(text)).map(|(i, _)| *i).expect(text);
    let long_done = at("s1 synchronized");
    // The second `inner` ran on s2 while a ~200 ms spin kept s1 busy; they share a buffer.
    let (i, r) = records.iter().filter(|(_, r)| r.site.desc.name == "inner").nth(1).expect("second inner");
    assert!(*i > long_done, "resolved at frame {i}, before its buffer could be complete (frame {long_done})");
    let long = &records.iter().filter(|(_, r)| r.site.desc.name == "spin").nth(1).expect("long spin").1;
    assert!(long.duration_ns() > 100_000_000, "the long spin took {} ns", long.duration_ns());
    assert!(r.gpu.as_ref().unwrap().interval.end_ns < long.gpu.as_ref().unwrap().interval.end_ns);
}

/// Real CUPTI traffic placed from its facts: every record of a scope with a known start (a
/// window's) starts no earlier than that start minus the error it states, and its work, which
/// had ended before its buffer was written to the dump, ends no later than that plus the error.
#[test]
fn replayed_records_lie_within_their_facts() {
    let frames = frames();
    let last_buffer = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Buffer { host_ns, .. } => Some(*host_ns),
            _ => None,
        })
        .max()
        .expect("buffers");
    let (records, _) = replay();
    let mut checked = 0;
    for (_, r) in &records {
        let Some(g) = r.gpu.as_ref() else { continue };
        assert!(g.interval.end_ns <= last_buffer + g.clock_error_ns, "ends after its buffer came: {r:?}");
        if r.host.start_ns > 0 {
            assert!(g.interval.start_ns + g.clock_error_ns >= r.host.start_ns, "starts before its scope: {r:?}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "the window scopes: {checked}");
}

/// A synchronous scope owns its thread's calls inside its window; a pushed (async) scope
/// inside it owns its own; a call after the window, or on another thread, is nobody's; a
/// call in a still open window waits for it; a flush deadline decides the rest.
#[test]
fn windows_attribute_by_thread_and_time() {
    use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as D;
    use gpuspan_testing::cuda::replay::EXTERNAL_KIND;
    use gpuspan_testing::cuda::replay::{device_labels, ApiDomain, RawApi, RawExternal, RawKernel, Snapshot, Window};
    static SYNC: Site = Site::new(SiteDesc {
        name: "sync",
        function: "sync",
        kind: SiteKind::Kernel,
        backend: Backend::Cuda,
        module_path: "tests",
        file: file!(),
        line: 0,
        direction: None,
        threshold_us: None,
        trace_all: false,
        track_memory: false,
    });
    let launch = |thread: u32, start: u64, c: u32| {
        Raw::Api(RawApi {
            domain: ApiDomain::Driver,
            cbid: D::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32,
            start,
            end: start + 5,
            thread_id: thread,
            correlation_id: c,
            return_value: 0,
        })
    };
    let kernel = |c: u32, grid: i32| {
        Raw::Kernel(RawKernel {
            start: 10_000 + c as u64,
            end: 10_100 + c as u64,
            device: 0,
            context: 1,
            stream: 7,
            grid: [grid, 1, 1],
            block: [32, 1, 1],
            registers_per_thread: 8,
            static_shared: 0,
            dynamic_shared: 0,
            correlation_id: c,
            name_ptr: 0,
        })
    };
    let host = Interval { start_ns: 0, end_ns: 1 };
    // Each kernel starts at 10 000 + its correlation id: the ids of a record's kernels.
    let ids = |r: &Record| r.activities.iter().map(|a| a.interval.start_ns as u32 - 10_000).collect::<Vec<_>>();
    let mut r = Resolver::new(device_labels(vec!["GPU".into()]));
    r.observe(&Snapshot { now: 1_000, open: vec![(7, 400)] });
    r.ended_in(Record::new(&SYNC, 1, 1, host), 1, Some(Window { thread: 7, start: 100, end: 200 }));
    // An async scope (id 2) pushed inside the window; scope 3's window is still open.
    let ext = RawExternal { external_kind: EXTERNAL_KIND, external_id: 2, correlation_id: 12 };
    let calls = [launch(7, 110, 11), Raw::External(ext), launch(7, 150, 12), launch(8, 150, 13)];
    let [a, b, c, d] = calls;
    r.buffer(1, 300, &[a, b, c, d, launch(7, 250, 14)], &mut |_| None);
    r.buffer(
        2,
        20_000,
        &[launch(7, 450, 15), kernel(11, 1), kernel(12, 2), kernel(13, 3), kernel(14, 4), kernel(15, 5)],
        &mut |_| None,
    );
    let out = r.poll(0);
    let of = |id: u64| out.iter().find(|x| x.scope_id == id).map(ids);
    assert_eq!(of(1), Some(vec![11]), "the window's own launch only: {out:?}");
    let outside: Vec<_> = out.iter().filter(|x| x.site.desc.name == "unattributed").flat_map(ids).collect();
    assert_eq!(outside.len(), 2, "thread 8's call and the one after the window: {out:?}");
    assert!(outside.contains(&13) && outside.contains(&14));
    assert_eq!(r.held_calls(), 1, "the call inside the open window waits for it");
    r.ended(Record::new(&SYNC, 2, 1, host), 1);
    r.ended_in(Record::new(&SYNC, 3, 1, host), 2, Some(Window { thread: 7, start: 400, end: 500 }));
    let out = r.poll(0);
    let of = |id: u64| out.iter().find(|x| x.scope_id == id).map(ids);
    assert_eq!((of(2), of(3)), (Some(vec![12]), Some(vec![15])), "{out:?}");
    assert_eq!((r.pending(), r.held_calls(), r.counts().window_scopes), (0, 0, 2));
    // A scope whose kernel never comes is decided at the deadline, and counted.
    r.ended_in(Record::new(&SYNC, 4, 1, host), 3, Some(Window { thread: 7, start: 600, end: 700 }));
    r.buffer(3, 20_000, &[launch(7, 650, 16)], &mut |_| None);
    assert!(r.poll(0).is_empty());
    assert_eq!(r.force().len(), 1);
    assert_eq!((r.pending(), r.counts().deadline_scopes), (0, 1));
}

#[test]
fn two_gpus_records_of_both_devices_resolve_to_their_calls() {
    let (records, _, counts) = replay_dump(TWO_GPUS, 2);
    assert_eq!(counts.window_scopes, counts.scopes_resolved, "every scope synchronous: {counts:?}");
    let devices: std::collections::BTreeSet<u32> =
        records.iter().flat_map(|(_, r)| &r.activities).filter_map(|a| a.device.as_ref().map(|d| d.id)).collect();
    assert_eq!(devices, [0, 1].into(), "work on both GPUs of the process");
    // NCCL's kernel is launched on the calling thread, inside the annotated all-reduce.
    let reduce = of(&records, "all_reduce");
    assert!(!reduce.is_empty());
    assert!(
        reduce.iter().any(|r| kernels(r).iter().any(|(name, _)| name.starts_with("ncclDevKernel_AllReduce"))),
        "{:?}",
        reduce.iter().map(|r| kernels(r)).collect::<Vec<_>>()
    );
}

#[test]
fn two_gpus_a_staged_peer_copy_is_one_transfer_between_its_devices_with_no_bandwidth() {
    // What CUPTI 13 gave for `cuMemcpyPeerAsync` between two H200s when the driver staged the
    // copy through host memory (cudarc's pool memory, peer access not granted on the pools): no
    // `MEMCPY2`, but two `MEMCPY` records with the copy's correlation id, a "DtoH" on the source
    // and an "HtoD" on the destination, both between device memory (docs/multi-gpu.md). They
    // become one copy from GPU 0 to GPU 1; their 43 µs are not the transfer's time (the same
    // copy took 1.8 ms by CUDA events), so no bandwidth is derived from them.
    let (records, _, _) = replay_dump(TWO_GPUS, 2);
    let copies = of(&records, "peer_copy");
    assert_eq!(copies.len(), 2, "the example copies twice");
    for r in copies {
        let pairs: Vec<(String, u64, Option<u32>, Option<u32>)> = r
            .activities
            .iter()
            .filter_map(|a| match a.kind {
                ActivityKind::Copy { bytes, src: MemoryKind::Device, dst: MemoryKind::Device, direction } => {
                    assert_eq!(direction, Some(Direction::GpuToGpu), "{a:?}");
                    Some((
                        a.name.to_string(),
                        bytes,
                        a.src_device.as_ref().map(|d| d.id),
                        a.dst_device.as_ref().map(|d| d.id),
                    ))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            pairs,
            [(gpuspan_testing::record::STAGED_PEER_COPY.to_owned(), 64 << 20, Some(0), Some(1))],
            "{r:?}"
        );
        assert!(r.activities[0].is_staged_peer_copy());
        assert_eq!(r.bandwidth_bytes_per_s(), None, "the halves do not time the transfer: {r:?}");
        let attrs = r.attributes();
        assert!(!attrs.iter().any(|(k, _)| k.contains("bandwidth")), "{attrs:?}");
    }
}

/// Issue 39's third-party union-find program (cudarc, NVRTC in the first of 4 calls; per call
/// its own stream, then per round an unannotated 4-byte flag copy up, `pointer_jump`, the flag
/// copied back, `stream.synchronize()`), one fresh process each on an H200: in `07` the flag
/// copies were placed up to 69 µs before the host issued them, in `09` kernels ended up to 4 µs
/// after the synchronize behind them had returned.
const UNION_FIND: [(&str, &[u8]); 2] = [
    ("union-find-07", include_bytes!("../../fixtures/cuda/union-find-07.dump")),
    ("union-find-09", include_bytes!("../../fixtures/cuda/union-find-09.dump")),
];

/// The dump's calibrations as a function of CUPTI's clock: `host = cupti + offset`, the offset
/// interpolated between the two calibrations around the instant (extrapolated along the
/// nearest two outside them), with the larger of their errors.
struct Calibrations(Vec<(i128, i128, u64)>);

impl Calibrations {
    fn of(frames: &[Frame]) -> Calibrations {
        let points = frames
            .iter()
            .filter_map(|f| match f {
                Frame::Clock { offset_ns, error_ns, taken_ns } => {
                    Some((i128::from(*taken_ns) - i128::from(*offset_ns), i128::from(*offset_ns), *error_ns))
                }
                _ => None,
            })
            .collect::<Vec<_>>();
        assert!(points.len() >= 2, "the dump carries its calibrations");
        Calibrations(points)
    }

    /// A CUPTI CPU-clock instant on the host clock, and how well that is known.
    fn host(&self, cupti_ns: u64) -> (i128, u64) {
        let t = i128::from(cupti_ns);
        let p = &self.0;
        let i = p.partition_point(|(c, ..)| *c <= t).clamp(1, p.len() - 1);
        let ((c0, o0, e0), (c1, o1, e1)) = (p[i - 1], p[i]);
        (t + o0 + (o1 - o0) * (t - c0) / (c1 - c0), e0.max(e1))
    }
}

/// What program order says about one piece of GPU work, on the host clock: it cannot start
/// before the API call that issued it started, nor end after the synchronize that the issuing
/// thread made after that call had returned; each with the calibration's error.
#[derive(Debug)]
struct Order {
    stream: u32,
    duration_ns: u64,
    issued: (i128, u64),
    synchronized: Option<(i128, u64)>,
}

/// The program order of every kernel, copy and set in a dump, by stream in GPU order. Every
/// call of the union-find program synchronizes its only stream: the first synchronize on the
/// issuing thread after an issuing call returned bounds that call's work.
fn program_order(frames: &[Frame]) -> BTreeMap<u32, Vec<Order>> {
    use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as D;
    let calibrations = Calibrations::of(frames);
    let raw: Vec<Raw> = frames
        .iter()
        .flat_map(|f| match f {
            Frame::Buffer { offsets, bytes, .. } => raws(offsets, bytes),
            _ => Vec::new(),
        })
        .collect();
    let apis: HashMap<u32, &gpuspan_testing::cuda::replay::RawApi> = raw
        .iter()
        .filter_map(|r| match r {
            Raw::Api(a) => Some((a.correlation_id, a)),
            _ => None,
        })
        .collect();
    let synchronizes =
        [D::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, D::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize].map(|d| d as u32);
    let mut syncs: Vec<_> = apis.values().filter(|a| synchronizes.contains(&a.cbid)).copied().collect();
    syncs.sort_by_key(|a| a.start);
    let mut work: Vec<(u64, u32, u64, u32)> = raw
        .iter()
        .filter_map(|r| match r {
            Raw::Kernel(k) => Some((k.start, k.stream, k.end - k.start, k.correlation_id)),
            Raw::Memcpy(m) => Some((m.start, m.stream, m.end - m.start, m.correlation_id)),
            Raw::Memset(m) => Some((m.start, m.stream, m.end - m.start, m.correlation_id)),
            _ => None,
        })
        .collect();
    work.sort();
    let mut order: BTreeMap<u32, Vec<Order>> = BTreeMap::new();
    for (_, stream, duration_ns, c) in work {
        let api = apis.get(&c).unwrap_or_else(|| panic!("the call that issued correlation id {c}"));
        let sync = syncs.iter().find(|s| s.thread_id == api.thread_id && s.start >= api.end);
        order.entry(stream).or_default().push(Order {
            stream,
            duration_ns,
            issued: calibrations.host(api.start),
            synchronized: sync.map(|s| calibrations.host(s.end)),
        });
    }
    order
}

/// Both union-find dumps replayed: every piece of work lies within its record's stated clock
/// error of what program order allows, both ways (issue 39).
#[test]
fn union_find_dumps_replay_within_their_stated_bounds_of_program_order() {
    let mut report = Vec::new();
    for (name, dump) in UNION_FIND {
        let order = program_order(&frames_of(dump));
        let (records, _, _) = replay_dump(dump, 1);
        // The placed work by stream, in placed order, with its record's stated error. Placement
        // keeps CUPTI's durations, which pair it with program order's list.
        let mut placed: BTreeMap<u32, Vec<(u64, u64, u64)>> = BTreeMap::new();
        for (_, r) in &records {
            let g = r.gpu.as_ref().unwrap_or_else(|| panic!("{name}: GPU timing of {r:?}"));
            for a in &r.activities {
                let stream = a.stream.expect("CUPTI names the stream") as u32;
                placed.entry(stream).or_default().push((a.interval.start_ns, a.interval.end_ns, g.clock_error_ns));
            }
        }
        assert_eq!(placed.keys().collect::<Vec<_>>(), order.keys().collect::<Vec<_>>(), "{name}: streams");
        let (mut checked, mut early, mut late, mut worst) = (0, 0, 0, 0i128);
        // The closest any placed work came to what program order allows, and the widest error.
        let (mut closest, mut widest) = (i128::MAX, 0);
        for (stream, work) in &order {
            let mut mine = placed[stream].clone();
            mine.sort();
            assert_eq!(mine.len(), work.len(), "{name}: stream {stream}");
            for ((start, end, error), o) in mine.iter().zip(work) {
                assert_eq!(end - start, o.duration_ns, "{name}: stream {} placed out of GPU order", o.stream);
                let error = i128::from(*error);
                widest = widest.max(error);
                let (issued, issued_error) = o.issued;
                closest = closest.min(i128::from(*start) - issued);
                if let Some((synchronized, _)) = o.synchronized {
                    closest = closest.min(synchronized - i128::from(*end));
                }
                let beyond = issued - i128::from(issued_error) - (i128::from(*start) + error);
                if beyond > 0 {
                    early += 1;
                    worst = worst.max(beyond);
                }
                if let Some((synchronized, sync_error)) = o.synchronized {
                    let beyond = i128::from(*end) - error - (synchronized + i128::from(sync_error));
                    if beyond > 0 {
                        late += 1;
                        worst = worst.max(beyond);
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 60, "{name}: {checked} pieces of work");
        report.push(format!(
            "{name}: {checked} pieces of work, {early} placed before their call beyond their bound, {late} ending \
             after their synchronize returned beyond their bound, worst {worst} ns; widest stated error {widest} ns, \
             closest to program order's edge {closest} ns"
        ));
        if early + late > 0 {
            report.push("  FAILED".into());
        }
    }
    assert!(!report.iter().any(|l| l.ends_with("FAILED")), "{}", report.join("\n"));
    eprintln!("{}", report.join("\n"));
}
