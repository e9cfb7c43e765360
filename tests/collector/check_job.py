#!/usr/bin/env python3
"""Checks the trace a multi-GPU job sent to the collector (scripts/gpu-otlp run).

    check_job.py SPANS_JSONL WORLD_SIZE TRACE_ID PARENT_SPAN_ID

What the collector must hold (record.py's JSON lines): one trace, the given one; the launcher's
span `multi_gpu_launch`, a child of the given parent; one `multi_gpu` span per rank under it,
with the rank on its resource; no span whose parent the collector never received; GPU spans
timed by CUPTI, each under its host span, each within a rank (GPU work outside every annotated
call, `unattributed`, hangs under the launcher's span with its rank on its resource). Prints what it found; exits 1
when a check fails. Plain Python 3, no packages: the GPU machine runs it.
"""

import collections
import json
import sys


def main(path, world, trace, parent):
    spans = [json.loads(line) for line in open(path) if line.strip()]
    failed = []

    def check(ok, what):
        if not ok:
            failed.append(what)

    by_id = {s["span_id"]: s for s in spans}
    check(spans, "the collector received spans")
    check(all(s["trace_id"] == trace for s in spans), "every span is in the given trace")
    jobs = [s for s in spans if s["name"] == "multi_gpu_launch"]
    check(len(jobs) == 1, f"one launcher span (found {len(jobs)})")
    job = jobs[0]["span_id"] if jobs else None
    if jobs:
        check(jobs[0]["parent_span_id"] == parent, "the launcher's span is a child of TRACEPARENT")
    ranks = {s["span_id"]: s for s in spans if s["name"] == "multi_gpu" and s["parent_span_id"] == job}
    seen = sorted(s["resource"].get("job.rank") for s in ranks.values())
    check(seen == list(range(world)), f"one rank span per rank under the launcher's (ranks {seen})")
    orphans = [s["name"] for s in spans if s["parent_span_id"] and s["parent_span_id"] not in by_id
               and s["parent_span_id"] != parent]
    check(not orphans, f"no span without its parent (orphans: {orphans[:5]})")

    def rank_of(s):
        """The rank a span is in: the rank span above it, or, for GPU work outside every
        annotated call (`unattributed`, made on gpuspan's thread, under no application span),
        its process's resource, as it hangs under the launcher's span directly."""
        first = s
        while s is not None:
            if s["span_id"] in ranks:
                return s["resource"].get("job.rank")
            if s["parent_span_id"] == job and s["name"] == "unattributed":
                return first["resource"].get("job.rank")
            s = by_id.get(s["parent_span_id"])
        return None

    gpu = [s for s in spans if s["attributes"].get("gpuspan.role") == "gpu"]
    cupti = [s for s in gpu if s["attributes"].get("gpu.timing.source") == "cupti"]
    check(cupti, f"GPU spans timed by CUPTI ({len(gpu)} GPU spans, {len(cupti)} by CUPTI)")
    for s in gpu:
        host = by_id.get(s["parent_span_id"])
        check(host is not None and host["attributes"].get("gpuspan.role") == "host",
              f"{s['name']} hangs under its host span")
        check(rank_of(s) is not None, f"{s['name']} is inside a rank")

    per = collections.defaultdict(list)
    for s in gpu:
        per[(rank_of(s), s["name"], s["attributes"].get("gpu.timing.source"))].append(
            (s["end_ns"] - s["start_ns"]) / 1000)
    print(f"{len(spans)} spans in trace {trace}: launcher {job}, ranks {seen}")
    for (rank, name, source), us in sorted(per.items(), key=lambda kv: (kv[0][0] is None, kv[0])):
        print(f"  rank {rank}: {name}: {len(us)} spans ({source}), {min(us):.1f}-{max(us):.1f} us")
    for f in failed:
        print(f"CHECK FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
