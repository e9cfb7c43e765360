#!/usr/bin/env python3
"""An independent timing of a 64 MiB copy between two GPUs, to hold gpuspan's peer-copy figures
against (docs/multi-gpu.md). Run on a machine with two GPUs and PyTorch:

    python3 scripts/p2p-reference.py [MiB]

For each direction it prints three timings of `dst.copy_(src)` (PyTorch's `cudaMemcpyAsync` on
unified addresses, peer access on): CUDA events on the current stream around 20 copies, host
time of one synchronised copy, and what Kineto (CUPTI, through torch.profiler) records for the
copy: its activity name and GPU duration. No gpuspan code is involved.
"""

import sys
import time

import torch


def main(mib):
    n = mib * (1 << 20) // 4
    if torch.cuda.device_count() < 2:
        print(f"p2p-reference: {torch.cuda.device_count()} GPU(s), need 2")
        return 1
    print(f"p2p-reference: torch {torch.__version__}, {torch.cuda.get_device_name(0)} x2, "
          f"peer access 0->1 {torch.cuda.can_device_access_peer(0, 1)}, 1->0 {torch.cuda.can_device_access_peer(1, 0)}")
    for src_dev, dst_dev in [(0, 1), (1, 0)]:
        src = torch.arange(n, dtype=torch.float32, device=f"cuda:{src_dev}")
        dst = torch.empty(n, dtype=torch.float32, device=f"cuda:{dst_dev}")
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize(src_dev)
        torch.cuda.synchronize(dst_dev)
        with torch.cuda.device(src_dev):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                dst.copy_(src)
            end.record()
            end.synchronize()
            events_us = start.elapsed_time(end) * 1000 / 20
        torch.cuda.synchronize(dst_dev)
        t = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(src_dev)
        torch.cuda.synchronize(dst_dev)
        host_us = (time.perf_counter() - t) * 1e6
        ok = bool(torch.equal(dst.cpu(), src.cpu()))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            dst.copy_(src)
            torch.cuda.synchronize(src_dev)
            torch.cuda.synchronize(dst_dev)
        kineto = [(e.name, e.device_index, round(e.device_time, 1)) for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA]
        nbytes = n * 4
        print(f"copy {src_dev} -> {dst_dev}: {nbytes} B; events {events_us:.1f} us/copy "
              f"({nbytes / events_us / 1e3:.1f} GB/s); one copy host-timed {host_us:.1f} us "
              f"({nbytes / host_us / 1e3:.1f} GB/s); data equal {ok}; Kineto (CUPTI): {kineto}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 64))
