//! The seams through which the leaves add to what the core makes, without the core knowing
//! them: one trait for the device monitor ([`Devices`]) and the lists of what the backends
//! register ([`Registered`]: summary sections such as their clock lines, and wgpu's counter
//! tracks and memory). All are held by the [`Collector`](crate::collector::Collector)'s
//! [`Leaves`]; `init.rs` (or the monitor's own start) plugs the monitor in, a backend registers
//! through `leaves()`, the core asks whatever is there.

pub(crate) mod state;
pub(crate) use state::*;

/// The process's leaves: where a backend registers what it adds (`leaves().sections.add(..)`),
/// the monitor plugs itself in, and the sinks ask what the leaves add.
pub(crate) fn leaves() -> &'static Leaves {
    &crate::collector::collector().leaves
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
        c.leaves.sections.add(section);
        c.leaves.sections.add(section); // registering again adds nothing twice
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
