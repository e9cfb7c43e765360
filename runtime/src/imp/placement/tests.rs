//! The shared placement: narrowing a true calibration, catching a biased one, ageing facts,
//! restarting on contradictions, and records placed from facts alone.
use super::*;

fn calibration(offset_ns: i128, error_ns: u64, taken_at_ns: u64) -> ClockMap {
    ClockMap { offset_ns, error_ns, taken_at_ns }
}

const T: u64 = 1_000_000_000_000;

fn place(b: &mut Bounds, gpu: (i128, i128), rounding: i128, lower: u64, upper: u64, cal: ClockMap) -> Placement {
    b.place(Facts::of(gpu, lower, upper), rounding, cal)
}

/// The truth lies within the stated error.
fn holds(p: &Placement, truth: i128) -> bool {
    (p.offset_ns - truth).abs() <= i128::from(p.error_ns)
}

#[test]
fn a_true_calibration_is_narrowed_by_facts_and_the_bound_holds() {
    let mut b = Bounds::default();
    // True offset 1000: GPU instant g happens at host g + 1000.
    let truth = 1000i128;
    let cal = calibration(truth + 30, 50, T);
    // Work from host T+100 to T+300; launched at T+50, seen done at T+320.
    let g = (i128::from(T) + 100 - truth, i128::from(T) + 300 - truth);
    let p = place(&mut b, g, 1, T + 50, T + 320, cal);
    assert!(!p.calibration_contradicted);
    assert!(holds(&p, truth), "{p:?}");
    assert!(p.error_ns <= 50 + 2 + 1, "never wider than the calibration: {p:?}");
    // A tight fact from below: launched 1 ns before the work began.
    let g2 = (i128::from(T) + 1_100 - truth, i128::from(T) + 1_200 - truth);
    let p2 = place(&mut b, g2, 1, T + 1_099, T + 5_000, cal);
    assert!(holds(&p2, truth), "{p2:?}");
    assert!(p2.error_ns < p.error_ns, "a tighter fact narrows the bound: {p:?} {p2:?}");
    assert!(g2.0 + p2.offset_ns + i128::from(p2.error_ns) >= i128::from(T) + 1_099);
}

#[test]
fn an_empty_intersection_flags_the_calibration_and_places_from_facts_nearest_it() {
    let mut b = Bounds::default();
    let truth = -5_000i128;
    // Says 200 ns earlier than the truth, ±75: wrong (CUPTI's 35 µs on the H100, in small).
    let cal = calibration(truth - 200, 75, T);
    // Launched 10 ns before its work began; seen done 1 ms after it ended (a slow delivery).
    let g = (i128::from(T) + 100 - truth, i128::from(T) + 300 - truth);
    let p = place(&mut b, g, 1, T + 90, T + 1_000_300, cal);
    assert!(p.calibration_contradicted, "{p:?}");
    assert!(holds(&p, truth), "{p:?}");
    // Placed at the facts' edge nearest the calibration: the work starts at its launch, not
    // half a millisecond later in the middle of the facts.
    assert_eq!(g.0 + p.offset_ns, i128::from(T) + 90, "{p:?}");
    assert!(p.error_ns >= 1_000_000, "the far edge is the error: {p:?}");
    assert_eq!(b.contradicted, 1);
    assert!(b.line(0, "dev").contains("1 contradicted the calibration"), "{}", b.line(0, "dev"));
}

#[test]
fn a_record_is_placed_from_facts_alone_when_no_calibration_is_known() {
    let mut b = Bounds::default();
    let truth = 123_456i128;
    // A calibration as wide as it gets: only the facts place the record.
    let cal = calibration(0, u64::MAX / 4, T);
    let g = (i128::from(T) + 1_000 - truth, i128::from(T) + 2_000 - truth);
    let p = place(&mut b, g, 0, T + 900, T + 2_300, cal);
    assert!(!p.calibration_contradicted);
    assert!(holds(&p, truth), "{p:?}");
    assert!(p.error_ns <= 200 + 1, "half the facts' width: {p:?}");
    // Only an upper fact (work whose launch is unknown): still bounded by the window's facts.
    let own = Facts { lower: None, upper: Some((i128::from(T) + 3_400 - (i128::from(T) + 3_000 - truth), T + 3_400)) };
    let p = b.place(own, 0, cal);
    assert!(holds(&p, truth), "{p:?}");
    assert!(p.error_ns < 1_000, "the window's lower fact still holds: {p:?}");
}

#[test]
fn old_facts_age_and_contradicting_ones_restart_the_window() {
    let mut b = Bounds::default();
    let cal = |at| calibration(0, 1_000_000, at);
    // A tight pair of facts at T: offset in [0, 10].
    place(&mut b, (i128::from(T), i128::from(T) + 10), 1, T, T + 20, cal(T));
    // Half a second later the widened old facts still hold the offset near 0 ± drift.
    let later = T + 500_000_000;
    let p = place(
        &mut b,
        (i128::from(later) - 5_000, i128::from(later) - 4_000),
        1,
        later - 5_000,
        later + 1_000_000,
        cal(later),
    );
    assert!(p.error_ns < 20_000, "old facts, aged by 20 ppm, still bound it: {p:?}");
    // More than a second later the old facts have left the window.
    let much_later = T + 2_000_000_000;
    let p = place(
        &mut b,
        (i128::from(much_later) - 5_000, i128::from(much_later) - 4_000),
        1,
        much_later - 5_000,
        much_later + 1_000_000,
        cal(much_later),
    );
    assert!(p.error_ns > 400_000, "a second-old fact no longer narrows it: {p:?}");
    // The clock jumps by 3 ms: the old facts contradict the new one, the window restarts.
    let jump = much_later + 100_000_000;
    let g = (i128::from(jump) - 3_000_000, i128::from(jump) - 3_000_000 + 10);
    let p = place(&mut b, g, 1, jump, jump + 20, calibration(3_000_000, 10, jump));
    assert_eq!(b.restarts, 1);
    assert!(holds(&p, 3_000_000), "{p:?}");
    // Forgetting (a new clock origin) drops the facts but keeps the counts.
    b.forget();
    assert_eq!((b.restarts, b.placed), (1, 4));
}
