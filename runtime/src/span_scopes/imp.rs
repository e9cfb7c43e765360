//! What only the instrumented build of [`layer`](super::layer) has: the selection as `init` set
//! it, the spans the layer holds, their lives by time, and what the backends ask of them; and
//! the layer's two parts' constructors.

pub(super) mod live;
mod open_spans;
mod recent;
pub(super) mod selected;
mod slot;
mod stretches;

#[cfg(feature = "cuda")]
pub(crate) use {
    open_spans::ByTime,
    selected::{by_time, unselected_at},
};
#[cfg(feature = "_wgpu")]
pub(crate) use {
    open_spans::WorkByTime,
    selected::{named_at, start_census, work_by_time_now},
};
pub(crate) use {
    selected::{init_selects, say_if_layer_missing, say_unselected_spans, select_from_init, select_unless_given},
    slot::Selected,
};

impl super::SpanScopes {
    /// A layer's part holding no span yet.
    pub(super) fn new() -> Self {
        super::SpanScopes { live: live::LiveSpans::new() }
    }
}

impl super::SpanSelection {
    /// `directives` as the selection, or `init`'s (`None`).
    pub(super) fn new(directives: Option<&str>) -> Self {
        super::SpanSelection { inner: selected::Selection::new(directives) }
    }
}
