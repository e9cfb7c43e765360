//! `gpuspan ranks`: synthetic jobs whose straggler is known, and the H100 multi-GPU capture as
//! two identical ranks.

mod common;

use common::{gpuspan, kernel, save, scratch};
use gpuspan_capture::*;
use gpuspan_cli::ranks;
use std::path::Path;

const MS: u64 = 1_000_000;
const NCCL: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

/// One rank of a data-parallel job: `steps` iterations of a `step` kernel lasting `compute`,
/// then an `all_reduce` whose NCCL kernel lasts `collective` (it waits for the slowest rank).
fn rank(pid: u32, steps: u64, compute: u64, collective: u64) -> Capture {
    let mut c = Capture::new(Header::new("train", pid));
    c.sites = vec![Site::new(0, "step", SiteKind::Kernel), Site::new(1, "all_reduce", SiteKind::Kernel)];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    c.devices = vec![Device { key: 0, id: 0, name: "gpu".into() }];
    c.end = Some(End::default());
    let mut t = 1_000;
    for i in 0..steps {
        let mut step = Record::new(0, 2 * i + 1, 1, Interval::new(t, t + compute));
        step.gpu = Some(Gpu::new(Interval::new(t, t + compute), TimingSource::Cupti));
        t += compute;
        let mut reduce = Record::new(1, 2 * i + 2, 1, Interval::new(t, t + collective));
        let mut g = Gpu::new(Interval::new(t, t + collective), TimingSource::Cupti);
        g.device = Some(0);
        reduce.gpu = Some(g);
        reduce.activities.push(kernel(NCCL, Interval::new(t, t + collective), 0));
        t += collective;
        c.records.extend([step, reduce]);
    }
    c
}

fn compare(captures: &[Capture]) -> ranks::Ranks {
    let given: Vec<(&str, usize, &Capture)> = captures.iter().enumerate().map(|(i, c)| ("synthetic", i, c)).collect();
    ranks::compare(&given, &[])
}

#[test]
fn the_rank_with_more_compute_is_the_straggler_and_the_others_wait_in_the_collective() {
    // Ranks 0, 1 and 3 compute 10 ms a step and wait 3 ms in the all-reduce; rank 2 computes
    // 12 ms and waits 1 ms: the others are held 2 ms a step by it.
    let job = [
        rank(10, 4, 10 * MS, 3 * MS),
        rank(11, 4, 10 * MS, 3 * MS),
        rank(12, 4, 12 * MS, MS),
        rank(13, 4, 10 * MS, 3 * MS),
    ];
    let r = compare(&job);
    assert_eq!(r.collectives, ["all_reduce"], "found by its NCCL kernel");
    assert_eq!(r.ranks[2].compute_ns, 48 * MS);
    assert_eq!(r.ranks[2].collective_ns, 4 * MS);
    assert_eq!(r.ranks[0].collective_ns, 12 * MS);
    assert_eq!(
        r.findings,
        ["rank 2 is the straggler: GPU compute 48.00 ms, 20.0 % more than the other ranks' median (40.00 ms); \
          the others spent 8.00 ms more in collectives (median), waiting for it"]
    );
    let step = r.sites.iter().find(|s| s.site == "step").unwrap();
    assert_eq!((step.slowest_rank, step.collective), (Some(2), false));
    assert!((step.spread - 1.2).abs() < 1e-9, "{}", step.spread);
    let text = r.to_text();
    assert!(text.contains("all_reduce (collective)") && text.contains("rank 2 is the straggler"), "{text}");
}

#[test]
fn ranks_within_five_percent_have_no_straggler_and_one_rank_has_nothing_to_compare() {
    let r = compare(&[rank(1, 3, 10 * MS, 2 * MS), rank(2, 3, 10 * MS + 400_000, 2 * MS)]);
    assert_eq!(r.findings, ["no straggler: GPU compute within 5 % across ranks (30.00 ms to 31.20 ms)"]);
    let r = compare(&[rank(1, 3, 10 * MS, 2 * MS)]);
    assert_eq!(r.findings, ["one rank: nothing to compare (give every rank's capture)"]);
}

