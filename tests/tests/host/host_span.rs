//! The host span as a `tracing` subscriber sees it: name, target, level, the fields asked for
//! (and no others), and `error` recorded on a failing call only.

use rusty_fork::rusty_fork_test;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, Clone)]
struct Seen {
    name: &'static str,
    target: &'static str,
    level: Level,
    /// Every field the span declares, with the values recorded (at creation or later).
    fields: BTreeMap<String, Option<String>>,
    closed: bool,
}

/// Keeps every span it sees, by id.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(u64, Seen)>>>);

struct Values<'a>(&'a mut BTreeMap<String, Option<String>>);

impl Visit for Values<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), Some(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Some(value.to_owned()));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let mut fields: BTreeMap<String, Option<String>> =
            meta.fields().iter().map(|f| (f.name().to_owned(), None)).collect();
        attrs.record(&mut Values(&mut fields));
        let seen = Seen { name: meta.name(), target: meta.target(), level: *meta.level(), fields, closed: false };
        self.0.lock().unwrap().push((id.into_u64(), seen));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, s)) = spans.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            values.record(&mut Values(&mut s.fields));
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, s)) = spans.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            s.closed = true;
        }
    }
}

#[gpuspan::gpu_kernel(name = "load.checked", level = "warn", fields(n, stage = "load"), skip(unrecorded))]
fn checked(n: u32, unrecorded: &str, by_default: u8) -> Result<u32, String> {
    if n > 2 {
        return Err(format!("{n} is too big for {unrecorded} ({by_default})"));
    }
    Ok(n * 2)
}

rusty_fork_test! {
    #[test]
    fn a_failing_call_marks_its_host_span_with_error_and_the_fields_asked_for() {
        let spans = Spans::default();
        let subscriber = tracing_subscriber::registry().with(spans.clone());
        tracing::subscriber::with_default(subscriber, || {
            assert_eq!(checked(1, "x", 7), Ok(2));
            assert!(checked(3, "y", 7).is_err());
        });
        let seen: Vec<Seen> = spans.0.lock().unwrap().iter().map(|(_, s)| s.clone()).collect();
        let ours: Vec<&Seen> = seen.iter().filter(|s| s.name == "load.checked").collect();
        assert_eq!(ours.len(), 2, "one host span per call: {seen:?}");
        for (s, (n, error)) in ours.iter().zip([("1", None), ("3", Some("true"))]) {
            assert_eq!(s.level, Level::WARN, "the attribute's level");
            assert_eq!(s.target, module_path!(), "the user's module is the target, as with #[instrument]");
            assert_eq!(s.fields.get("n"), Some(&Some(n.to_owned())), "{s:?}");
            assert_eq!(s.fields.get("stage"), Some(&Some("load".to_owned())), "{s:?}");
            assert_eq!(s.fields.get("error"), Some(&error.map(str::to_owned)), "`error` only when the call failed: {s:?}");
            assert!(!s.fields.contains_key("unrecorded"), "skipped parameters are not recorded: {s:?}");
            assert_eq!(s.fields.get("by_default"), Some(&Some("7".to_owned())), "the others are, as tracing does: {s:?}");
            assert!(s.closed, "the span closes with the call");
        }
    }
}

/// Counts the enters, exits and closes of the spans named `name`.
#[derive(Clone, Default)]
struct Lifecycle(Arc<Mutex<(u64, u64, u64)>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Lifecycle {
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if ctx.span(id).is_some_and(|s| s.name() == "short_upload") {
            self.0.lock().unwrap().0 += 1;
        }
    }
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if ctx.span(id).is_some_and(|s| s.name() == "short_upload") {
            self.0.lock().unwrap().1 += 1;
        }
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if ctx.span(&id).is_some_and(|s| s.name() == "short_upload") {
            self.0.lock().unwrap().2 += 1;
        }
    }
}

#[gpuspan::gpu_transfer(direction = cpu_to_gpu)]
fn short_upload(data: &[u8]) -> usize {
    data.len()
}

rusty_fork_test! {
    #[test]
    fn short_calls_under_a_subscriber_close_their_spans_and_are_all_counted() {
        // Past the per-thread ring's 512 entries, so that full rings are counted on the way.
        const CALLS: u64 = 1_500;
        let lifecycle = Lifecycle::default();
        let subscriber = tracing_subscriber::registry().with(lifecycle.clone());
        let data = [7u8; 24];
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("outer").entered();
            for _ in 0..CALLS {
                assert_eq!(short_upload(&data), 24);
            }
            assert_eq!(tracing::Span::current().metadata().map(|m| m.name()), Some("outer"), "every host span was exited");
            drop(outer);
        });
        assert_eq!(*lifecycle.0.lock().unwrap(), (CALLS, CALLS, CALLS), "entered, exited and closed once per call");
        let summary = gpuspan::summary();
        let row = summary.reached.iter().find(|r| r.site.desc.name == "short_upload").expect("the site's row");
        assert_eq!((row.calls, row.errors, row.bytes), (CALLS, 0, CALLS * 24), "every call counted, with its size");
        assert!(row.min_ns <= row.p50_ns && row.p50_ns <= row.max_ns && row.max_ns <= row.total_ns);
        assert_eq!(row.total_ns, row.host_total_ns, "host-timed: the duration is the host time");
    }
}
