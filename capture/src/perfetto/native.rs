//! The timeline as Perfetto's native protobuf trace: a `Trace` of `TracePacket`s, one track
//! descriptor per process, host thread, device call track, stream and lane, and per counter;
//! each slice a begin and an end `TrackEvent` with its arguments as debug annotations; flows
//! from a call to its GPU work by flow ids; event names, categories, argument names and string
//! argument values interned once per trace (one packet sequence): a file path or device name
//! repeated on every slice is written once. Timestamps are the captures' own nanoseconds, exact.
//!
//! Track names are known only after a process's slices (lanes are placed as slices come), so
//! the events are encoded into memory and written after the descriptors, at the end.

use super::proto::{self, TracePacket};
use super::{Flow, Sink, Slice, GPU_TID};
use prost::Message;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::io::{self, Write};

/// The one packet sequence of the trace (interned strings are per sequence).
const SEQUENCE: u32 = 1;

/// Writes a timeline in Perfetto's protobuf format; see the module's doc.
#[derive(Debug)]
pub struct Native<W: Write> {
    out: W,
    /// Encoded `Trace.packet` fields: track descriptors, then the events.
    descriptors: Vec<u8>,
    events: Vec<u8>,
    next_uuid: u64,
    processes: HashMap<u64, u64>,
    /// (process, track id) -> (uuid, named yet).
    tracks: HashMap<(u64, u64), (u64, bool)>,
    counters: HashMap<(u64, String), u64>,
    names: Interner,
    categories: Interner,
    annotation_names: Interner,
    string_values: Interner,
    /// Flows started and not yet ended, by key, and the next flow id.
    flows: HashMap<(u64, u64), u64>,
    next_flow: u64,
    /// No event packet written yet: the next one clears the sequence's incremental state.
    first_event: bool,
}

/// Strings given ids in order of first use; the ones new since the last packet go into it.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<String, u64>,
    fresh: Vec<(u64, String)>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.ids.len() as u64 + 1;
        self.ids.insert(s.to_owned(), id);
        self.fresh.push((id, s.to_owned()));
        id
    }

    /// The strings new since the last call, as names (`EventName`, `EventCategory`,
    /// `DebugAnnotationName`).
    fn take_names(&mut self) -> Vec<proto::Interned> {
        self.fresh.drain(..).map(|(id, s)| proto::Interned { iid: Some(id), name: Some(s) }).collect()
    }

    /// The strings new since the last call, as `InternedString`s.
    fn take_strings(&mut self) -> Vec<proto::InternedString> {
        self.fresh.drain(..).map(|(id, s)| proto::InternedString { iid: Some(id), str: Some(s.into_bytes()) }).collect()
    }
}

/// Appends `packet` to `buf` as a `Trace.packet` field (number 1, length-delimited).
fn put(buf: &mut Vec<u8>, packet: &TracePacket) {
    buf.push(0x0a);
    packet.encode_length_delimited(buf).expect("a Vec grows as needed");
}

impl<W: Write> Native<W> {
    pub fn new(out: W) -> Native<W> {
        Native {
            out,
            descriptors: Vec::new(),
            events: Vec::new(),
            next_uuid: 1,
            processes: HashMap::new(),
            tracks: HashMap::new(),
            counters: HashMap::new(),
            names: Interner::default(),
            categories: Interner::default(),
            annotation_names: Interner::default(),
            string_values: Interner::default(),
            flows: HashMap::new(),
            next_flow: 1,
            first_event: true,
        }
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid - 1
    }

    fn process_uuid(&mut self, pid: u64) -> u64 {
        if let Some(&u) = self.processes.get(&pid) {
            return u;
        }
        let u = self.uuid();
        self.processes.insert(pid, u);
        u
    }

    fn track_uuid(&mut self, pid: u64, tid: u64) -> u64 {
        if let Some(&(u, _)) = self.tracks.get(&(pid, tid)) {
            return u;
        }
        let u = self.uuid();
        self.tracks.insert((pid, tid), (u, false));
        u
    }

    /// A track's descriptor: a host thread's as the thread of its process, any other track
    /// (device calls, streams, spans, lanes) as a named track under its process.
    fn describe_track(&mut self, pid: u64, tid: u64, uuid: u64, name: Option<&str>) {
        let mut d = proto::TrackDescriptor { uuid: Some(uuid), name: name.map(str::to_owned), ..Default::default() };
        if tid < GPU_TID {
            d.thread = Some(proto::ThreadDescriptor {
                pid: Some(pid as i32),
                tid: Some(tid as i64),
                thread_name: name.map(str::to_owned),
            });
        } else {
            d.parent_uuid = Some(self.process_uuid(pid));
        }
        put(&mut self.descriptors, &TracePacket { track_descriptor: Some(d), ..Default::default() });
    }

    /// An event packet on the sequence, with the strings interned since the last one.
    fn event(&mut self, timestamp: u64, event: proto::TrackEvent) {
        let fresh = proto::InternedData {
            event_categories: self.categories.take_names(),
            event_names: self.names.take_names(),
            debug_annotation_names: self.annotation_names.take_names(),
            debug_annotation_string_values: self.string_values.take_strings(),
        };
        let interned = (fresh != proto::InternedData::default()).then_some(fresh);
        let flags = if std::mem::take(&mut self.first_event) {
            proto::SEQ_INCREMENTAL_STATE_CLEARED
        } else {
            proto::SEQ_NEEDS_INCREMENTAL_STATE
        };
        let packet = TracePacket {
            timestamp: Some(timestamp),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(event),
            interned_data: interned,
            sequence_flags: Some(flags),
            ..Default::default()
        };
        put(&mut self.events, &packet);
    }