#[test]
fn rank_numbers_come_from_the_file_names_when_each_names_its_own() {
    let p = |names: &[&str]| ranks::rank_numbers(&names.iter().map(Path::new).collect::<Vec<_>>());
    // A shell glob sorts rank10 before rank2.
    assert_eq!(p(&["out/rank0.gpuspan", "out/rank10.gpuspan", "out/rank2.gpuspan"]), [0, 10, 2]);
    assert_eq!(p(&["a.gpuspan", "b.gpuspan"]), [0, 1], "no rank in the names: the order given");
    assert_eq!(p(&["rank1.gpuspan", "x/rank1.gpuspan"]), [0, 1], "the same rank twice: the order given");
}

#[test]
fn the_command_orders_ranks_by_their_file_names_and_names_the_straggler() {
    let two = save(&rank(2, 2, 15 * MS, MS), "rank2.gpuspan");
    let ten = save(&rank(10, 2, 10 * MS, 6 * MS), "rank10.gpuspan");
    let zero = save(&rank(0, 2, 10 * MS, 6 * MS), "rank0.gpuspan");
    let (code, out, err) = gpuspan(&[Path::new("ranks"), &ten, &two, &zero]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().skip(2).take(3).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(rows, ["0", "2", "10"], "{out}");
    assert!(out.contains("- rank 2 is the straggler: GPU compute 30.00 ms, 50.0 % more"), "{out}");
    let bad = scratch("not-a-capture.gpuspan");
    std::fs::write(&bad, b"not a capture").unwrap();
    let (code, _, err) = gpuspan(&[Path::new("ranks"), &zero, &bad]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not-a-capture.gpuspan"), "one clear error naming the file: {err}");
}

/// The multi-GPU example recorded on the H100 (one process, NCCL over one rank, which copies
/// rather than launching a kernel) given twice: identical ranks, its all-reduce named.
#[test]
fn the_h100_capture_twice_is_two_equal_ranks() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h100_multi_gpu_nvml.gpuspan");
    let c = Capture::open(fixture).expect("the fixture reads");
    let given = [("a", 0, &c), ("b", 1, &c)];
    let r = ranks::compare(&given, &["all_reduce".to_owned()]);
    assert_eq!(r.collectives, ["all_reduce"]);
    assert_eq!(r.ranks[0].compute_ns, r.ranks[1].compute_ns);
    assert!(r.ranks[0].compute_ns > 0 && r.ranks[0].collective_ns > 0, "{:?}", r.ranks[0]);
    assert!(r.sites.iter().all(|s| s.slowest_rank.is_none() && s.spread == 1.0), "{:?}", r.sites);
    assert!(r.findings[0].starts_with("no straggler"), "{:?}", r.findings);
    // Step by step on its four `scale` calls: each step holds its kernels, though they ran after
    // the call returned (a step lasts until its GPU work ends).
    let s = r.with_steps(&given, "scale").steps.expect("steps");
    assert_eq!(s.rows.len(), 4);
    assert!(s.rows.iter().all(|row| row.straggler.is_none() && row.per_rank[0] == row.per_rank[1]), "{s:?}");
    assert!(s.rows.iter().all(|row| row.per_rank[0].compute_ns > 0), "{s:?}");
}

/// One rank of a job with a `train_step` site around each iteration (`as_span`: an application
/// span `iteration` instead): `forward` computes `compute[i]`, then an all-reduce whose NCCL
/// kernel starts 1 ms before the compute ends (overlapped) and runs `collective[i]` after it.
fn rank_in_steps(pid: u32, compute: &[u64], collective: &[u64], as_span: bool) -> Capture {
    let mut c = Capture::new(Header::new("train", pid));
    c.sites = vec![
        Site::new(0, "train_step", SiteKind::Kernel),
        Site::new(1, "forward", SiteKind::Kernel),
        Site::new(2, "all_reduce", SiteKind::Kernel),
    ];
    c.threads = vec![Thread { index: 1, name: "main".into() }];
    c.devices = vec![Device { key: 0, id: 0, name: "gpu".into() }];
    c.end = Some(End::default());
    let mut t = 1_000;
    for (i, (&work, &wait)) in compute.iter().zip(collective).enumerate() {
        let i = i as u64;
        let span = as_span.then(|| {
            c.spans.push(Span { id: 100 + i, parent: None, name: "iteration".into() });
            100 + i
        });
        let end = t + work + wait;
        if !as_span {
            c.records.push(Record::new(0, 3 * i + 1, 1, Interval::new(t, end)));
        }
        let mut forward = Record::new(1, 3 * i + 2, 1, Interval::new(t, t + work));
        forward.gpu = Some(Gpu::new(Interval::new(t, t + work), TimingSource::Cupti));
        let mut reduce = Record::new(2, 3 * i + 3, 1, Interval::new(t + work - MS, end));
        reduce.gpu = Some(Gpu::new(Interval::new(t + work - MS, end), TimingSource::Cupti));
        reduce.activities.push(kernel(NCCL, Interval::new(t + work - MS, end), 0));
        for r in [&mut forward, &mut reduce] {
            r.span = span;
        }
        c.records.extend([forward, reduce]);
        t = end + MS;
    }
    c
}

#[test]
fn step_by_step_each_step_has_its_times_overlap_and_straggler() {
    // Rank 1 computes 14 ms in step 1 where rank 0 computes 10: rank 0 waits 4 ms more in that
    // all-reduce. Steps 0 and 2 are even.
    for as_span in [false, true] {
        let job = [
            rank_in_steps(1, &[10 * MS, 10 * MS, 10 * MS], &[3 * MS, 7 * MS, 3 * MS], as_span),
            rank_in_steps(2, &[10 * MS, 14 * MS, 10 * MS], &[3 * MS, 3 * MS, 3 * MS], as_span),
        ];
        let name = if as_span { "iteration" } else { "train_step" };
        let given: Vec<(&str, usize, &Capture)> = job.iter().enumerate().map(|(i, c)| ("synthetic", i, c)).collect();
        let r = ranks::compare(&given, &[]).with_steps(&given, name);
        let s = r.steps.as_ref().expect("steps");
        assert_eq!(s.of, if as_span { "span" } else { "site" });
        assert_eq!(s.rows.len(), 3);
        let cell = |step: usize, rank: usize| s.rows[step].per_rank[rank].clone();
        // Step 1 of rank 0: 10 ms compute, the all-reduce from 9 ms to 17 ms: 8 ms, 1 ms of it
        // beside the compute.
        let c = cell(1, 0);
        assert_eq!((c.step_ns, c.compute_ns, c.collective_ns, c.overlap_ns), (17 * MS, 10 * MS, 8 * MS, MS));
        let c = cell(1, 1);
        assert_eq!((c.step_ns, c.compute_ns, c.collective_ns, c.overlap_ns), (17 * MS, 14 * MS, 4 * MS, MS));
        let stragglers: Vec<Option<usize>> = s.rows.iter().map(|row| row.straggler).collect();
        assert_eq!(stragglers, [None, Some(1), None], "{as_span}");
        assert_eq!((s.ranks[0].straggler_in, s.ranks[1].straggler_in), (0, 1));
        assert_eq!(s.ranks[0].median_step_ns, 13 * MS);
        let text = r.to_text();
        assert!(text.contains(&format!("Steps: `{name}`")), "{text}");
        assert!(text.contains("1 of 3"), "{text}");
    }
}

#[test]
fn the_command_compares_the_ranks_step_by_step() {
    let dir = scratch("ranks-steps");
    std::fs::create_dir_all(&dir).unwrap();
    let a = save(&rank_in_steps(1, &[10 * MS, 10 * MS], &[3 * MS, 7 * MS], false), "ranks-steps/rank0.gpuspan");
    let b = save(&rank_in_steps(2, &[10 * MS, 14 * MS], &[3 * MS, 3 * MS], false), "ranks-steps/rank1.gpuspan");
    let (code, text, err) =
        gpuspan(&["ranks".as_ref(), a.as_os_str(), b.as_os_str(), "--step".as_ref(), "train_step".as_ref()]);
    assert_eq!(code, 0, "{err}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 ") && l.contains(" / "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.ends_with("rank 1"), "{row}");
    let (code, json, err) = gpuspan(&[
        "ranks".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--step".as_ref(),
        "nothing".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(v["steps"]["rows"], serde_json::json!([]), "no instance of `nothing`");
    let _ = std::fs::remove_dir_all(dir);
}
