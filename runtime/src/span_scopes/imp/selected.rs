//! The instrumented side of [`layer`](crate::span_scopes::layer): the selection as `init` set it, and what a
//! selected span does on entry, exit and close (`span_scopes.rs` says what and why). Built only
//! with the `enabled` feature; without it the layer selects nothing.

use super::open_spans::Life;
use super::recent::{Closes, Recent};
use crate::backends::{span_backend, span_gpu, SpanWork};
use crate::record::Value;
use crate::scope::Scope;
use crate::site::{Backend, Site, SiteDesc, SiteKind};
use crate::span_scopes::{SpanScopes, SpanSelection};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as Values};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::{Extensions, LookupSpan};

/// Whose, by time, GPU work launched at host instant `host_ns` is, for a backend that found no
/// scope on the launching thread (`open_spans.rs` has the rule). CUPTI's attribution asks it;
/// so may wgpu's instrumented passes.
#[cfg(feature = "cuda")]
pub(crate) fn by_time(host_ns: u64) -> super::open_spans::ByTime {
    crate::collector::collector().selected.open_spans.at(host_ns)
}

/// The same rule for work a backend gathers per span, launched now (wgpu's instrumented passes,
/// as each begins): the work of the one selected span entered now, or the names of several (not
/// guessed between); one atomic load while none is entered.
#[cfg(feature = "_wgpu")]
pub(crate) fn work_by_time_now() -> super::open_spans::WorkByTime {
    crate::collector::collector().selected.open_spans.work_now()
}

/// The unselected spans entered at host instant `host_ns`, to name GPU work that no scope owned
/// (no annotated call or selected span on its thread, none selected entered anywhere then): the
/// innermost one, or the unrelated ones, so the user learns what to select. Knowing that costs
/// every span entry, so the census of unselected spans starts only at the first such work
/// (`tracing` asks every callsite again, and the layer follows every span from then on): work
/// before it, or with no span entered, is unnamed (`None`). Each name is counted for the summary.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // CUPTI's unowned work
pub(crate) fn unselected_at(host_ns: u64) -> Option<Arc<str>> {
    if !start_census() {
        return None;
    }
    named_at(host_ns)
}

/// Unowned work is seen: starts the census of [`unselected_at`] if it is not on yet. True when
/// it already was, so that work launched now can be named ([`named_at`], later).
pub(crate) fn start_census() -> bool {
    let selected = &crate::collector::collector().selected;
    // A load first: after the first unowned work this is every pass's question.
    if selected.census_on.load(Ordering::Relaxed) || selected.census_on.swap(true, Ordering::Relaxed) {
        return true;
    }
    if selected.layer_added.load(Ordering::Relaxed) {
        tracing::callsite::rebuild_interest_cache();
    } else {
        crate::diagnostics::note_once(
            "GPU work ran outside every annotated call and selected span: with `gpuspan::layer()` in the \
             subscriber its records would name the span entered at its launch, so that you can select it",
        );
    }
    false
}

/// The unselected spans the census saw entered at `host_ns` (see [`unselected_at`]), counted
/// for the summary; for work seen while the census was on ([`start_census`]).
pub(crate) fn named_at(host_ns: u64) -> Option<Arc<str>> {
    let selected = &crate::collector::collector().selected;
    let name = selected.census.names_at(host_ns)?;
    *lock(&selected.census_named).entry(name.clone()).or_insert(0) += 1;
    Some(name)
}

/// The summary's line on unowned work named by the census: which unselected spans were entered
/// at its launch, and how to select them.
pub(crate) fn say_unselected_spans() {
    let named = lock(&crate::collector::collector().selected.census_named);
    if named.is_empty() {
        return;
    }
    let mut by_count: Vec<(&Arc<str>, &u64)> = named.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = by_count.iter().map(|(n, c)| format!("{n} ({c})")).collect();
    let single: Vec<String> = by_count
        .iter()
        .filter(|(n, _)| !n.contains(", "))
        .map(|(n, _)| format!("[{}]", n.split(" ×").next().unwrap_or(n)))
        .collect();
    crate::diagnostics::note_once(format_args!(
        "GPU work no annotated call or selected span owned was launched while these unselected spans were entered \
         (records each): {}; select them to measure them (GPUSPAN_SPANS='{}')",
        list.join("; "),
        single.join(",")
    ));
}

fn census_on() -> bool {
    crate::collector::collector().selected.census_on.load(Ordering::Relaxed)
}

fn from_init_lock() -> &'static RwLock<Option<Option<Arc<EnvFilter>>>> {
    &crate::collector::collector().selected.from_init
}

fn parse(directives: Option<&str>) -> Option<Arc<EnvFilter>> {
    let d = directives.map(str::trim).filter(|d| !d.is_empty())?;
    match EnvFilter::builder().parse(d) {
        Ok(f) => Some(Arc::new(f)),
        Err(e) => {
            crate::diagnostics::note_once(format_args!(
                "the span selection {d:?} is not in EnvFilter's directive syntax ({e}): no span is selected"
            ));
            None
        }
    }
}

