//! The run's settings, resolved once (decision 70): what `init` was given, or, in a program that
//! never calls it, what the environment says ([`Config::settings_from_env`], read at the first
//! use: the run-time switch's first reading, `set_enabled`, a wgpu device's registration, or the
//! span layer's first question). One `Once` in the collector decides which comes first; the
//! collector's parts then hold the values (`sampling::Settings`, the span selection) and nothing
//! reads the environment again. An `init` after that first use still applies what its `Config`
//! sets.

use crate::collector::collector;
use crate::config::{Config, Settings};

/// `init` gives its settings: the first resolution when nothing came before it, else each value
/// it sets replaces the one in force. Its span selection is given to the layer by `init` itself
/// (after the run-time switch is known to be on).
pub(crate) fn given(settings: &Settings) {
    let c = collector();
    c.settled.call_once(|| {});
    c.sampling.settle(settings.threshold_us, settings.trace_all, &c.sinks);
}

/// A use before (or without) `init`: the environment's settings, read once for the process;
/// nothing when `init` or an earlier use resolved them.
pub(crate) fn from_env_once() {
    let c = collector();
    c.settled.call_once(|| {
        let settings = Config::settings_from_env();
        c.sampling.settle(settings.threshold_us, settings.trace_all, &c.sinks);
        crate::span_scopes::select_unless_given(settings.spans.as_deref());
    });
}
