//! The timeline as Perfetto's native protobuf trace (`GPUSPAN_TRACE_FORMAT=perfetto`, or a
//! timeline path ending in `.pftrace`): the runtime's records put into the capture format's
//! model in memory, as the capture file would hold them, and handed to the writer that
//! `gpuspan timeline --format perfetto` uses (`gpuspan_capture::perfetto`), so that the program's
//! own timeline and the command's of a capture of the same run are drawn by one code.
//!
//! What a capture file does not carry goes beside the model: each record's attributes (its
//! fields, the device's state at the call), as its slices' arguments, and the leaves' counter
//! tracks (an instrumented wgpu device's memory). The application spans a call was made in are
//! not kept by the timeline (only the capture file asks for them), so the native timeline, like
//! the JSON one, names none.

use super::capture_file::Sampling;
use super::capture_frames as frames;
use crate::hooks::CounterTrack;
use crate::record::Record;
use gpuspan_capture as cap;
use gpuspan_capture::perfetto::{Format, Source};
use serde_json::{Map, Value as Json};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::sync::Arc;

/// Writes `records` (their threads named by `name`, then the `counters`) as one process of a
/// native Perfetto trace labelled `label`.
pub(super) fn write(
    records: &[Record],
    counters: &[CounterTrack],
    name: impl Fn(u32) -> String,
    label: &str,
    sampling: Sampling,
    out: impl Write,
) -> io::Result<()> {
    let capture = capture(records, name, sampling)?;
    let args: Vec<Map<String, Json>> = records
        .iter()
        .map(|r| r.attributes().into_iter().map(|(k, v)| (k.to_owned(), super::timeline::to_json(&v))).collect())
        .collect();
    let source = Source { label, capture: &capture, counters, args: &args };
    gpuspan_capture::perfetto::write_sources(Format::Perfetto, &[source], out)
}

/// The records as a capture: its header, the sites, threads and devices they name, and the
/// records in the format's terms.
fn capture(records: &[Record], name: impl Fn(u32) -> String, sampling: Sampling) -> io::Result<cap::Capture> {
    let mut c = cap::Capture::new(frames::header(sampling.threshold_us, sampling.trace_all));
    let mut sites = frames::SiteIds::<()>::new();
    let mut devices: HashMap<(u32, Arc<str>), u32> = HashMap::new();
    let mut threads = BTreeMap::new();
    for r in records {
        let site = sites.id(
            r.site,
            || (),
            |f| {
                if let cap::Frame::Site(s) = f {
                    c.sites.push(s.clone());
                }
                Ok(())
            },
        )?;
        // Thread 0 (GPU work outside every call) is no thread's: its track stays unnamed, as in
        // the JSON.
        if r.thread != 0 {
            threads.entry(r.thread).or_insert_with(|| name(r.thread));
        }
        let record = frames::record(r, site, None, |d| {
            let next = u32::try_from(devices.len()).unwrap_or(u32::MAX);
            let key = *devices.entry((d.id, d.name.clone())).or_insert_with(|| {
                c.devices.push(cap::Device { key: next, id: d.id, name: d.name.to_string() });
                next
            });
            Ok(key)
        })?;
        c.records.push(record);
    }
    c.threads = threads.into_iter().map(|(index, name)| cap::Thread { index, name }).collect();
    Ok(c)
}
