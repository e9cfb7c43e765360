//! Small, exact statistics: quantiles, the Mann–Whitney U test, a seeded bootstrap. Written
//! out here (about a hundred lines) rather than pulled in, so that every number the CLI prints
//! can be traced to code in this crate.

/// The `q`-quantile of sorted values by nearest rank (the smallest value with at least `q` of
/// the values at or below it); `None` when empty.
pub fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).max(1);
    Some(sorted[rank - 1])
}

/// Exact values kept per [`Samples`] before it switches to its histogram.
pub const EXACT_CAP: usize = 16 * 1024;

/// Sub-buckets per power of two in [`Samples`]' histogram (7 bits: 128).
const SUB_BITS: u32 = 7;
const LINEAR: u64 = 2 << SUB_BITS;
const BUCKETS: usize = LINEAR as usize + (64 - SUB_BITS as usize - 1) * (1 << SUB_BITS);

/// The relative error of a quantile once [`Samples`] holds more than [`EXACT_CAP`] values:
/// half a bucket's width over its lower bound, 2⁻⁸.
pub const HISTOGRAM_ERROR: f64 = 1.0 / 256.0;

/// Values for quantiles in bounded memory: exact (sorted on demand) up to [`EXACT_CAP`]
/// values, then a log-linear histogram (exact below 256 ns, 128 buckets per power of two
/// above: a quantile is within [`HISTOGRAM_ERROR`] of the exact one, and within the min/max).
#[derive(Debug, Clone, Default)]
pub struct Samples {
    exact: Vec<u64>,
    sorted: bool,
    hist: Option<Box<[u64]>>,
    n: u64,
    total: u64,
    min: u64,
    max: u64,
}

fn bucket(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let shift = e - SUB_BITS;
    let sub = (v >> shift) & ((1 << SUB_BITS) - 1);
    LINEAR as usize + (e - SUB_BITS - 1) as usize * (1 << SUB_BITS) + sub as usize
}

/// The middle of bucket `i`.
fn middle(i: usize) -> u64 {
    if (i as u64) < LINEAR {
        return i as u64;
    }
    let j = i - LINEAR as usize;
    let e = (j >> SUB_BITS) as u32 + SUB_BITS + 1;
    let sub = (j & ((1 << SUB_BITS) - 1)) as u64;
    let shift = e - SUB_BITS;
    (((1u64 << SUB_BITS) + sub) << shift) + (1u64 << (shift - 1))
}

