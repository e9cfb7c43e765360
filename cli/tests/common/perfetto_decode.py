# Decodes a native Perfetto trace with Perfetto's own compiled schema (perfetto_trace_pb2) into
# JSON, for the timeline tests (cli/tests/timeline_native.rs, tests/tests/wgpu/timeline_perfetto.rs).
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], 'rb').read())
tracks, processes = {}, {}
names, cats, anames, svalues = {}, {}, {}, {}
slices, open_, counters, flows_out, flows_in = [], {}, [], {}, {}
facts = {'packets': len(trace.packet), 'interned_names': 0, 'first_flags': None, 'sequences': set()}
for p in trace.packet:
    if p.HasField('track_descriptor'):
        d = p.track_descriptor
        if d.HasField('process'):
            processes[d.uuid] = d.process.process_name
            tracks[d.uuid] = {'name': d.process.process_name, 'process': d.uuid, 'kind': 'process', 'labels': list(d.process.process_labels)}
        elif d.HasField('thread'):
            tracks[d.uuid] = {'name': d.thread.thread_name, 'pid': d.thread.pid, 'kind': 'thread'}
        else:
            tracks[d.uuid] = {'name': d.name, 'parent': d.parent_uuid, 'kind': 'counter' if d.HasField('counter') else 'track',
                              'unit': d.counter.unit_name if d.HasField('counter') else None}
        continue
    facts['sequences'].add(p.trusted_packet_sequence_id)
    if facts['first_flags'] is None:
        facts['first_flags'] = p.sequence_flags
    for n in p.interned_data.event_names: names[n.iid] = n.name; facts['interned_names'] += 1
    for n in p.interned_data.event_categories: cats[n.iid] = n.name
    for n in p.interned_data.debug_annotation_names: anames[n.iid] = n.name
    for n in p.interned_data.debug_annotation_string_values: svalues[n.iid] = n.str.decode('utf-8')
    e = p.track_event
    if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        def value(a):
            k = a.WhichOneof('value')
            if k is None and len(a.array_values): return [value(x) for x in a.array_values]
            if k == 'string_value_iid': return svalues[a.string_value_iid]
            return getattr(a, k) if k else None
        args = {anames[a.name_iid]: value(a) for a in e.debug_annotations}
        i = len(slices)
        slices.append([e.track_uuid, names[e.name_iid], [cats[c] for c in e.category_iids], p.timestamp, None, args])
        open_.setdefault(e.track_uuid, []).append(i)
        for f in e.flow_ids: flows_out[f] = i
        for f in e.terminating_flow_ids: flows_in[f] = i
    elif e.type == pb.TrackEvent.TYPE_SLICE_END:
        slices[open_[e.track_uuid].pop()][4] = p.timestamp
    elif e.type == pb.TrackEvent.TYPE_COUNTER:
        v = e.double_counter_value if e.HasField('double_counter_value') else e.counter_value
        counters.append([e.track_uuid, p.timestamp, v])
def process_of(uuid):
    t = tracks[uuid]
    if t['kind'] == 'thread':
        return next(n for u, n in processes.items() if tracks[u]['kind'] == 'process' and pid_of[u] == t['pid'])
    return processes[t['parent']]
pid_of = {}
for u, t in tracks.items():
    if t['kind'] == 'process':
        pid_of[u] = None
for p in trace.packet:
    if p.HasField('track_descriptor') and p.track_descriptor.HasField('process'):
        pid_of[p.track_descriptor.uuid] = p.track_descriptor.process.pid
facts['sequences'] = sorted(facts['sequences'])
print(json.dumps({
    'slices': [[process_of(t), tracks[t]['name'], n, c, s, e, a] for t, n, c, s, e, a in slices],
    'flows': sorted([flows_out[f], flows_in[f]] for f in flows_out if f in flows_in),
    'unmatched_flows': len(set(flows_out) ^ set(flows_in)),
    'counters': [[process_of(t), tracks[t]['name'], tracks[t]['unit'], s, v] for t, s, v in counters],
    'process_labels': {tracks[u]['name']: tracks[u]['labels'] for u in processes},
    'facts': facts,
}))