    /// A slice's arguments as debug annotations (null values left out): `args`, then those of
    /// `extra` that `args` does not name.
    fn annotations(&mut self, args: &Value, extra: &Map<String, Value>) -> Vec<proto::DebugAnnotation> {
        let Value::Object(map) = args else { return Vec::new() };
        let extra = extra.iter().filter(|(k, _)| !map.contains_key(k.as_str()));
        map.iter()
            .chain(extra)
            .filter_map(|(k, v)| {
                let mut a = self.annotation(v)?;
                a.name_iid = Some(self.annotation_names.id(k));
                Some(a)
            })
            .collect()
    }

    /// A JSON value as a debug annotation's value: numbers as unsigned, signed or double as
    /// they are, strings interned, arrays element by element; null and objects (never written)
    /// give none.
    fn annotation(&mut self, v: &Value) -> Option<proto::DebugAnnotation> {
        let mut a = proto::DebugAnnotation::default();
        match v {
            Value::Bool(b) => a.bool_value = Some(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    a.uint_value = Some(u);
                } else if let Some(i) = n.as_i64() {
                    a.int_value = Some(i);
                } else {
                    a.double_value = n.as_f64();
                }
            }
            Value::String(s) => a.string_value_iid = Some(self.string_values.id(s)),
            Value::Array(items) => a.array_values = items.iter().filter_map(|v| self.annotation(v)).collect(),
            Value::Null | Value::Object(_) => return None,
        }
        Some(a)
    }
}

impl<W: Write> Sink for Native<W> {
    fn start(&mut self, _base: u64) -> io::Result<()> {
        Ok(())
    }

    fn process(&mut self, pid: u64, name: &str, labels: &str) -> io::Result<()> {
        let uuid = self.process_uuid(pid);
        let d = proto::TrackDescriptor {
            uuid: Some(uuid),
            process: Some(proto::ProcessDescriptor {
                pid: Some(pid as i32),
                process_name: Some(name.to_owned()),
                process_labels: vec![labels.to_owned()],
            }),
            ..Default::default()
        };
        put(&mut self.descriptors, &TracePacket { track_descriptor: Some(d), ..Default::default() });
        Ok(())
    }

    fn slice(&mut self, s: Slice<'_>) -> io::Result<()> {
        let track = self.track_uuid(s.pid, s.tid);
        let (mut flow_ids, mut terminating_flow_ids) = (Vec::new(), Vec::new());
        match s.flow {
            Flow::None => {}
            Flow::Start(key) => {
                flow_ids.push(self.next_flow);
                self.flows.insert(key, self.next_flow);
                self.next_flow += 1;
            }
            Flow::End(key) => terminating_flow_ids.extend(self.flows.remove(&key)),
        }
        let begin = proto::TrackEvent {
            r#type: Some(proto::TYPE_SLICE_BEGIN),
            track_uuid: Some(track),
            name_iid: Some(self.names.id(s.name)),
            category_iids: vec![self.categories.id(s.category)],
            debug_annotations: self.annotations(&s.args, s.extra),
            flow_ids,
            terminating_flow_ids,
            ..Default::default()
        };
        self.event(s.start_ns, begin);
        let end =
            proto::TrackEvent { r#type: Some(proto::TYPE_SLICE_END), track_uuid: Some(track), ..Default::default() };
        self.event(s.end_ns.max(s.start_ns), end);
        Ok(())
    }

    fn track_name(&mut self, pid: u64, tid: u64, name: &str) -> io::Result<()> {
        let uuid = self.track_uuid(pid, tid);
        self.tracks.insert((pid, tid), (uuid, true));
        self.describe_track(pid, tid, uuid, Some(name));
        Ok(())
    }

    fn counter(&mut self, pid: u64, name: &str, unit: &str, time_ns: u64, value: Number) -> io::Result<()> {
        let key = (pid, name.to_owned());
        let track = match self.counters.get(&key) {
            Some(&u) => u,
            None => {
                let u = self.uuid();
                self.counters.insert(key, u);
                let d = proto::TrackDescriptor {
                    uuid: Some(u),
                    parent_uuid: Some(self.process_uuid(pid)),
                    name: Some(name.to_owned()),
                    counter: Some(proto::CounterDescriptor { unit_name: Some(unit.to_owned()) }),
                    ..Default::default()
                };
                put(&mut self.descriptors, &TracePacket { track_descriptor: Some(d), ..Default::default() });
                u
            }
        };
        let mut event =
            proto::TrackEvent { r#type: Some(proto::TYPE_COUNTER), track_uuid: Some(track), ..Default::default() };
        match value.as_i64() {
            Some(i) => event.counter_value = Some(i),
            None => event.double_counter_value = value.as_f64(),
        }
        self.event(time_ns, event);
        Ok(())
    }

    fn finish(&mut self, _sources: Vec<Value>) -> io::Result<()> {
        // A track that got slices but no name (a thread the capture does not name) still needs
        // its descriptor.
        let mut unnamed: Vec<(u64, u64, u64)> =
            self.tracks.iter().filter(|(_, &(_, named))| !named).map(|(&(p, t), &(u, _))| (p, t, u)).collect();
        unnamed.sort_unstable();
        for (pid, tid, uuid) in unnamed {
            self.describe_track(pid, tid, uuid, None);
        }
        self.out.write_all(&self.descriptors)?;
        self.out.write_all(&self.events)?;
        self.out.flush()
    }
}
