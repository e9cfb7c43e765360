//! The live feed's history: each site's recent aggregates, from which a snapshot takes its
//! window.

use super::WINDOW;
use crate::aggregate::{quantile_of, Totals};
use crate::site::Site;
use gpuspan_capture::live as msg;
use std::collections::VecDeque;

/// A site's counts at one time. The histogram keeps only its non-empty buckets.
#[derive(Debug, Clone)]
struct Point {
    time_ns: u64,
    calls: u64,
    errors: u64,
    total_ns: u64,
    bytes: u64,
    buckets: Vec<(u32, u64)>,
}

impl Point {
    fn of(time_ns: u64, t: &Totals) -> Point {
        let buckets = t.buckets().iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (i as u32, *c)).collect();
        Point { time_ns, calls: t.calls, errors: t.errors, total_ns: t.total_ns, bytes: t.bytes, buckets }
    }
}

/// The recent points of one site, oldest first, spanning at most [`WINDOW`].
#[derive(Debug)]
struct Track {
    site: &'static Site,
    points: VecDeque<Point>,
}

/// The per-site history the snapshots take their windows from.
#[derive(Debug)]
pub(super) struct Windows {
    tracks: Vec<Track>,
    /// Sites registered at run time (selected spans, `span_scopes.rs`) already looked at.
    run_time_seen: usize,
}

impl Windows {
    pub(super) fn new(sites: Vec<&'static Site>) -> Windows {
        let tracks = sites.into_iter().map(|site| Track { site, points: VecDeque::new() }).collect();
        Windows { tracks, run_time_seen: 0 }
    }

    /// Follows the sites registered at run time since the last look (a selected span's site
    /// appears when its first span does).
    pub(super) fn add_run_time_sites(&mut self) {
        let new = crate::sites::at_run_time_since(self.run_time_seen);
        self.run_time_seen += new.len();
        for site in new {
            if !self.tracks.iter().any(|t| std::ptr::eq(t.site, site)) {
                self.tracks.push(Track { site, points: VecDeque::new() });
            }
        }
    }

    /// Reads every site's aggregates now into its history, dropping points the window no longer
    /// needs.
    pub(super) fn sample(&mut self, now_ns: u64) {
        let horizon = now_ns.saturating_sub(WINDOW.as_nanos() as u64);
        for track in &mut self.tracks {
            let t = track.site.state.stats.totals();
            track.points.push_back(Point::of(now_ns, &t));
            while track.points.len() > 1 && track.points.front().is_some_and(|p| p.time_ns < horizon) {
                track.points.pop_front();
            }
        }
    }

