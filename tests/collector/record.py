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
    values = getattr(inner, "values", None)
    if values is not None:
        return [_any(x) for x in values]
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


def _points(data):
    """(kind, [point dict]) for any metric data type."""
    if data is None:
        return "none", []
    kind = type(data).__name__
    out = []
    for p in getattr(data, "data_points", None) or []:
        point = {"attributes": _attrs(getattr(p, "attributes", None))}
        for field in ("count", "sum", "as_int", "as_double", "value", "bucket_counts", "explicit_bounds"):
            if hasattr(p, field):
                v = getattr(p, field)
                if isinstance(v, (int, float, str, bool)) or v is None:
                    point[field] = v
                else:
                    try:
                        point[field] = list(v)
                    except TypeError:
                        point[field] = repr(v)
        out.append(point)
    return kind, out


def process_metrics(resource_metrics):
    try:
        resource = _attrs(resource_metrics.resource.attributes if resource_metrics.resource else [])
        lines = []
        for scope_metrics in resource_metrics.scope_metrics:
            scope = scope_metrics.scope.name if scope_metrics.scope else ""
            for m in scope_metrics.metrics:
                data = m.data
                inner = getattr(data, "value", data) if data is not None else None
                kind, points = _points(inner)
                for p in points or [{}]:
                    lines.append({"resource": resource, "scope": scope, "name": m.name, "unit": m.unit, "type": kind, **p})
        _append("metrics.jsonl", lines)
    except Exception as exc:
        _error("process_metrics", exc)
