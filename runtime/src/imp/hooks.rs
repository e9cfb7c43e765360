//! The seams through which the leaves add to what the core makes, without the core knowing
//! them: one trait for the device monitor ([`Devices`]) and a list of summary sections (the
//! backends' clock lines). Both are held by the [`Collector`](crate::collector::Collector)'s
//! [`Leaves`]; `init.rs` (or the monitor's own start) plugs the monitor in, the core asks
//! whatever is there.

pub(crate) mod state;
pub(crate) use state::*;

/// Registers a section of the summary.
#[cfg(feature = "_gpu")]
pub(crate) fn add_summary_section(f: SummarySection) {
    crate::collector::collector().leaves.add_summary_section(f);
}

#[cfg(feature = "_wgpu")]
pub(crate) use memory::{add_counter_track, add_memory_accounts, add_memory_source};

/// What only wgpu registers: it is the one backend that counts memory itself.
#[cfg(feature = "_wgpu")]
mod memory {
    use super::{AccountSource, CounterSource, MemorySource};

    /// Registers a counter track source for the timeline.
    pub(crate) fn add_counter_track(f: CounterSource) {
        crate::collector::collector().leaves.add_counter_track(f);
    }

    /// Registers a backend's own count of device memory, for `track_memory`.
    pub(crate) fn add_memory_source(f: MemorySource) {
        crate::collector::collector().leaves.add_memory_source(f);
    }

    /// Registers a backend's memory accounts, for the capture file and the OTLP export.
    pub(crate) fn add_memory_accounts(f: AccountSource) {
        crate::collector::collector().leaves.add_memory_accounts(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::Collector;
    use crate::export::summary::SiteSummary;
    use crate::pipeline::Sink;
    use crate::record::Interval;
    use crate::record::{Record, Value};
    use crate::site::{Backend, Site, SiteDesc, SiteKind};
    use std::sync::Arc;
    use std::sync::Mutex;

    static SITE: Site =
        Site::new(SiteDesc { trace_all: true, ..crate::site::site_desc!("hooked", SiteKind::Kernel, Backend::Host) });

    /// A device monitor that knows one device state and one summary line.
    struct Stub;
    impl Devices for Stub {
        fn record_attributes(&self, _: &Record) -> Vec<(&'static str, Value)> {
            vec![("test.device_state", Value::Str("hot".into()))]
        }
        fn summary_section(&self, reached: &[SiteSummary]) -> Vec<String> {
            vec![format!("hooked section ({} sites)", reached.len())]
        }
        fn memory_used(&self) -> Option<u64> {
            Some(7)
        }
        fn live_devices(&self) -> Result<Vec<gpuspan_capture::live::Device>, String> {
            Err("stub".into())
        }
        fn readings(&self, _: u64) -> Vec<Readings> {
            Vec::new()
        }
    }

    fn section(_: &[SiteSummary]) -> Vec<String> {
        vec!["clock section".to_owned()]
    }

    #[derive(Debug, Default)]
    struct Keep(Mutex<Vec<Record>>);

    impl Sink for Keep {
        fn accept(&self, record: &Record) {
            self.0.lock().unwrap().push(record.clone());
        }
    }

    #[test]
    fn what_a_leaf_adds_reaches_every_sink_and_the_summary() {
        let c = Collector::new();
        *c.leaves.devices.write().unwrap() = Some(Arc::new(Stub));
        c.leaves.add_summary_section(section);
        c.leaves.add_summary_section(section); // registering again adds nothing twice
        let keep = Arc::new(Keep::default());
        c.add_sink(keep.clone());
        c.submit(Record::new(&SITE, 1, 0, Interval { start_ns: 1, end_ns: 2 }));

        let records = keep.0.lock().unwrap().clone();
        assert_eq!(records.len(), 1, "a private collector sees only its own records");
        let added: Vec<_> = records[0].attributes().into_iter().filter(|(k, _)| *k == "test.device_state").collect();
        assert_eq!(added, [("test.device_state", Value::Str("hot".into()))]);
        assert_eq!(c.leaves.summary_sections(&[]), ["hooked section (0 sites)", "clock section"]);
        assert_eq!(c.leaves.devices().and_then(|d| d.memory_used()), Some(7));
        assert!(Collector::new().leaves.summary_sections(&[]).is_empty(), "nothing plugged into another");
    }
}
