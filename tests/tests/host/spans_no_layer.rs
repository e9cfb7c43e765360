//! Spans selected (`GPUSPAN_SPANS`, `Config::spans`) with no `gpuspan::layer()` in the
//! subscriber (issue 37): nothing can be measured, and the program is told so in one line, at
//! `init` when its subscriber was set before, else in the summary. Each case in a process of its
//! own (the global subscriber and `init`).

use rusty_fork::rusty_fork_test;

const MISSING: &str = "no `gpuspan::layer()` is in the subscriber";

fn said(notes: &[String]) -> usize {
    notes.iter().filter(|n| n.contains(MISSING)).count()
}

rusty_fork_test! {
    #[test]
    fn a_subscriber_set_before_init_without_the_layer_is_said_at_init_once() {
        tracing::subscriber::set_global_default(tracing_subscriber::registry()).expect("the only subscriber");
        let _guard = gpuspan::Config::from_env().summary(false).spans("[step]").init();
        assert_eq!(said(&gpuspan::summary().notes), 1, "{:?}", gpuspan::summary().notes);
        tracing::info_span!("step").in_scope(|| {});
        assert_eq!(said(&gpuspan::summary().notes), 1, "once");
    }
}

rusty_fork_test! {
    #[test]
    fn a_subscriber_set_after_init_without_the_layer_is_said_in_the_summary() {
        let _guard = gpuspan::Config::from_env().summary(false).spans("[step]").init();
        tracing::subscriber::set_global_default(tracing_subscriber::registry()).expect("the only subscriber");
        tracing::info_span!("step").in_scope(|| {});
        assert_eq!(said(&gpuspan::summary().notes), 1, "{:?}", gpuspan::summary().notes);
    }
}

rusty_fork_test! {
    #[test]
    fn with_the_layer_nothing_is_said() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(gpuspan::layer());
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        let _guard = gpuspan::Config::from_env().summary(false).spans("[step]").init();
        tracing::info_span!("step").in_scope(|| {});
        assert_eq!(said(&gpuspan::summary().notes), 0, "{:?}", gpuspan::summary().notes);
    }
}

rusty_fork_test! {
    #[test]
    fn without_a_selection_a_missing_layer_is_nobodys_business() {
        tracing::subscriber::set_global_default(tracing_subscriber::registry()).expect("the only subscriber");
        let _guard = gpuspan::Config::from_env().summary(false).init();
        assert_eq!(said(&gpuspan::summary().notes), 0, "{:?}", gpuspan::summary().notes);
    }
}