/// Whether a selection in `EnvFilter`'s syntax has span or field directives (`[request]`,
/// `[{id=1}]`: always in brackets): only then does its filter follow the spans entered (its
/// `on_enter` and `on_exit` find nothing to do otherwise, at a lock and a map lookup each).
fn follows_spans(directives: &str) -> bool {
    directives.contains('[')
}

/// `init` was given this selection (`Config::spans`, or `GPUSPAN_SPANS`): [`layer`] uses it from
/// now on, and every callsite is asked again. A selection with no layer in the process's
/// subscriber (already set) is said now; one set later is checked by [`say_if_layer_missing`].
pub(crate) fn select_from_init(directives: Option<&str>) {
    let filter = parse(directives);
    let selects = filter.is_some();
    *from_init_lock().write().unwrap_or_else(|e| e.into_inner()) = Some(filter);
    tracing::callsite::rebuild_interest_cache();
    if selects && tracing::dispatcher::has_been_set() {
        say_if_layer_missing();
    }
}

/// The layer is missing: spans are selected (`GPUSPAN_SPANS` or `Config::spans`) but no
/// [`layer`](crate::span_scopes::layer) was added to any subscriber, so no span can be measured. Said once
/// (at `init` when the subscriber was set before it, else at the summary).
pub(crate) fn say_if_layer_missing() {
    if layer_missing(crate::collector::collector().selected.layer_added.load(Ordering::Relaxed), from_init().is_some())
    {
        crate::diagnostics::note_once(
            "spans are selected (GPUSPAN_SPANS or Config::spans) but no `gpuspan::layer()` is in the subscriber, so \
             none is measured: add `.with(gpuspan::layer())` to the `tracing_subscriber::registry()` the program \
             installs",
        );
    }
}

fn layer_missing(layer_added: bool, selects: bool) -> bool {
    selects && !layer_added
}

/// Whether `init`'s selection selects anything (a backend that must time spans from the start is
/// then started at `init`).
pub(crate) fn init_selects() -> bool {
    matches!(&*from_init_lock().read().unwrap_or_else(|e| e.into_inner()), Some(Some(_)))
}

fn from_init() -> Option<Arc<EnvFilter>> {
    if let Some(f) = &*from_init_lock().read().unwrap_or_else(|e| e.into_inner()) {
        return f.clone();
    }
    // Neither `init` nor an earlier use resolved the settings: the environment's, once.
    crate::settings::from_env_once();
    from_init_lock().read().unwrap_or_else(|e| e.into_inner()).clone().flatten()
}

/// The environment's selection, for a program that did not call `init` (`settings.rs`): kept
/// unless `init` gave one first.
pub(crate) fn select_unless_given(directives: Option<&str>) {
    let mut w = from_init_lock().write().unwrap_or_else(|e| e.into_inner());
    if w.is_none() {
        *w = Some(parse(directives));
    }
}

/// A [`SpanSelection`]'s state: its own directives or `init`'s, and the callsites it did not
/// switch off.
#[derive(Debug)]
pub(in crate::span_scopes) struct Selection {
    /// `None`: the one `init` was given (or `GPUSPAN_SPANS`), read each time it is asked.
    fixed: Option<Option<Arc<EnvFilter>>>,
    /// The fixed selection has span directives (`[name]`, fields): its filter follows the spans
    /// entered. True for `init`'s, which may change.
    fixed_follows_spans: bool,
    /// The callsites it did not switch off (the per-span question's one load).
    callsites: super::live::Callsites,
}

impl Selection {
    /// `directives` in `EnvFilter`'s syntax, fixed; `None`: `init`'s, whenever it is asked.
    pub(in crate::span_scopes) fn new(directives: Option<&str>) -> Selection {
        Selection {
            fixed: directives.map(|d| parse(Some(d))),
            fixed_follows_spans: directives.is_none_or(follows_spans),
            callsites: super::live::Callsites::new(),
        }
    }
}

impl SpanSelection {
    fn filter(&self) -> Option<Arc<EnvFilter>> {
        match &self.inner.fixed {
            Some(f) => f.clone(),
            None => from_init(),
        }
    }

    /// `f` on the selection's filter, if there is one, borrowed where [`SpanSelection::filter`]
    /// clones it.
    fn with_filter(&self, f: impl FnOnce(&EnvFilter)) {
        match &self.inner.fixed {
            Some(fixed) => {
                if let Some(filter) = fixed {
                    f(filter);
                }
            }
            None => {
                let set = from_init_lock().read().unwrap_or_else(|e| e.into_inner());
                match &*set {
                    Some(Some(filter)) => f(filter),
                    Some(None) => {}
                    None => {
                        drop(set);
                        if let Some(filter) = from_init() {
                            f(&filter);
                        }
                    }
                }
            }
        }
    }

