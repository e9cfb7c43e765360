//! The timeline as Perfetto's native protobuf trace (`GPUSPAN_TRACE_FORMAT=perfetto`, or a
//! timeline path ending in `.pftrace`): the runtime's records put into the capture format's
//! model in memory, as the capture file would hold them, and handed to the writer that
//! `gpuspan timeline --format perfetto` uses (`gpuspan_capture::perfetto`), so that the program's
//! own timeline and the command's of a capture of the same run are drawn by one code.
//!
//! What a capture file does not carry goes beside the model: each record's attributes (its
//! fields, the device's state at the call), as its slices' arguments, and the leaves' counter
//! tracks (an instrumented wgpu device's memory). Where a device monitor ran, the readings it
//! still holds (its history ring, the newest of the run) are the model's device samples, drawn
//! as the command draws a capture's. The application spans a call was made in are not kept by
//! the timeline (only the capture file asks for them), so the native timeline, like the JSON
//! one, names none.

use super::capture_encoder as frames;
use super::capture_file::Sampling;
use crate::hooks::{CounterTrack, Readings};
use crate::record::Record;
use gpuspan_capture as cap;
use gpuspan_capture::perfetto::{Format, Source};
use serde_json::{Map, Value as Json};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::sync::Arc;

/// What the runtime holds for its timeline: the records, their threads' names, the leaves'
/// counter tracks and the device monitor's readings.
pub(super) struct Run<'a, F: Fn(u32) -> String> {
    pub records: &'a [Record],
    pub name: F,
    pub counters: &'a [CounterTrack],
    pub readings: Vec<Readings>,
    /// When the timeline started (Unix-epoch ns), for the capture's header.
    pub started_ns: u64,
}

/// Writes the run as one process of a native Perfetto trace labelled `label`.
pub(super) fn write<F: Fn(u32) -> String>(
    run: Run<'_, F>,
    label: &str,
    sampling: Sampling,
    out: impl Write,
) -> io::Result<()> {
    let (records, counters) = (run.records, run.counters);
    let capture = capture(run, sampling)?;
    let args = |i: usize| -> Map<String, Json> {
        let Some(r) = records.get(i) else { return Map::new() };
        r.attributes().into_iter().map(|(k, v)| (k.to_owned(), super::timeline::to_json(&v))).collect()
    };
    let source = Source { label, capture: &capture, counters, args: &args };
    gpuspan_capture::perfetto::write_sources(Format::Perfetto, &[source], out)
}

/// The run as a capture: its header, the sites, threads and devices the records name, the
/// records in the format's terms, and each device's readings.
fn capture<F: Fn(u32) -> String>(run: Run<'_, F>, sampling: Sampling) -> io::Result<cap::Capture> {
    let Run { records, name, readings, started_ns, .. } = run;
    let header = cap::Header { start_ns: started_ns, ..frames::header(sampling.threshold_us, sampling.trace_all) };
    let mut c = cap::Capture::new(header);
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
        // Every thread named, thread 0 (GPU work outside every call) too, as the capture file
        // names them: the command draws a capture of the run with the same track names.
        threads.entry(r.thread).or_insert_with(|| name(r.thread));
        let record = frames::record(r, site, None, |d| Ok(device_key(&mut c.devices, &mut devices, d)))?;
        c.records.push(record);
    }
    for r in readings.into_iter().filter(|r| !r.samples.is_empty()) {
        let device = device_key(&mut c.devices, &mut devices, &r.device);
        c.samples.push(cap::DeviceSamples { device, samples: r.samples });
    }
    c.threads = threads.into_iter().map(|(index, name)| cap::Thread { index, name }).collect();
    Ok(c)
}

/// The key of a device in the capture, described the first time it is named.
fn device_key(
    described: &mut Vec<cap::Device>,
    keys: &mut HashMap<(u32, Arc<str>), u32>,
    d: &crate::record::DeviceLabel,
) -> u32 {
    let next = u32::try_from(keys.len()).unwrap_or(u32::MAX);
    *keys.entry((d.id, d.name.clone())).or_insert_with(|| {
        described.push(cap::Device { key: next, id: d.id, name: d.name.to_string() });
        next
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{DeviceLabel, GpuTiming, Interval, TimingSource};
    use crate::site::{Backend, Site, SiteDesc, SiteKind};

    fn site(name: &'static str) -> &'static Site {
        Box::leak(Box::new(Site::new(SiteDesc {
            trace_all: true,
            ..crate::site::site_desc!(name, SiteKind::Kernel, Backend::Cuda)
        })))
    }

    /// The model holds each site, thread and device once; a device the monitor read is the one
    /// the records name (one key), its samples under it.
    #[test]
    fn the_run_becomes_a_capture_with_each_site_thread_and_device_once() {
        let (a, b) = (site("pf_a"), site("pf_b"));
        let gpu0 = DeviceLabel::new(0, "GPU zero");
        let record = |site, scope, thread| {
            let mut r = Record::new(site, scope, thread, Interval { start_ns: 100 * scope, end_ns: 100 * scope + 50 });
            let mut g =
                GpuTiming::new(Interval { start_ns: 100 * scope + 10, end_ns: 100 * scope + 40 }, TimingSource::Cupti);
            g.device = Some(gpu0.clone());
            r.gpu = Some(g);
            r
        };
        let records = [record(a, 1, 3), record(b, 2, 3), record(a, 3, 5), record(a, 4, 0)];
        let sample = |t| gpuspan_capture::DeviceSample { time_ns: t, power_w: Some(100.0), ..Default::default() };
        let readings = vec![
            Readings { device: gpu0.clone(), link: None, samples: vec![sample(120), sample(220)] },
            Readings { device: DeviceLabel::new(1, "GPU one"), link: None, samples: vec![] },
        ];
        let run = Run { records: &records, name: |t| format!("worker {t}"), counters: &[], readings, started_ns: 42 };
        let sampling = Sampling { threshold_us: 0, trace_all: true };
        let c = capture(run, sampling).unwrap();
        let sites: Vec<(&str, u32)> = c.sites.iter().map(|s| (s.name.as_str(), s.id)).collect();
        assert_eq!(sites, [("pf_a", 0), ("pf_b", 1)]);
        let threads: Vec<(u32, &str)> = c.threads.iter().map(|t| (t.index, t.name.as_str())).collect();
        assert_eq!(threads, [(0, "worker 0"), (3, "worker 3"), (5, "worker 5")]);
        assert_eq!(
            c.devices,
            [cap::Device { key: 0, id: 0, name: "GPU zero".into() }],
            "a device without samples is left out"
        );
        assert!(c.records.iter().all(|r| r.gpu.as_ref().and_then(|g| g.device) == Some(0)));
        assert_eq!(c.records.iter().map(|r| r.site).collect::<Vec<_>>(), [0, 1, 0, 0]);
        assert_eq!(c.samples.len(), 1);
        assert_eq!((c.samples[0].device, c.samples[0].samples.len()), (0, 2));
        assert_eq!((c.header.threshold_us, c.header.start_ns), (0, 42));
    }
}
