//! The program's sites: those compiled in (registered with `inventory`) and those made at run
//! time (selected application spans, instrumented passes), kept in the collector's
//! `site::imp::AtRunTime`. Apart from `site.rs`, the vocabulary every record names, because this list
//! reaches the process's collector.

use crate::site::{Site, SiteRef};

fn at_run_time() -> std::sync::MutexGuard<'static, Vec<&'static Site>> {
    crate::collector::collector().sites.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds a site made at run time to [`all_sites`].
pub(crate) fn register_at_run_time(site: &'static Site) {
    at_run_time().push(site);
}

/// The sites registered at run time after the first `from` of them (the live feed adds them to
/// the sites it follows).
#[cfg(unix)] // read by the live feed
pub(crate) fn at_run_time_since(from: usize) -> Vec<&'static Site> {
    at_run_time().get(from..).map(<[_]>::to_vec).unwrap_or_default()
}

/// Every site compiled into the program, and those registered at run time, in a stable order
/// (file, line).
pub(crate) fn all_sites() -> Vec<&'static Site> {
    let mut sites: Vec<&'static Site> = inventory::iter::<SiteRef>.into_iter().map(|r| r.0).collect();
    sites.extend(at_run_time().iter().copied());
    sites.sort_by_key(|s| (s.desc.file, s.desc.line, s.desc.name));
    sites.dedup_by(|a, b| std::ptr::eq(*a, *b));
    sites
}