    /// Every site called so far: its totals now and its window, from its oldest point to now.
    pub(super) fn sites(&self, now_ns: u64, since_ns: u64) -> (Vec<msg::Site>, f64) {
        let mut rows = Vec::new();
        // The window starts at the oldest point kept (the same for every site: they are sampled
        // together), or at the feed's start.
        let start_ns = self.tracks.iter().find_map(|t| t.points.front()).map_or(since_ns, |p| p.time_ns);
        let window_ns = now_ns.saturating_sub(start_ns);
        let window_s = window_ns as f64 / 1e9;
        for track in &self.tracks {
            let t = track.site.state.stats.totals();
            if t.calls == 0 {
                continue;
            }
            let zero = Point { time_ns: start_ns, calls: 0, errors: 0, total_ns: 0, bytes: 0, buckets: Vec::new() };
            let old = track.points.front().unwrap_or(&zero);
            let mut counts = t.buckets().to_vec();
            for (i, c) in &old.buckets {
                if let Some(n) = counts.get_mut(*i as usize) {
                    *n = n.saturating_sub(*c);
                }
            }
            // Bucket midpoints can fall outside what was seen; every call of the window lies
            // within the whole run's min and max.
            let quantile = |q| quantile_of(&counts, q).map(|v| v.clamp(t.min_ns, t.max_ns));
            let calls = t.calls.saturating_sub(old.calls);
            let time_ns = t.total_ns.saturating_sub(old.total_ns);
            let bytes = t.bytes.saturating_sub(old.bytes);
            let per_s = |n: u64| if window_ns > 0 { n as f64 * 1e9 / window_ns as f64 } else { 0.0 };
            let on_gpu = !t.sources.is_empty() && !t.sources.contains(&crate::TimingSource::Host);
            let d = &track.site.desc;
            // A read-back timed on the host is mostly waiting for the GPU: no bandwidth.
            let host_read_back =
                d.direction == Some(crate::site::Direction::GpuToCpu) && t.sources.contains(&crate::TimingSource::Host);
            rows.push(msg::Site {
                name: d.name.to_owned(),
                function: track.site.qualified_function(),
                kind: d.kind.as_str().to_owned(),
                backend: d.backend.as_str().to_owned(),
                file: d.file.to_owned(),
                line: d.line,
                direction: d.direction.map(|x| x.as_str().to_owned()),
                calls: t.calls,
                errors: t.errors,
                sources: t.sources.iter().map(|s| s.as_str().to_owned()).collect(),
                bracketed: t.bracketed,
                host_reason: track.site.host_reason().map(str::to_owned),
                window: msg::Window {
                    calls,
                    errors: t.errors.saturating_sub(old.errors),
                    calls_per_s: per_s(calls),
                    time_ns,
                    gpu_busy: (on_gpu && window_ns > 0).then(|| time_ns as f64 / window_ns as f64),
                    gpu_share: on_gpu.then_some(0.0),
                    p50_ns: quantile(0.5),
                    p99_ns: quantile(0.99),
                    bytes,
                    bytes_per_s: per_s(bytes),
                    // A bracket's time is an upper bound: no bandwidth either (decision 26).
                    bandwidth_bytes_per_s: (bytes > 0 && time_ns > 0 && !host_read_back && !t.bracketed)
                        .then(|| bytes as f64 * 1e9 / time_ns as f64),
                },
            });
        }
        // Shares of the GPU time of the GPU-timed sites, once all are known.
        let gpu_total: u64 = rows.iter().filter(|r| r.window.gpu_share.is_some()).map(|r| r.window.time_ns).sum();
        for r in &mut rows {
            if r.window.gpu_share.is_some() {
                r.window.gpu_share = Some(if gpu_total > 0 { r.window.time_ns as f64 / gpu_total as f64 } else { 0.0 });
            }
        }
        (rows, window_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Interval, Record};
    use crate::site::{Backend, SiteKind};

    const fn site(name: &'static str, backend: Backend) -> Site {
        Site::new(crate::site::site_desc!(name, SiteKind::Kernel, backend))
    }

    static WINDOWED: Site = site("windowed", Backend::Host);

    #[test]
    fn a_window_holds_only_the_calls_since_its_oldest_point() {
        let mut w = Windows::new(vec![&WINDOWED]);
        for _ in 0..100 {
            WINDOWED.state.stats.add_host(1_000, Some(10));
        }
        let t0 = 1_000_000_000_000;
        w.sample(t0);
        for _ in 0..50 {
            WINDOWED.state.stats.add_host(9_000, None);
        }
        let (rows, window_s) = w.sites(t0 + 2_000_000_000, 0);
        assert_eq!(window_s, 2.0);
        let r = &rows[0];
        assert_eq!((r.calls, r.window.calls, r.window.calls_per_s), (150, 50, 25.0));
        assert_eq!(r.window.bytes, 0, "the bytes were all before the window");
        // Every call of the window took 9 µs: its median is that, not the run's 1 µs.
        let p50 = r.window.p50_ns.unwrap();
        assert!((8_500..=9_000).contains(&p50), "{p50}");
        assert_eq!(r.window.gpu_busy, None, "host time is not GPU time");
        assert_eq!(r.sources, ["host"]);

        // Points older than the window are dropped, so its start moves on.
        for k in 1..=20u64 {
            w.sample(t0 + k * 1_000_000_000);
        }
        assert!(w.tracks[0].points.len() <= 12, "{}", w.tracks[0].points.len());
        let (rows, window_s) = w.sites(t0 + 20_500_000_000, 0);
        assert!((9.5..=10.5).contains(&window_s), "{window_s}");
        assert_eq!(rows[0].window.calls, 0);
        assert_eq!(rows[0].window.p50_ns, None);
    }

    #[test]
    fn sites_registered_at_run_time_are_followed_once() {
        let mut w = Windows::new(vec![&WINDOWED]);
        let span: &'static Site =
            Box::leak(Box::new(Site::for_span(crate::site::site_desc!("live_span", SiteKind::Kernel, Backend::Host))));
        crate::sites::register_at_run_time(span);
        w.add_run_time_sites();
        w.add_run_time_sites();
        assert_eq!(w.tracks.iter().filter(|t| std::ptr::eq(t.site, span)).count(), 1);
    }

    static GPU_A: Site = site("gpu_a", Backend::Wgpu);
    static GPU_B: Site = site("gpu_b", Backend::Wgpu);

    fn gpu_record(site: &'static Site, ns: u64) -> Record {
        let mut r = Record::new(site, 1, 0, Interval { start_ns: 10, end_ns: 10 + ns });
        r.gpu = Some(crate::record::GpuTiming::new(
            Interval { start_ns: 10, end_ns: 10 + ns },
            crate::TimingSource::GpuTimestamp,
        ));
        r
    }

    #[test]
    fn gpu_time_is_shared_among_gpu_timed_sites() {
        let mut w = Windows::new(vec![&GPU_A, &GPU_B]);
        w.sample(0);
        for _ in 0..3 {
            GPU_A.state.stats.add(&gpu_record(&GPU_A, 1_000_000));
        }
        GPU_B.state.stats.add(&gpu_record(&GPU_B, 1_000_000));
        let (rows, _) = w.sites(1_000_000_000, 0);
        let a = rows.iter().find(|r| r.name == "gpu_a").unwrap();
        let b = rows.iter().find(|r| r.name == "gpu_b").unwrap();
        assert_eq!(a.window.gpu_share, Some(0.75));
        assert_eq!(b.window.gpu_share, Some(0.25));
        assert_eq!(a.window.gpu_busy, Some(0.003));
        assert_eq!(a.sources, ["gpu_timestamp"]);
    }
}
