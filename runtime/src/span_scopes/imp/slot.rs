//! The span selection's slot in the collector: what the layer reads and `init` writes, kept
//! apart from the layer's machinery (`selected.rs`) so that the collector, which owns it, names
//! nothing above it.

use super::open_spans::OpenSpans;
use crate::site::Site;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use tracing::callsite::Identifier;
use tracing_subscriber::filter::EnvFilter;

/// The selection `init` made and the sites of selected spans; owned by the
/// [`Collector`](crate::collector::Collector).
#[derive(Debug)]
pub(crate) struct Selected {
    /// The selection of [`layer`](crate::span_scopes::layer): `None` until `init` or the first question sets it.
    pub(super) from_init: RwLock<Option<Option<Arc<EnvFilter>>>>,
    /// One site per span callsite, made the first time a span of it is selected.
    pub(super) sites: Mutex<Option<HashMap<Identifier, &'static Site>>>,
    /// When each selected span instance was entered, for attribution by time.
    pub(super) open_spans: OpenSpans,
    /// A [`layer`](crate::span_scopes::layer) was put in a subscriber (`tracing` cannot list a
    /// subscriber's layers: the layer says so when it is added).
    pub(super) layer_added: AtomicBool,
    /// The census of unselected spans (`selected::unselected_at`): on from the first GPU work
    /// that no scope owned, and the lives of the spans it saw entered.
    pub(super) census_on: AtomicBool,
    pub(super) census: OpenSpans,
    /// How many records of unowned work were launched while each unselected span was entered.
    pub(super) census_named: Mutex<BTreeMap<Arc<str>, u64>>,
}

impl Selected {
    pub(crate) const fn new() -> Self {
        Selected {
            from_init: RwLock::new(None),
            sites: Mutex::new(None),
            open_spans: OpenSpans::new(),
            layer_added: AtomicBool::new(false),
            census_on: AtomicBool::new(false),
            census: OpenSpans::census(),
            census_named: Mutex::new(BTreeMap::new()),
        }
    }
}
