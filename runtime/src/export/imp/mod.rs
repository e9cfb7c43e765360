//! The sinks only the instrumented build has: the capture file, the timeline file (Chrome JSON
//! or Perfetto) and the live feed, with the file handling they share; and a summary row read
//! from a site's aggregates.

mod capture_encoder;
pub(crate) mod capture_file;
pub(crate) mod file;
// A Unix socket: elsewhere `Config::live` says once that there is no live feed.
#[cfg(unix)]
pub(crate) mod live;
mod perfetto;
pub(crate) mod timeline;

use super::summary::SiteSummary;
use crate::site::Site;

/// Read from the site's instrumented state (`site/imp.rs`).
impl SiteSummary {
    /// The site's aggregates now: the summary's row, and the capture's aggregate frame.
    pub(in crate::export) fn of(site: &'static Site) -> Self {
        let t = site.state.stats.totals();
        SiteSummary {
            site,
            calls: t.calls,
            errors: t.errors,
            total_ns: t.total_ns,
            min_ns: t.min_ns,
            p50_ns: t.quantile(0.5).unwrap_or(0),
            p99_ns: t.quantile(0.99).unwrap_or(0),
            max_ns: t.max_ns,
            host_total_ns: t.host_total_ns,
            bytes: t.bytes,
            bracketed: t.bracketed,
            bracket_at_exit: t.bracket_at_exit,
            device_delta_max_bytes: t.device_delta_max,
            rss_delta_max_bytes: t.rss_delta_max,
            sources: t.sources,
            attributed: t.attributed,
        }
    }
}