    /// Whether the selection's filter may follow the spans entered (`follows_spans`).
    #[inline]
    fn follows_spans(&self) -> bool {
        self.inner.fixed.is_none() || self.inner.fixed_follows_spans
    }

    /// Whether the selection takes the span (gpuspan's own and events aside).
    fn selects<S: Subscriber + for<'a> LookupSpan<'a>>(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        self.filter().is_some_and(|f| Filter::<S>::enabled(&*f, meta, cx))
    }
}

/// The mark of a span the selection does not take though the filter let it through: the
/// census follows it (the layer keeps its [`Census`] life instead of an [`Instance`]), or
/// nothing does (its callsite was not registered yet when the filter was asked).
enum Unselected {
    Census,
    Ignored,
}

/// An unselected span's life, for naming unowned work (`unselected_at`): in the census's log
/// from its first entry.
struct Census {
    life: Arc<Life>,
    logged: AtomicBool,
}

/// gpuspan's own spans: an annotated call's host span (under the user's target since it is a
/// drop-in for `#[instrument]`, told apart by the macro's never-recorded marker field) and the
/// runtime's own (target `gpuspan::..`). An annotated call is already a scope: selecting its
/// span too would time it twice.
fn is_own(meta: &Metadata<'_>) -> bool {
    let t = meta.target();
    t == "gpuspan" || t.starts_with("gpuspan::") || crate::spans::is_host_span(meta)
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Filter<S> for SpanSelection {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        // A callsite the selection switched off: one load (another layer keeps it on). The
        // census marks every span callsite when it starts (`callsite_enabled`).
        // A callsite not known yet is let through: `tracing` asks this of a thread whose callsite
        // another thread is still registering, before the selection has seen it; `on_new_span`
        // registers it and decides.
        self.inner.callsites.may_be_wanted(meta)
            && meta.is_span()
            && !is_own(meta)
            && (census_on() || self.inner.callsites.said(meta).is_none() || self.selects(meta, cx))
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if !meta.is_span() || is_own(meta) {
            self.inner.callsites.mark(meta, false);
            return Interest::never();
        }
        let interest = self.filter().map_or_else(Interest::never, |f| Filter::<S>::callsite_enabled(&*f, meta));
        // Asked again when the census starts (`rebuild_interest_cache`): it follows every span.
        if interest.is_never() && census_on() {
            self.inner.callsites.mark(meta, true);
            return Interest::always();
        }
        self.inner.callsites.mark(meta, !interest.is_never());
        interest
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // Asked again when `init` changes the selection or the census starts.
        if census_on() {
            return Some(LevelFilter::TRACE);
        }
        Some(self.filter().map_or(LevelFilter::OFF, |f| Filter::<S>::max_level_hint(&*f).unwrap_or(LevelFilter::TRACE)))
    }

    // What an `EnvFilter` with field or span directives (`[request{id=1}]`) keeps track of; a
    // span the census follows but the selection does not take is marked so for the layer.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, cx: Context<'_, S>) {
        let meta = attrs.metadata();
        // Decided again where `enabled` let the span through without the selection's answer: a
        // callsite not registered yet (registered now, as `tracing` would have), or the census.
        let unknown = self.inner.callsites.said(meta).is_none();
        if unknown {
            let _ = Filter::<S>::callsite_enabled(self, meta);
        }
        if (unknown || census_on()) && !self.selects(meta, &cx) {
            if let Some(span) = cx.span(id) {
                span.extensions_mut().insert(if census_on() { Unselected::Census } else { Unselected::Ignored });
            }
            return;
        }
        if let Some(f) = self.filter() {
            Filter::<S>::on_new_span(&*f, attrs, id, cx);
        }
    }

    fn on_record(&self, id: &Id, values: &Values<'_>, cx: Context<'_, S>) {
        if let Some(f) = self.filter() {
            Filter::<S>::on_record(&*f, id, values, cx);
        }
    }

    // A span's entry and exit (`SpanScopes::entered`): the selection's filter without a clone of
    // its `Arc` (two atomic operations) where the layer's is fixed.
    fn on_enter(&self, id: &Id, cx: Context<'_, S>) {
        self.with_filter(|f| Filter::<S>::on_enter(f, id, cx));
    }

    fn on_exit(&self, id: &Id, cx: Context<'_, S>) {
        self.with_filter(|f| Filter::<S>::on_exit(f, id, cx));
    }

    fn on_close(&self, id: Id, cx: Context<'_, S>) {
        if let Some(f) = self.filter() {
            Filter::<S>::on_close(&*f, id, cx);
        }
    }
}

thread_local! {
    /// The selected spans this thread entered last (decision 76).
    static RECENT: Recent<Instance> = const { Recent::new() };
}

