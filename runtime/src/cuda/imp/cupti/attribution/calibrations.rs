//! Every calibration of CUPTI's CPU clock against gpuspan's host clock, as one function of time.
//!
//! The two clocks do not tick at one rate: gpuspan's host clock is the TSC scaled by the rate
//! `quanta` measured at start-up against `CLOCK_MONOTONIC`, over as little as half a
//! millisecond, which leaves it up to ~100 ppm off in some processes (issue 39: 116 ppm and
//! 23 ppm in two processes on one H200), while CUPTI's clock runs at the system clock's rate.
//! One calibration aged by a 20 ppm allowance was therefore wrong by tens of µs within a
//! fraction of a second (most of all across the first call, where NVRTC left 200 ms between
//! two calibrations). Each measurement is good to ~50 ns, and the rate between them is
//! steady: the offset at any instant is interpolated between the two calibrations around it,
//! and extrapolated along the nearest two outside them.

use crate::placement::{drift, ClockMap};

/// Calibrations kept: one per resolver poll at most every 10 ms while records are placed,
/// so about 80 s of them (records wait at most 30 s for their buffers).
const KEPT: usize = 8192;

/// One calibration: `host = cupti + offset`, on both clocks' instants.
#[derive(Debug, Clone, Copy)]
struct Point {
    host: i128,
    cupti: i128,
    offset: i128,
    error: u64,
}

/// The calibrations, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Calibrations(Vec<Point>);

/// Which clock an instant is on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum On {
    Host,
    Cupti,
}

impl Calibrations {
    /// Adds a calibration (one older than the newest is the same one again, or out of order:
    /// ignored).
    pub(crate) fn add(&mut self, c: ClockMap) {
        let host = i128::from(c.taken_at_ns);
        if self.0.last().is_some_and(|p| p.host >= host) {
            return;
        }
        self.0.push(Point { host, cupti: host - c.offset_ns, offset: c.offset_ns, error: c.error_ns });
        if self.0.len() > KEPT {
            self.0.drain(..KEPT / 4);
        }
    }

    /// `host = cupti + offset` at instant `t` (on clock `on`), and the bound on its error: the
    /// calibrations' own, and 20 ppm of the distance to the nearest one for a rate that
    /// changed between them. `None` before the first calibration.
    pub(crate) fn offset(&self, t: i128, on: On) -> Option<(i128, u64)> {
        let key = |p: &Point| match on {
            On::Host => p.host,
            On::Cupti => p.cupti,
        };
        let points = &self.0;
        let (a, b) = match points.len() {
            0 => return None,
            1 => (points[0], points[0]),
            n => {
                let i = points.partition_point(|p| key(p) <= t).clamp(1, n - 1);
                (points[i - 1], points[i])
            }
        };
        let (ka, kb) = (key(&a), key(&b));
        let offset = if kb == ka { a.offset } else { a.offset + (b.offset - a.offset) * (t - ka) / (kb - ka) };
        let nearest = (t - ka).abs().min((t - kb).abs());
        let error =
            a.error.max(b.error) + u64::try_from(drift(u64::try_from(nearest).unwrap_or(u64::MAX))).unwrap_or(0);
        Some((offset, error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_795_898_328_627_217_989;

    /// Issue 39's process `07`: the host clock ran 116 ppm against CUPTI's. Between calibrations
    /// 200 ms apart the offset moved 23 µs; an instant between them is mapped within ~50 ns of
    /// the line through them, on either clock, not at the older one's offset.
    #[test]
    fn the_offset_follows_the_rate_between_calibrations() {
        let mut c = Calibrations::default();
        assert_eq!(c.offset(T.into(), On::Host), None);
        c.add(ClockMap { offset_ns: -11_962, error_ns: 35, taken_at_ns: T });
        let (o, e) = c.offset(i128::from(T) + 100_000_000, On::Host).expect("one calibration");
        assert_eq!(o, -11_962);
        assert_eq!(e, 35 + 2_001, "its error and 20 ppm of 100 ms");
        c.add(ClockMap { offset_ns: -35_190, error_ns: 64, taken_at_ns: T + 200_300_000 });
        c.add(ClockMap { offset_ns: -37_513, error_ns: 51, taken_at_ns: T + 220_400_000 });
        c.add(ClockMap { offset_ns: -37_000, error_ns: 51, taken_at_ns: T + 220_400_000 }); // the same again
        let halfway = i128::from(T) + 100_150_000;
        let (o, e) = c.offset(halfway, On::Host).expect("between");
        assert!((o - (-11_962 - 23_228 / 2)).abs() <= 1, "{o}");
        assert_eq!(e, 64 + 2_004);
        let (oc, _) = c.offset(halfway - o, On::Cupti).expect("the same instant on CUPTI's clock");
        assert!((oc - o).abs() <= 1, "{oc} {o}");
        // Past the last calibration: along the last two (116 ppm).
        let (o, _) = c.offset(i128::from(T) + 240_500_000, On::Host).expect("after");
        assert!((o - (-37_513 - 2_323)).abs() <= 5, "{o}");
    }
}
