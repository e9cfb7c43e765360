"""Host cost of launching a tiny CUDA kernel through PyTorch, without and with torch.profiler
(CUDA activities), in one process: the comparison for docs/benchmarks.md. Runs on the GPU
machine (PyTorch is installed there): python3 scripts/torch_overhead.py [launches]"""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
x = torch.zeros(1, device="cuda")


def batch():
    t = time.perf_counter_ns()
    for _ in range(n):
        x.add_(1.0)  # one tiny kernel per call
    per = (time.perf_counter_ns() - t) / n
    torch.cuda.synchronize()
    return per


batch()
bare = statistics.median(batch() for _ in range(5))
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    batch()
    profiled = statistics.median(batch() for _ in range(5))
print(f"torch {torch.__version__}: {bare:.0f} ns per launch bare, {profiled:.0f} ns with torch.profiler "
      f"(CUDA activities): {100 * (profiled - bare) / bare:+.1f} %")