/// What a selected span instance keeps in its extensions (shared with the threads that entered
/// it last: [`RECENT`]).
struct Instance {
    site: &'static Site,
    /// When it was entered, for attribution by time.
    life: Arc<Life>,
    /// Its scope, opened at the first entry: each later entry reads it without a lock.
    opened: OnceLock<Opened>,
    /// The span's recorded fields, as attributes of its record.
    fields: Mutex<Vec<(&'static str, Value)>>,
    /// The work backends give it by the threads that entered it (`backends.rs`, `SpanWork`).
    work: SpanWork,
}

/// A selected span's scope once its first entry opened it.
struct Opened {
    scope_id: u64,
    /// Its backend tags each entry (`backends::span_enter`).
    tags: bool,
    /// Taken when the span closes (locked there only). Boxed: the slot stays small.
    scope: Mutex<Option<Box<Scope>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One site per span callsite, made the first time a span of it is selected.
fn site_of(meta: &'static Metadata<'static>) -> &'static Site {
    let mut sites = lock(&crate::collector::collector().selected.sites);
    sites.get_or_insert_with(HashMap::new).entry(meta.callsite()).or_insert_with(|| {
        let desc = SiteDesc {
            name: meta.name(),
            function: meta.name(),
            kind: SiteKind::Kernel,
            backend: span_backend(),
            module_path: meta.module_path().unwrap_or(meta.target()),
            file: meta.file().unwrap_or("<unknown>"),
            line: meta.line().unwrap_or(0),
            direction: None,
            threshold_us: None,
            trace_all: false,
            track_memory: false,
        };
        let site: &'static Site = Box::leak(Box::new(Site::for_span(desc)));
        if desc.backend == Backend::Host {
            site.timed_on_host("gpuspan was built without a GPU backend feature");
        }
        crate::sites::register_at_run_time(site);
        site
    })
}

/// Per thread, the selected spans entered on it whose scope tags entries (a CUPTI window, or its
/// id pushed: `backends::span_enter`): (span id, scope id, site, the entry's tag), innermost
/// last. Kept only where a backend tags entries (`backends::SPAN_ENTRIES`).
mod entries {
    use crate::backends::SpanEntry;
    use crate::site::Site;
    use std::cell::RefCell;