impl Samples {
    pub fn push(&mut self, v: u64) {
        if self.n == 0 {
            (self.min, self.max) = (v, v);
        }
        self.n += 1;
        self.total += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        match &mut self.hist {
            Some(h) => h[bucket(v)] += 1,
            None => {
                self.exact.push(v);
                self.sorted = false;
                if self.exact.len() > EXACT_CAP {
                    let mut h = vec![0u64; BUCKETS].into_boxed_slice();
                    for &x in &self.exact {
                        h[bucket(x)] += 1;
                    }
                    self.exact = Vec::new();
                    self.hist = Some(h);
                }
            }
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Samples) {
        match &other.hist {
            None => other.exact.iter().for_each(|&v| self.push(v)),
            Some(oh) => {
                let exact = std::mem::take(&mut self.exact);
                let h = self.hist.get_or_insert_with(|| vec![0u64; BUCKETS].into_boxed_slice());
                for x in exact {
                    h[bucket(x)] += 1;
                }
                for (a, b) in h.iter_mut().zip(oh.iter()) {
                    *a += b;
                }
                (self.min, self.max) = if self.n == 0 {
                    (other.min, other.max)
                } else {
                    (self.min.min(other.min), self.max.max(other.max))
                };
                self.n += other.n;
                self.total += other.total;
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    /// The sum of every value.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Quantiles come from the histogram (within [`HISTOGRAM_ERROR`]), not exact values.
    pub fn approximate(&self) -> bool {
        self.hist.is_some()
    }

    /// The `q`-quantile by nearest rank, as [`quantile`] gives it over every value.
    pub fn quantile(&mut self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let Some(h) = &self.hist else {
            if !self.sorted {
                self.exact.sort_unstable();
                self.sorted = true;
            }
            return quantile(&self.exact, q);
        };
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in h.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(middle(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

/// Median of unsorted values (reorders them); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mid = n / 2;
    let (_, m, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *m;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = values[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lower + upper) / 2.0)
}

/// A small deterministic generator (SplitMix64): the same capture gives the same diff.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), without modulo bias worth caring about for n ≪ 2⁶⁴.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The standard normal distribution function, through erfc (W. J. Cody's rational
/// approximation as given in Numerical Recipes' `erfcc`, relative error < 1.2e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = -z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    0.5 * erfc
}

/// One-sided Mann–Whitney U test that `new` tends to be larger than `base`: the p-value, by
/// the normal approximation with tie correction and continuity correction (good from about
/// eight values per side). `None` with an empty side.
pub fn mann_whitney_greater(base: &[f64], new: &[f64]) -> Option<f64> {
    let (n1, n2) = (base.len(), new.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = base.iter().map(|&v| (v, false)).chain(new.iter().map(|&v| (v, true))).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len();
    let mut rank_new = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let avg = (i + j) as f64 / 2.0 + 1.0;
        rank_new += all[i..=j].iter().filter(|x| x.1).count() as f64 * avg;
        ties += t * t * t - t;
        i = j + 1;
    }
    let (n1, n2, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = rank_new - n2 * (n2 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)).max(1.0));
    if var <= 0.0 {
        // Every value equal: nothing tends to be larger.
        return Some(0.5);
    }
    let z = (u - mean - 0.5) / var.sqrt();
    Some(1.0 - normal_cdf(z))
}

/// At most `cap` values, evenly spaced through `values` (a bootstrap over millions of calls
/// would cost seconds and say nothing more).
pub fn thin(values: &[f64], cap: usize) -> Vec<f64> {
    if values.len() <= cap {
        return values.to_vec();
    }
    (0..cap).map(|i| values[i * values.len() / cap]).collect()
}

/// A percentile bootstrap interval of the relative change of the median, `new/base − 1`:
/// `(low, high)` at the given confidence (e.g. 0.95). `None` with an empty side or a zero
/// median in a resample of `base`.
pub fn bootstrap_median_change(
    base: &[f64],
    new: &[f64],
    resamples: usize,
    confidence: f64,
    rng: &mut Rng,
) -> Option<(f64, f64)> {
    if base.is_empty() || new.is_empty() || resamples == 0 {
        return None;
    }
    let mut changes = Vec::with_capacity(resamples);
    let mut a = vec![0.0; base.len()];
    let mut b = vec![0.0; new.len()];
    for _ in 0..resamples {
        for x in a.iter_mut() {
            *x = base[rng.below(base.len())];
        }
        for x in b.iter_mut() {
            *x = new[rng.below(new.len())];
        }
        let (mb, mn) = (median(&mut a)?, median(&mut b)?);
        if mb <= 0.0 {
            return None;
        }
        changes.push(mn / mb - 1.0);
    }
    changes.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence.clamp(0.0, 1.0)) / 2.0;
    let at = |q: f64| changes[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    Some((at(tail), at(1.0 - tail)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v = [10, 20, 30, 40];
        assert_eq!(quantile(&v, 0.5), Some(20));
        assert_eq!(quantile(&v, 0.99), Some(40));
        assert_eq!(quantile(&v, 0.0), Some(10));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }

    #[test]
    fn samples_are_exact_up_to_the_cap_then_within_the_histogram_error() {
        let mut s = Samples::default();
        for v in [40, 10, 30, 20] {
            s.push(v);
        }
        assert_eq!((s.quantile(0.5), s.quantile(0.99), s.approximate()), (Some(20), Some(40), false));
        let values: Vec<u64> = (0..100_000u64).map(|i| (i * 7919) % 1_000_003 + 1).collect();
        let mut s = Samples::default();
        let mut half = Samples::default();
        for (i, &v) in values.iter().enumerate() {
            s.push(v);
            if i % 2 == 0 {
                half.push(v);
            }
        }
        let mut rest = Samples::default();
        values.iter().skip(1).step_by(2).for_each(|&v| rest.push(v));
        half.merge(&rest);
        let mut sorted = values.clone();
        sorted.sort_unstable();
        assert!(s.approximate());
        for q in [0.0, 0.01, 0.5, 0.9, 0.99, 1.0] {
            let exact = quantile(&sorted, q).unwrap() as f64;
            for got in [s.quantile(q).unwrap(), half.quantile(q).unwrap()] {
                assert!((got as f64 - exact).abs() <= exact * HISTOGRAM_ERROR, "q {q}: {got} vs {exact}");
            }
        }
        for v in [0, 1, 255, 256, 257, 1 << 40, u64::MAX] {
            let m = middle(bucket(v)) as f64;
            assert!((m - v as f64).abs() <= v as f64 * HISTOGRAM_ERROR + 0.5, "{v} -> {m}");
        }
    }

    #[test]
    fn the_normal_distribution_function_matches_its_table() {
        for (z, p) in [(0.0, 0.5), (1.0, 0.841_344_7), (-1.959_964, 0.025), (2.326_348, 0.99), (3.0, 0.998_650_1)] {
            assert!((normal_cdf(z) - p).abs() < 1e-6, "Φ({z}) = {} not {p}", normal_cdf(z));
        }
    }

    #[test]
    fn mann_whitney_matches_a_worked_example() {
        // Two fully separated samples of 10: U = 100, the most extreme; p ≈ 8e-5 one-sided.
        let base: Vec<f64> = (1..=10).map(f64::from).collect();
        let new: Vec<f64> = (11..=20).map(f64::from).collect();
        let p = mann_whitney_greater(&base, &new).unwrap();
        assert!(p < 1e-3 && p > 1e-5, "{p}");
        let reverse = mann_whitney_greater(&new, &base).unwrap();
        assert!(reverse > 0.999, "{reverse}");
        assert_eq!(mann_whitney_greater(&[1.0; 5], &[1.0; 5]), Some(0.5));
    }
}
