# A rotel processor that appends everything the collector receives to JSON-lines files, so
# that the tests can read back exactly what reached a real collector.
#
# Runs inside rotel-agent's embedded Python. Output directory: $GPUSPAN_COLLECTOR_OUT.
# spans.jsonl: one line per span; metrics.jsonl: one line per metric data point.
# The data passes through unchanged to rotel's exporter.

import json
import os
import threading

OUT = os.environ.get("GPUSPAN_COLLECTOR_OUT", ".")
_lock = threading.Lock()


def _any(v):
    """An AnyValue as plain JSON."""
    if v is None:
        return None
    inner = getattr(v, "value", v)
    if isinstance(inner, (str, bool, int, float)) or inner is None:
        return inner
    if isinstance(inner, bytes):
        return inner.hex()
    if type(inner).__name__ == "KeyValueList":
        return {kv.key: _any(kv.value) for kv in inner}
    try:  # ArrayValue: a sequence of AnyValue
        return [_any(x) for x in inner]
    except TypeError:
        return repr(inner)


def _attrs(kvs):
    return {kv.key: _any(kv.value) for kv in (kvs or [])}


def _hex(b):
    return b.hex() if isinstance(b, (bytes, bytearray)) else (b or "")


def _append(name, lines):
    if not lines:
        return
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    with _lock:
        with open(os.path.join(OUT, name), "a", encoding="utf-8") as f:
            f.write(text)


def _error(where, exc):
    with _lock:
        with open(os.path.join(OUT, "processor-errors.log"), "a", encoding="utf-8") as f:
            f.write("%s: %r\n" % (where, exc))


def process_spans(resource_spans):
    try:
        resource = _attrs(resource_spans.resource.attributes if resource_spans.resource else [])
        lines = []
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name if scope_spans.scope else ""
            for s in scope_spans.spans:
                status = s.status
                lines.append({
                    "resource": resource,
                    "scope": scope,
                    "name": s.name,
                    "trace_id": _hex(s.trace_id),
                    "span_id": _hex(s.span_id),
                    "parent_span_id": _hex(s.parent_span_id),
                    "start_ns": int(s.start_time_unix_nano),
                    "end_ns": int(s.end_time_unix_nano),
                    "kind": int(s.kind) if s.kind is not None else 0,
                    "attributes": _attrs(s.attributes),
                    "status_code": int(getattr(status, "code", 0) or 0) if status is not None else 0,
                })
        _append("spans.jsonl", lines)
    except Exception as exc:  # never break the collector's pipeline
        _error("process_spans", exc)


def _unwrap(x):
    """rotel exposes protobuf oneofs as enum objects holding their value in `_0`."""
    while x is not None and hasattr(x, "_0"):
        x = x._0
    return x


def _plain(v):
    v = _unwrap(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    try:
        return [_plain(x) for x in v]
    except TypeError:
        return repr(v)


def _points(data):
    """(kind, [point dict]) for any metric data type."""
    data = _unwrap(data)
    if data is None:
        return "none", []
    kind = type(data).__name__
    out = []
    for p in getattr(data, "data_points", None) or []:
        point = {"attributes": _attrs(getattr(p, "attributes", None))}
        for field in ("count", "sum", "value", "bucket_counts", "explicit_bounds"):
            if hasattr(p, field):
                point[field] = _plain(getattr(p, field))
        out.append(point)
    return kind, out


def process_metrics(resource_metrics):
    try:
        resource = _attrs(resource_metrics.resource.attributes if resource_metrics.resource else [])
        lines = []
        for scope_metrics in resource_metrics.scope_metrics:
            scope = scope_metrics.scope.name if scope_metrics.scope else ""
            for m in scope_metrics.metrics:
                kind, points = _points(m.data)
                for p in points or [{}]:
                    lines.append({"resource": resource, "scope": scope, "name": m.name, "unit": m.unit, "type": kind, **p})
        _append("metrics.jsonl", lines)
    except Exception as exc:
        _error("process_metrics", exc)
