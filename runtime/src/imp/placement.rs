//! Placing GPU work on the host clock from host facts and a calibration, for every backend.
//!
//! A backend knows its GPU instants on some clock of its own (wgpu timestamps, CUPTI's
//! normalised times, CUDA event times since an anchor) and needs `offset` in
//! `host = gpu + offset`. A calibration says `offset ∈ [c − e, c + e]`, but only if the device
//! behaves as the calibration assumed, and that was seen to fail on every backend (decisions 24
//! and 38). Every resolved record brings facts that hold whatever the calibration says: its work
//! cannot start before some host instant (its call, its launch, its event's record call) and
//! cannot end after another (the host saw it finished). [`Bounds`] keeps the tightest facts of
//! the last second per device, aged by a drift allowance, intersects them with the calibration,
//! and places each record inside what is left: the stated error is the distance to the far
//! edge, a bound by construction as long as the facts are true. An empty intersection means the
//! calibration is wrong: the backend re-calibrates, and meanwhile the record is placed from the
//! facts alone, at the point nearest the calibration. Backends only gather facts.

/// How fast the GPU clock may drift from the host's, in parts per million: an old fact or
/// calibration is widened by this much per nanosecond of age (decision 24).
const DRIFT_PPM: i128 = 20;
/// The window of facts: `BUCKETS` buckets of `BUCKET_NS` each (about one second).
const BUCKETS: usize = 16;
const BUCKET_NS: u64 = 64_000_000;
const MILLION: i128 = 1_000_000;

/// `host_ns = gpu_ns + offset_ns`, good to within `error_ns` when taken at host instant
/// `taken_at_ns`: a calibration, the interval the facts are intersected with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClockMap {
    pub offset_ns: i128,
    pub error_ns: u64,
    /// When it was taken, on the host clock.
    pub taken_at_ns: u64,
}

/// What one record proves about its offset: `offset ≥ lower` (learnt at host instant
/// `lower_at`, when its work could start at the earliest) and `offset ≤ upper` (learnt at
/// `upper_at`, when the host saw it finished). Either may be unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Facts {
    pub lower: Option<(i128, u64)>,
    pub upper: Option<(i128, u64)>,
}

impl Facts {
    /// Work that ran over `gpu` (GPU instants), issued no earlier than host `lower_at` and seen
    /// finished at host `upper_at`.
    pub(crate) fn of(gpu: (i128, i128), lower_at: u64, upper_at: u64) -> Facts {
        let upper_at = upper_at.max(lower_at);
        Facts {
            lower: Some((i128::from(lower_at) - gpu.0, lower_at)),
            upper: Some((i128::from(upper_at) - gpu.1, upper_at)),
        }
    }
}

/// The tightest facts that arrived within one bucket of host time. Facts are kept as keys that
/// make their ageing exact: a lower bound `l` taken at `t` is worth `l − ρ·(now − t)` at `now`,
/// so the bucket keeps the largest `l·10⁶ + DRIFT_PPM·t` (and the smallest `u·10⁶ − DRIFT_PPM·t`
/// for upper bounds), scaled by 10⁶ so that no rounding creeps in.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The bucket's index (`host instant / BUCKET_NS`); facts of other indices are stale.
    index: u64,
    lower_key: Option<i128>,
    upper_key: Option<i128>,
    /// The latest instant of a fact in the bucket: facts later than the instant they are
    /// evaluated at age the other way, which the keys widen for.
    latest_ns: u64,
}

/// Facts, calibration checks and placements of one device (one clock).
#[derive(Debug, Default)]
pub(crate) struct Bounds {
    buckets: [Bucket; BUCKETS],
    /// Records placed.
    pub placed: u64,
    /// Placements whose facts contradicted the calibration (placed from the facts alone).
    pub contradicted: u64,
    /// Times the facts contradicted one another (drift past the allowance, a clock jump): the
    /// window was restarted.
    pub restarts: u64,
    /// The error stated by the last placement, and the largest stated, in ns.
    pub last_error_ns: u64,
    pub widest_error_ns: u64,
}