    thread_local! {
        static ENTERED: RefCell<Vec<(u64, u64, &'static Site, SpanEntry)>> = const { RefCell::new(Vec::new()) };
    }

    #[inline(always)]
    pub(super) fn enter(span: u64, site: &'static Site, scope_id: u64) {
        enter_with(span, site, scope_id, crate::backends::span_enter);
    }

    #[inline(always)]
    pub(super) fn exit(span: u64) {
        exit_with(span, crate::backends::span_exit);
    }

    /// [`enter`] with the backend's tagging given (tests count them without CUPTI).
    #[inline(always)]
    pub(super) fn enter_with(span: u64, site: &'static Site, scope_id: u64, tag: impl FnOnce(u64) -> SpanEntry) {
        let entry = tag(scope_id);
        let _ = ENTERED.try_with(|e| e.borrow_mut().push((span, scope_id, site, entry)));
    }

    /// [`exit`] with the backend's end given: ends what this thread's entry of `span` began.
    #[inline(always)]
    pub(super) fn exit_with(span: u64, end: impl FnOnce(&'static Site, u64, SpanEntry)) {
        let entry = ENTERED
            .try_with(|e| {
                let mut e = e.borrow_mut();
                // Spans nest, so the innermost entry is almost always the one ending: popped
                // without `remove`'s call to move the rest (`scripts/count-window`).
                if e.last().is_some_and(|(s, ..)| *s == span) {
                    return e.pop();
                }
                let i = e.iter().rposition(|(s, ..)| *s == span)?;
                Some(e.remove(i))
            })
            .ok()
            .flatten();
        if let Some((_, scope_id, site, entry)) = entry {
            if entry != SpanEntry::Untagged {
                end(site, scope_id, entry);
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::site::{Backend, SiteKind};
        use std::cell::RefCell as Log;

        static SITE: Site = Site::new(crate::site::site_desc!("entries", SiteKind::Kernel, Backend::Cuda));

        #[test]
        fn each_threads_entries_end_what_they_began_innermost_first() {
            let log = Log::new(Vec::new());
            let tag = |id: u64| {
                log.borrow_mut().push(format!("enter {id}"));
                match id {
                    99 => SpanEntry::Untagged, // the push of scope 99 fails: nothing to end
                    20 => SpanEntry::Pushed,   // inside an async poll: pushed
                    _ => SpanEntry::Window(id * 100),
                }
            };
            enter_with(1, &SITE, 10, tag);
            enter_with(2, &SITE, 20, tag);
            enter_with(3, &SITE, 99, tag);
            // The same span entered on another thread meanwhile: its own entry there.
            std::thread::spawn(|| {
                let ended = Log::new(Vec::new());
                enter_with(1, &SITE, 10, |_| SpanEntry::Window(7));
                exit_with(1, |_, id, e| ended.borrow_mut().push((id, e)));
                assert_eq!(*ended.borrow(), [(10, SpanEntry::Window(7))]);
            })
            .join()
            .unwrap();
            let end = |_: &'static Site, id: u64, e: SpanEntry| log.borrow_mut().push(format!("end {id} {e:?}"));
            exit_with(3, end);
            exit_with(2, end);
            exit_with(7, end); // never entered here: nothing
            exit_with(1, end);
            assert_eq!(*log.borrow(), ["enter 10", "enter 20", "enter 99", "end 20 Pushed", "end 10 Window(1000)"]);
            assert!(ENTERED.with(|e| e.borrow().is_empty()));
        }
    }
}

impl Closes for Instance {
    #[inline]
    fn is_closed(&self) -> bool {
        self.life.is_closed()
    }
}

impl Instance {
    /// One entry, on this thread: no lock but the span's life's (attribution by time); under
    /// CUPTI a window of this thread's time (decision 71).
    fn enter(&self, span: &Id) {
        let opened = self.opened.get_or_init(|| {
            let mut scope = Scope::span_scope(self.site, |_| span_gpu(self.site));
            let log = &crate::collector::collector().selected.open_spans;
            log.opened(&self.life, scope.scope_id(), crate::clock::now_ns());
            let tags = scope.gpu_mut().is_some_and(|g| g.tags_span_entries());
            Opened { scope_id: scope.scope_id(), tags, scope: Mutex::new(Some(Box::new(scope))) }
        });
        crate::collector::collector().selected.open_spans.enter(&self.life, crate::clock::now_ns);
        crate::backends::span_work_enter(span.into_u64(), &self.work);
        if opened.tags {
            entries::enter(span.into_u64(), self.site, opened.scope_id);
        }
    }

    fn exit(&self, span: &Id) {
        if crate::backends::SPAN_ENTRIES {
            entries::exit(span.into_u64());
        }
        crate::backends::span_work_exit(span.into_u64());
        crate::collector::collector().selected.open_spans.exit(&self.life, crate::clock::now_ns);
    }

    /// Whether its first entry opened its scope and it has not closed.
    fn is_open(&self) -> bool {
        self.opened.get().is_some_and(|o| lock(&o.scope).is_some())
    }

    /// The span closes: its scope, with its fields, to be dropped by the caller outside every
    /// lock (the record goes to its backend then).
    fn close(&self) -> Option<Scope> {
        self.life.close();
        let mut scope = self.opened.get().and_then(|o| lock(&o.scope).take())?;
        scope.set_fields(std::mem::take(&mut *lock(&self.fields)));
        crate::backends::span_work_close(&self.work, scope.gpu_mut());
        Some(*scope)
    }
}

/// A selected span (or one the census follows) is entered on this thread: what its extensions
/// hold does it.
fn enter_found(id: &Id, ext: &Extensions<'_>) {
    if let Some(i) = ext.get::<Arc<Instance>>() {
        i.enter(id);
    } else if let Some(c) = ext.get::<Census>() {
        if !c.logged.swap(true, Ordering::Relaxed) {
            crate::collector::collector().selected.census.opened(&c.life, 0, crate::clock::now_ns());
        }
        c.life.enter(crate::clock::now_ns);
    }
}

/// Its entry on this thread ends.
fn exit_found(id: &Id, ext: &Extensions<'_>) {
    if let Some(i) = ext.get::<Arc<Instance>>() {
        i.exit(id);
    } else if let Some(c) = ext.get::<Census>() {
        c.life.exit(crate::clock::now_ns);
    }
}

impl SpanScopes {
    /// Whether span `id` may be one the filter enabled (`false`: certainly not, and the
    /// per-layer filter's lookup would find so): one load.
    #[inline]
    pub(in crate::span_scopes) fn may_hold(&self, id: &Id) -> bool {
        self.live.may_hold(id)
    }

    /// A span [`SpanLayer`](crate::span_scopes::SpanLayer) may hold is entered: one registry lookup, where the
    /// per-layer filter (`Filtered`) would make two (its own check that the filter enabled the
    /// span, then the layer's): the layer made an [`Instance`] or [`Census`] of the span only if
    /// its filter enabled it. The filter's own hook runs first, as `Filtered` runs it, where it
    /// has anything to do (the selection's `[name]` directives follow the spans entered). Not
    /// inlined: `Layered` folds `SpanLayer`'s check in, and the check alone keeps an unselected
    /// span's hook small (decision 63).
    #[inline(never)]
    pub(in crate::span_scopes) fn entered<S>(&self, id: &Id, ctx: Context<'_, S>, selection: &SpanSelection)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(i) = RECENT.try_with(|r| r.get(self, id)).ok().flatten() {
            if selection.follows_spans() {
                Filter::<S>::on_enter(selection, id, ctx);
            }
            // SAFETY: `Recent::get`'s terms: the span is open, and its caller holds it for this
            // hook, so its extensions keep the instance alive.
            return unsafe { i.as_ref() }.enter(id);
        }
        let Some(span) = ctx.span(id) else { return };
        let ext = span.extensions();
        if let Some(i) = ext.get::<Arc<Instance>>() {
            if selection.follows_spans() {
                Filter::<S>::on_enter(selection, id, ctx.clone());
            }
            i.enter(id);
            let _ = RECENT.try_with(|r| r.remember(self, id, i));
        } else if ext.get::<Census>().is_some() {
            Filter::<S>::on_enter(selection, id, ctx.clone());
            enter_found(id, &ext);
        }
    }

    /// Its exit, as [`SpanScopes::entered`].
    #[inline(never)]
    pub(in crate::span_scopes) fn exited<S>(&self, id: &Id, ctx: Context<'_, S>, selection: &SpanSelection)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(i) = RECENT.try_with(|r| r.get(self, id)).ok().flatten() {
            if selection.follows_spans() {
                Filter::<S>::on_exit(selection, id, ctx);
            }
            // SAFETY: `Recent::get`'s terms: the span is open, and its caller holds it for this
            // hook, so its extensions keep the instance alive.
            return unsafe { i.as_ref() }.exit(id);
        }
        let Some(span) = ctx.span(id) else { return };
        let ext = span.extensions();
        if let Some(i) = ext.get::<Arc<Instance>>() {
            if selection.follows_spans() {
                Filter::<S>::on_exit(selection, id, ctx.clone());
            }
            i.exit(id);
            let _ = RECENT.try_with(|r| r.remember(self, id, i));
        } else if ext.get::<Census>().is_some() {
            Filter::<S>::on_exit(selection, id, ctx.clone());
            exit_found(id, &ext);
        }
    }
}

/// The span's fields, as record attribute values.
struct Fields<'a>(&'a mut Vec<(&'static str, Value)>);

impl Fields<'_> {
    fn put(&mut self, field: &Field, v: Value) {
        let name = field.name();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = v,
            None => self.0.push((name, v)),
        }
    }
}

impl Visit for Fields<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::I64(i64::try_from(value).unwrap_or(i64::MAX)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::Str(value.to_owned().into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.put(field, Value::Str(format!("{value:?}").into()));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanScopes {
    fn on_layer(&mut self, _subscriber: &mut S) {
        crate::collector::collector().selected.layer_added.store(true, Ordering::Relaxed);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // Counted whatever happens next: `SpanLayer` passes its hooks on while it lives.
        self.live.opened(id);
        // GPUSPAN=off: a selected span is nothing.
        if !crate::switch::is_on() {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        // Taken out first: the extensions' lock is not held across the `if` below.
        let mark = span.extensions_mut().remove::<Unselected>();
        if let Some(mark) = mark {
            if matches!(mark, Unselected::Ignored) {
                return;
            }
            let parent = span.scope().skip(1).find_map(|s| s.extensions().get::<Census>().map(|c| c.life.clone()));
            let life = Life::with_work(attrs.metadata().name(), parent, SpanWork::default());
            span.extensions_mut().insert(Census { life, logged: AtomicBool::new(false) });
            return;
        }
        // A backend that must (CUDA) runs before the program's first launch under a selected span.
        crate::backends::span_selected();
        let mut fields = Vec::new();
        attrs.record(&mut Fields(&mut fields));
        let site = site_of(attrs.metadata());
        // The nearest selected span it was made in: an outer span of the same chain, for the rule.
        let parent = span.scope().skip(1).find_map(|s| s.extensions().get::<Arc<Instance>>().map(|i| i.life.clone()));
        let work = SpanWork::default();
        let life = Life::with_work(attrs.metadata().name(), parent, work.clone());
        span.extensions_mut().insert(Arc::new(Instance {
            site,
            life,
            opened: OnceLock::new(),
            fields: Mutex::new(fields),
            work,
        }));
    }

    fn on_record(&self, id: &Id, values: &Values<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let ext = span.extensions();
        if let Some(i) = ext.get::<Arc<Instance>>() {
            values.record(&mut Fields(&mut lock(&i.fields)));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            enter_found(id, &span.extensions());
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            exit_found(id, &span.extensions());
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.live.closed(&id);
        let Some(span) = ctx.span(&id) else { return };
        if let Some(c) = span.extensions().get::<Census>() {
            c.life.close();
            return;
        }
        let opened = span.extensions().get::<Arc<Instance>>().is_some_and(|i| i.is_open());
        if !opened {
            return;
        }
        // Not under the extensions' borrow below: the chain keeps its node in them.
        let chain = crate::spans::of_span(&id, &span.metadata().callsite());
        let scope = span.extensions().get::<Arc<Instance>>().and_then(|i| i.close());
        if let Some(mut scope) = scope {
            scope.set_chain(chain);
            drop(scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Sink;
    use crate::record::Record;
    use crate::span_scopes::{layer, layer_with};
    use tracing_subscriber::layer::SubscriberExt;

    /// The records of span sites named `names`, from every thread.
    #[derive(Debug)]
    struct Spans(Mutex<Vec<Record>>, &'static [&'static str]);

    impl Sink for Spans {
        fn accept(&self, r: &Record) {
            if r.site.is_span() && self.1.contains(&r.site.desc.name) {
                lock(&self.0).push(r.clone());
            }
        }
        fn wants_all(&self) -> bool {
            true
        }
    }

    fn collect(names: &'static [&'static str], run: impl FnOnce(&tracing::Dispatch)) -> Vec<Record> {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer_with("span_app=info")));
        collect_in(&dispatch, names, run)
    }

    fn collect_in(
        dispatch: &tracing::Dispatch,
        names: &'static [&'static str],
        run: impl FnOnce(&tracing::Dispatch),
    ) -> Vec<Record> {
        let sink = Arc::new(Spans(Mutex::new(Vec::new()), names));
        let dyn_sink: Arc<dyn Sink> = sink.clone();
        crate::collector::add_sink(dyn_sink.clone());
        tracing::dispatcher::with_default(dispatch, || run(dispatch));
        crate::flush();
        crate::collector::remove_sink(&dyn_sink);
        let out = lock(&sink.0).clone();
        out
    }

    fn attr(r: &Record, key: &str) -> Option<Value> {
        r.attributes().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    #[test]
    fn the_selection_takes_spans_by_directive_never_gpuspans_own_nor_events() {
        let records = collect(&["sel_picked", "sel_other", "sel_own"], |_| {
            tracing::info_span!(target: "span_app", "sel_picked", id = 7u64, label = "x").in_scope(|| {
                tracing::info!(target: "span_app", "an event is no scope");
            });
            tracing::info_span!(target: "span_elsewhere", "sel_other").in_scope(|| {});
            tracing::debug_span!(target: "span_app", "sel_picked").in_scope(|| {});
            tracing::info_span!(target: "gpuspan::kernel::wgpu", "sel_own").in_scope(|| {});
        });
        assert_eq!(records.len(), 1, "{records:?}");
        let r = &records[0];
        assert_eq!(r.site.desc.name, "sel_picked");
        assert_eq!(attr(r, "gpuspan.kind"), Some(Value::Str("span".into())));
        assert_eq!(attr(r, "id"), Some(Value::I64(7)));
        assert_eq!(attr(r, "label"), Some(Value::Str("x".into())));
        // gpuspan's own target is never selected, even by a bare level.
        let own = collect(&["sel_own_bare"], |_| {
            let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer_with("info")));
            tracing::dispatcher::with_default(&d, || {
                tracing::info_span!(target: "gpuspan::kernel::cuda", "sel_own_bare").in_scope(|| {});
            });
        });
        assert!(own.is_empty(), "{own:?}");
    }

    #[test]
    fn a_span_entered_on_two_threads_at_once_and_again_later_is_one_record_over_its_life() {
        let records = collect(&["two_threads"], |dispatch| {
            let span = tracing::info_span!(target: "span_app", "two_threads");
            let (a, b) = (span.clone(), span.clone());
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let threads: Vec<_> = [a, b]
                .into_iter()
                .map(|s| {
                    let (d, barrier) = (dispatch.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        tracing::dispatcher::with_default(&d, || {
                            s.in_scope(|| {
                                barrier.wait();
                                std::thread::sleep(Duration::from_millis(2));
                            })
                        })
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            span.in_scope(|| std::thread::sleep(Duration::from_millis(2)));
            drop(span);
        });
        assert_eq!(records.len(), 1, "one record per span instance: {records:?}");
        assert!(records[0].host.duration_ns() >= 4_000_000, "first entry to close: {:?}", records[0].host);
    }

    /// The only test that sets `init`'s selection (no other unit test calls `init`).
    #[test]
    fn layer_follows_the_selection_init_was_given_even_when_built_before() {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer()));
        // One callsite, asked again when the selection changes.
        let run = |_: &tracing::Dispatch| tracing::info_span!(target: "span_init_app", "init_picked").in_scope(|| {});
        select_from_init(Some("span_init_app=info"));
        assert!(init_selects());
        assert_eq!(collect_in(&dispatch, &["init_picked"], run).len(), 1);
        select_from_init(None);
        assert!(!init_selects());
        assert!(collect_in(&dispatch, &["init_picked"], run).is_empty(), "init selected nothing this time");
    }

    /// `[name]` as docs/spans.md says: the span of that name, and the spans inside it.
    #[test]
    fn a_span_name_directive_selects_that_span_and_those_inside_it() {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer_with("[by_name_req]")));
        let records = collect_in(&dispatch, &["by_name_req", "by_name_inner", "by_name_outside"], |_| {
            tracing::info_span!(target: "anywhere", "by_name_req").in_scope(|| {
                tracing::info_span!(target: "anywhere", "by_name_inner").in_scope(|| {});
            });
            tracing::info_span!(target: "anywhere", "by_name_outside").in_scope(|| {});
        });
        let mut names: Vec<_> = records.iter().map(|r| r.site.desc.name).collect();
        names.sort();
        assert_eq!(names, ["by_name_inner", "by_name_req"]);
    }

    /// Beside a layer that keeps every span alive, unselected spans are skipped by the live-span
    /// count (`live.rs`), and what the count must not skip still arrives: a selected span's
    /// entries and close, the `[name]` directive's entries that select the spans inside it, and
    /// a selected span made after many unselected ones came and went.
    #[test]
    fn beside_another_layer_the_selection_is_the_same_and_unselected_spans_are_not_held() {
        struct Everything;
        impl<S: Subscriber> Layer<S> for Everything {}
        let dispatch = tracing::Dispatch::new(
            tracing_subscriber::registry().with(Everything).with(layer_with("[beside_req],beside_app=info")),
        );
        let names = &["beside_req", "beside_inner", "beside_outside", "beside_app_span", "beside_unselected"];
        let records = collect_in(&dispatch, names, |_| {
            for _ in 0..100 {
                tracing::info_span!(target: "beside_elsewhere", "beside_unselected").in_scope(|| {});
            }
            tracing::info_span!(target: "anywhere", "beside_req").in_scope(|| {
                tracing::info_span!(target: "anywhere", "beside_inner").in_scope(|| {});
            });
            tracing::info_span!(target: "anywhere", "beside_outside").in_scope(|| {});
            let app = tracing::info_span!(target: "beside_app", "beside_app_span");
            app.in_scope(|| {});
            app.in_scope(|| {});
        });
        let mut names: Vec<_> = records.iter().map(|r| r.site.desc.name).collect();
        names.sort();
        assert_eq!(names, ["beside_app_span", "beside_inner", "beside_req"]);
        let layer = dispatch.downcast_ref::<crate::span_scopes::SpanScopes>().expect("the layer's part is found");
        // Every selected span closed: no bucket holds one, so no id takes the lookup.
        assert!((1..=4096u64).all(|i| !layer.live.may_hold(&Id::from_u64(i))));
    }

    #[test]
    fn a_selection_without_the_layer_is_said_and_a_layer_in_any_subscriber_counts() {
        assert!(layer_missing(false, true));
        assert!(!layer_missing(true, true), "the layer was added");
        assert!(!layer_missing(false, false), "nothing selected: nothing to say");
        let _ = tracing_subscriber::registry().with(layer());
        assert!(crate::collector::collector().selected.layer_added.load(Ordering::Relaxed));
    }

    /// Other tests may run the census at the same time (it is the process's): assertions hold
    /// whatever their spans add.
    #[test]
    fn unowned_work_names_the_unselected_span_entered_at_its_launch_once_the_census_runs() {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer_with("[census_only_this]")));
        let records = collect_in(&dispatch, &["census_step", "census_fwd"], |_| {
            // The first unowned work starts the census; spans made from then on are followed.
            let _ = unselected_at(crate::clock::now_ns());
            assert!(census_on());
            tracing::info_span!(target: "census_app", "census_step").in_scope(|| {
                tracing::info_span!(target: "census_app", "census_fwd").in_scope(|| {
                    let named = unselected_at(crate::clock::now_ns()).expect("a span is entered");
                    assert!(named.contains("census_fwd"), "the innermost: {named}");
                    assert!(!named.contains("census_step"), "its ancestor is no answer: {named}");
                });
                let named = unselected_at(crate::clock::now_ns()).expect("the step is still entered");
                assert!(named.contains("census_step"), "{named}");
            });
        });
        assert!(records.is_empty(), "the census makes no span a scope: {records:?}");
        say_unselected_spans();
        let notes = crate::diagnostics::notes();
        assert!(
            notes.iter().any(|n| n.contains("census_fwd (1)") && n.contains("[census_fwd]")),
            "the summary says what to select: {notes:?}"
        );
    }

    #[test]
    fn directives_that_do_not_parse_select_nothing() {
        assert!(parse(Some("span_app=notalevel")).is_none());
        assert!(parse(Some("  ")).is_none() && parse(None).is_none());
        assert!(parse(Some("span_app=info,[request]")).is_some());
    }

    use std::time::Duration;
}
