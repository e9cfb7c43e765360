//! The devices' busy time and the GPU's idle time, by what the launching thread was doing
//! ([`crate::idle`]).

use super::{Report, Units};
use crate::idle;
use crate::table::Table;

impl Report {
    pub fn devices_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header =
            vec!["device".into(), u.head("window", "ns"), u.head("busy", "ns"), u.head("idle", "ns"), "busy %".into()];
        for d in &self.devices {
            t.row(vec![
                d.device.clone(),
                u.ns(d.window_ns),
                u.ns(d.busy_ns),
                u.ns(d.idle_ns),
                format!("{:.1}", d.busy_percent),
            ]);
        }
        t
    }

    pub fn idle_table(&self, u: Units) -> Table {
        let mut t = Table::new(&[]);
        t.header = vec![
            "device".into(),
            "launching thread".into(),
            "host was in".into(),
            u.head("idle", "ns"),
            "% of idle".into(),
            "gaps".into(),
        ];
        for d in &self.devices {
            for s in &d.shares {
                t.row(vec![
                    d.device.clone(),
                    s.thread.clone(),
                    s.holder().to_owned(),
                    u.ns(s.idle_ns),
                    format!("{:.1}", idle::percent(s.idle_ns, d.idle_ns)),
                    s.gaps.to_string(),
                ]);
            }
        }
        t
    }
}