/// Where one record goes on the host clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    /// `host = gpu + offset_ns` for this record's instants.
    pub offset_ns: i128,
    /// Bound on the error of any of the record's mapped instants.
    pub error_ns: u64,
    /// The calibration disagreed with the facts: it should be taken again.
    pub calibration_contradicted: bool,
}

/// An interval of offsets, `lo ≤ hi` when not empty.
#[derive(Debug, Clone, Copy)]
struct Span {
    lo: i128,
    hi: i128,
}

impl Span {
    const ALL: Span = Span { lo: i128::MIN / 4, hi: i128::MAX / 4 };

    fn intersect(self, other: Span) -> Option<Span> {
        let s = Span { lo: self.lo.max(other.lo), hi: self.hi.min(other.hi) };
        (s.lo <= s.hi).then_some(s)
    }
}

/// The drift allowance for `age_ns` of host time, rounded up.
pub(crate) fn drift(age_ns: u64) -> i128 {
    (i128::from(age_ns) * DRIFT_PPM).div_euclid(1_000_000) + 1
}

impl Bounds {
    /// Places one record with its own `facts` (each GPU instant known to within `rounding` ns),
    /// the window's facts and the device's `calibration`.
    pub(crate) fn place(&mut self, own: Facts, rounding: i128, calibration: ClockMap) -> Placement {
        let (lower_at, upper_at) = match (own.lower, own.upper) {
            (Some((_, l)), Some((_, u))) => (l, u),
            (Some((_, t)), None) | (None, Some((_, t))) => (t, t),
            (None, None) => (calibration.taken_at_ns, calibration.taken_at_ns),
        };
        // The record's own facts, widened by the rounding of its GPU instants and by the drift
        // possible while it ran (its work lies somewhere between the two instants).
        let spread = drift(upper_at.abs_diff(lower_at));
        let lower = own.lower.map(|(l, _)| l - rounding);
        let upper = own.upper.map(|(u, _)| u + rounding);
        let mine =
            Span { lo: lower.map_or(Span::ALL.lo, |l| l - spread), hi: upper.map_or(Span::ALL.hi, |u| u + spread) };
        self.add(lower_at, lower, None);
        self.add(upper_at, None, upper);
        // Evaluated at the later instant: later than every instant of the record's work.
        let at = upper_at.max(lower_at);
        let facts = match self.facts(at).intersect(mine) {
            Some(f) => f,
            None => {
                // Older facts contradict this record's: the clocks moved more than the
                // allowance says. Start the window again from this record.
                self.restarts += 1;
                self.forget();
                self.add(lower_at, lower, None);
                self.add(upper_at, None, upper);
                mine
            }
        };
        let age = at.abs_diff(calibration.taken_at_ns);
        let widen = i128::from(calibration.error_ns) + drift(age) + rounding;
        let calibrated = Span { lo: calibration.offset_ns - widen, hi: calibration.offset_ns + widen };
        let (span, contradicted) = match facts.intersect(calibrated) {
            Some(s) => (s, false),
            None => (facts, true),
        };
        // An own fact can be empty on its own (a GPU interval longer than the host's window of
        // it): then only the calibration is left to trust.
        let (span, nearest) = if mine.lo > mine.hi { (calibrated, false) } else { (span, contradicted) };
        // The middle when the calibration holds. When it was contradicted, it was most likely
        // off by a little, not by the facts' whole width (their upper edge is as loose as the
        // backend's delivery): the point nearest to it, with the far edge as the error.
        let offset =
            if nearest { calibration.offset_ns.clamp(span.lo, span.hi) } else { span.lo + (span.hi - span.lo) / 2 };
        // Never before the record's own lower fact: unwidened, it is a valid floor that the
        // drift allowance would otherwise blur by a few ns.
        let offset = match own.lower {
            Some((floor, _)) => offset.max(floor.min(span.hi)),
            None => offset,
        };
        let error = u64::try_from((span.hi - offset).max(offset - span.lo) + rounding).unwrap_or(u64::MAX);
        self.placed += 1;
        self.contradicted += u64::from(contradicted);
        self.last_error_ns = error;
        self.widest_error_ns = self.widest_error_ns.max(error);
        Placement { offset_ns: offset, error_ns: error, calibration_contradicted: contradicted }
    }

