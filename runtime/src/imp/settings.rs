//! The run's settings, resolved once (decision 70): what `init` was given, or, in a program that
//! never calls it, what the environment says ([`Config::settings_from_env`], read at the first
//! use: the run-time switch's first reading, `set_enabled`, a wgpu device's registration, or the
//! span layer's first question). One `Once` in the collector decides which comes first; the
//! collector's parts then hold the values (`sampling::Settings`, the span selection) and nothing
//! reads the environment again. An `init` after that first use still applies what its `Config`
//! sets.

use crate::collector::{collector, Collector};
use crate::config::{Config, Settings};

/// `init` gives its settings: the first resolution when nothing came before it, else each value
/// it sets replaces the one in force. Its span selection is given to the layer by `init` itself
/// (after the run-time switch is known to be on).
pub(crate) fn given(settings: &Settings) {
    give(collector(), settings);
}

/// A use before (or without) `init`: the environment's settings, read once for the process;
/// nothing when `init` or an earlier use resolved them.
pub(crate) fn from_env_once() {
    if let Some(settings) = resolve_once(collector(), Config::settings_from_env) {
        crate::span_scopes::select_unless_given(settings.spans.as_deref());
    }
}

fn give(c: &Collector, settings: &Settings) {
    c.settled.call_once(|| {});
    c.sampling.settle(settings.threshold_us, settings.trace_all, &c.sinks);
}

/// `read`'s settings, when `c`'s were not resolved yet (`read` is then called, once).
fn resolve_once(c: &Collector, read: impl FnOnce() -> Settings) -> Option<Settings> {
    let mut resolved = None;
    c.settled.call_once(|| {
        let settings = read();
        c.sampling.settle(settings.threshold_us, settings.trace_all, &c.sinks);
        resolved = Some(settings);
    });
    resolved
}

#[cfg(test)]
mod tests {
    use super::{give, resolve_once};
    use crate::collector::Collector;
    use crate::config::Settings;

    fn env_says(threshold_us: u64) -> Settings {
        Settings { threshold_us: Some(threshold_us), trace_all: Some(false), spans: None }
    }

    /// Without `init` the environment is read at the first use and never again; an `init` after
    /// it applies what its `Config` sets and keeps the rest.
    #[test]
    fn the_environment_is_read_once_at_the_first_use_and_init_overrides_only_what_it_sets() {
        let c = Collector::new();
        let mut reads = 0;
        assert!(resolve_once(&c, || {
            reads += 1;
            env_says(7)
        })
        .is_some());
        assert!(resolve_once(&c, || {
            reads += 1;
            env_says(9)
        })
        .is_none());
        assert_eq!(reads, 1, "the environment is read once");
        assert_eq!(c.sampling.in_force(), (7, false));
        give(&c, &Settings { trace_all: Some(true), ..Settings::default() });
        assert_eq!(c.sampling.in_force(), (7, true), "init's trace-all, the first use's threshold");
    }

    /// After `init` the environment is not read: what `init` was given (defaults where it set
    /// nothing) is in force, and the floor is made from it.
    #[test]
    fn after_init_the_environment_is_never_read() {
        let c = Collector::new();
        give(&c, &Settings { threshold_us: Some(50), ..Settings::default() });
        assert!(resolve_once(&c, || panic!("read after init")).is_none());
        assert_eq!(c.sampling.in_force(), (50, false));
        assert!(c.sampling.below_floor(0), "the floor is made from init's threshold");
    }
}
