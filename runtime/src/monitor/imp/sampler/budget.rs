//! The sampler's CPU budget: a token bucket that rounds are paid from, and the thread CPU
//! clocks that say what each round and each reading cost.

use std::sync::OnceLock;
use std::time::Instant;

/// Pays for rounds out of the CPU budget: fills at `rate` CPU-ns per wall-ns, is charged what
/// each round cost, and lets a round start once it holds what rounds cost (a smoothed
/// estimate), so the thread's CPU over any stretch of time stays within the rate.
#[derive(Debug, Clone)]
pub(super) struct Bucket {
    rate: f64,
    tokens: f64,
    /// Smoothed CPU cost of a round, in ns (0 until the first is measured).
    estimate: f64,
}

impl Bucket {
    pub(super) fn new(rate: f64) -> Self {
        Bucket { rate, tokens: 0.0, estimate: 0.0 }
    }

    /// At most two seconds of budget, or two rounds, whichever is more.
    fn cap(&self) -> f64 {
        (self.rate * 2e9).max(2.0 * self.estimate)
    }

    pub(super) fn fill(&mut self, wall_ns: f64) {
        self.tokens = (self.tokens + self.rate * wall_ns).min(self.cap());
    }

    /// Wall time until the bucket holds the price of a round.
    pub(super) fn wait_ns(&self) -> f64 {
        ((self.estimate - self.tokens) / self.rate).max(0.0)
    }

    pub(super) fn charge(&mut self, spent_ns: f64) {
        self.tokens -= spent_ns;
        self.estimate = if self.estimate == 0.0 { spent_ns } else { 0.7 * self.estimate + 0.3 * spent_ns };
    }
}

/// The calling thread's CPU time in ns: what a reading costs the machine, whether NVML waits
/// for the GPU's firmware by spinning or by sleeping. Wall time where there is no such clock.
pub(crate) fn cost_clock() -> u64 {
    if let Some(ns) = own_cpu_ns() {
        return ns;
    }
    // process-wide because it is the process's wall-clock base where no CPU clock is.
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// CPU time of another thread of this process, in ns: the on-CPU time of its `schedstat`
/// (nanosecond resolution, unlike `stat`'s clock ticks; current as of its last switch, which
/// for a sampler that sleeps between rounds is its last round).
pub(super) fn thread_cpu_ns(tid: u32) -> Option<u64> {
    let path = format!("/proc/self/task/{tid}/schedstat");
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

/// The calling thread's CPU time in ns, exact to the moment (`CLOCK_THREAD_CPUTIME_ID`
/// includes the slice in progress); Linux only.
pub(super) fn own_cpu_ns() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec to write to; the clock id is a constant Linux knows.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
        }
    }
    None
}

/// The calling thread's kernel id (`/proc/thread-self` links to `<pid>/task/<tid>`).
pub(super) fn current_tid() -> Option<u32> {
    std::fs::read_link("/proc/thread-self").ok()?.file_name()?.to_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the bucket against a simulated sampler: rounds cost `round_ns` of CPU on a
    /// `grid_ns` grid, for `seconds`; returns the CPU spent as a fraction of one core.
    fn simulate(rate: f64, round_ns: f64, grid_ns: u64, seconds: u64) -> (f64, u64) {
        let mut b = Bucket::new(rate);
        let (mut now, mut spent, mut rounds, mut filled_at) = (0u64, 0.0, 0u64, 0u64);
        let end = seconds * 1_000_000_000;
        loop {
            b.fill((now - filled_at) as f64);
            filled_at = now;
            let ready = now + b.wait_ns() as u64;
            now = (now + grid_ns).max(ready.div_ceil(grid_ns) * grid_ns);
            if now >= end {
                return (spent / end as f64, rounds);
            }
            b.fill((now - filled_at) as f64);
            filled_at = now;
            b.charge(round_ns);
            spent += round_ns;
            rounds += 1;
        }
    }

    #[test]
    fn dear_rounds_wait_for_the_budget_and_cheap_ones_run_on_every_grid_point() {
        // The H200's shape: a full round about 1.06 ms of CPU, a 100 ms grid, 0.08 % of a core.
        let (fraction, rounds) = simulate(0.0008, 1_060_000.0, 100_000_000, 60);
        assert!(fraction <= 0.0008 && fraction > 0.0007, "{fraction}");
        assert!((40..=50).contains(&rounds), "{rounds}");
        // Rounds of 50 µs fit the budget at every grid point.
        let (fraction, rounds) = simulate(0.0008, 50_000.0, 100_000_000, 10);
        assert_eq!(rounds, 99);
        assert!(fraction < 0.0008, "{fraction}");
    }

    #[test]
    fn a_round_dearer_than_the_estimate_is_paid_back_before_the_next() {
        let mut b = Bucket::new(0.001);
        b.charge(1_000_000.0);
        assert_eq!(b.estimate, 1_000_000.0);
        // 1 ms owed and 1 ms to save up: 2 s at 0.1 %.
        assert_eq!(b.wait_ns(), 2e9);
        b.fill(2e9);
        assert_eq!(b.wait_ns(), 0.0);
        b.fill(1e12);
        assert_eq!(b.tokens, b.cap());
    }

    #[test]
    fn the_cost_clock_advances_with_work() {
        let a = cost_clock();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(cost_clock() > a);
    }

    #[test]
    fn this_threads_cpu_time_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            let before = own_cpu_ns().expect("CLOCK_THREAD_CPUTIME_ID");
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = x.wrapping_add(i * i);
            }
            std::hint::black_box(x);
            assert!(own_cpu_ns().expect("clock") > before);
            let tid = current_tid().expect("tid");
            assert!(thread_cpu_ns(tid).is_some());
        }
    }
}