    /// The error a backend stated for the last placement after adding its own (CUPTI adds its
    /// calibration's): the one the trust report's line gives.
    // Only CUPTI places in two steps.
    #[cfg(feature = "cuda")]
    pub(crate) fn stated(&mut self, error_ns: u64) {
        self.last_error_ns = error_ns;
        self.widest_error_ns = self.widest_error_ns.max(error_ns);
    }

    /// Drops every fact (the backend's GPU clock changed its origin), keeping the counts.
    pub(crate) fn forget(&mut self) {
        self.buckets = Default::default();
    }

    /// Keeps a fact taken at host instant `at_ns` if it is the tightest of its bucket.
    fn add(&mut self, at_ns: u64, lower: Option<i128>, upper: Option<i128>) {
        if lower.is_none() && upper.is_none() {
            return;
        }
        let index = at_ns / BUCKET_NS;
        let b = &mut self.buckets[(index % BUCKETS as u64) as usize];
        if b.index != index || (b.lower_key.is_none() && b.upper_key.is_none()) {
            *b = Bucket { index, lower_key: None, upper_key: None, latest_ns: at_ns };
        }
        let t = i128::from(at_ns) * DRIFT_PPM;
        if let Some(l) = lower {
            let k = l * MILLION + t;
            b.lower_key = Some(b.lower_key.map_or(k, |x| x.max(k)));
        }
        if let Some(u) = upper {
            let k = u * MILLION - t;
            b.upper_key = Some(b.upper_key.map_or(k, |x| x.min(k)));
        }
        b.latest_ns = b.latest_ns.max(at_ns);
    }

    /// The offsets every fact of the window allows at host instant `at_ns`, each fact widened by
    /// the drift possible between the instant it was taken and `at_ns`.
    fn facts(&self, at_ns: u64) -> Span {
        let now = at_ns / BUCKET_NS;
        let mut span = Span::ALL;
        let t = i128::from(at_ns) * DRIFT_PPM;
        for b in &self.buckets {
            if b.index + BUCKETS as u64 <= now || b.index > now + 1 {
                continue; // stale, or from a clock that jumped
            }
            // A fact later than `at_ns` by d is over-credited by 2ρd through its key.
            let ahead = 2 * i128::from(b.latest_ns.saturating_sub(at_ns)) * DRIFT_PPM;
            if let Some(k) = b.lower_key {
                span.lo = span.lo.max((k - t - ahead).div_euclid(MILLION));
            }
            if let Some(k) = b.upper_key {
                span.hi = span.hi.min(-(-(k + t + ahead)).div_euclid(MILLION));
            }
        }
        span
    }

    /// "GPU clock of GPU 0: NVIDIA H100 (Vulkan): 1204 records placed, offset known to ±4.1 µs
    /// (widest ±37.5 µs), 3 contradicted the calibration". The device's index comes first, as on
    /// the timeline's tracks, so that two boards of one model stay apart.
    pub(crate) fn line(&self, id: u32, device: &str) -> String {
        let d = crate::export::format::duration;
        let mut line = format!(
            "GPU clock of GPU {id}: {device}: {} records placed from host facts and calibration, offset known to ±{} (widest ±{})",
            self.placed,
            d(self.last_error_ns),
            d(self.widest_error_ns)
        );
        if self.contradicted > 0 {
            line.push_str(&format!(", {} contradicted the calibration and were placed from facts", self.contradicted));
        }
        if self.restarts > 0 {
            line.push_str(&format!(", facts restarted {} times (drift past {DRIFT_PPM} ppm)", self.restarts));
        }
        line
    }
}

#[cfg(test)]
mod tests;
