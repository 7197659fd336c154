"""Layer 5, timing on CUDA: warm-up, L2 flush before every run, median over many runs.

Both the reference and the candidate are timed here, by the same function in the same process, while
the evaluation holds its GPU alone. Two methods:
- cuda_events: events recorded on the current stream around the call (KernelBench's method);
- device_sync: a host clock around the call followed by a device-wide synchronize, which counts work
  on every stream. It is used whenever the candidate launched kernels on any stream other than the
  current one, so that side-stream work cannot escape the timer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from sandbox_service.results import TimingStats

# What is written before every run to empty the L2 cache: twice the GPU's L2 (an H100's 50 MB: 100 MB, about
# 35 us a run; a fixed 256 MB cost about 85 us, 9 ms of every RL-sized timed batch), at least this much.
MIN_L2_FLUSH_BYTES = 8 * 1024 * 1024


def l2_flush_bytes(device: torch.device | None = None) -> int:
    size = getattr(torch.cuda.get_device_properties(device or torch.cuda.current_device()), "L2_cache_size", 0)
    return max(MIN_L2_FLUSH_BYTES, 2 * int(size or 128 * 1024 * 1024))


CUDA_EVENTS = "cuda_events"
DEVICE_SYNC = "device_sync"


def summarize(times_ms: list[float], method: str) -> TimingStats:
    us = [t * 1000.0 for t in times_ms]
    return TimingStats(
        median_us=statistics.median(us),
        mean_us=statistics.fmean(us),
        std_us=statistics.pstdev(us) if len(us) > 1 else 0.0,
        min_us=min(us),
        max_us=max(us),
        runs=len(us),
        method=method,
    )


def time_cuda(fn: Callable[[], object], *, warmup: int, runs: int, method: str,
              before_run: Callable[[int], object] | None = None) -> TimingStats:
    """Time `fn()` on the current CUDA device; `fn` must be a complete forward call. `before_run(i)`, when
    given, runs before the warm-up (with i = 0) and before each timed run i, outside what is timed (fresh
    inputs for every run)."""
    flush = torch.empty(l2_flush_bytes() // 4, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        if before_run is not None:
            before_run(0)
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        times_ms: list[float] = []
        for i in range(runs):
            if before_run is not None:
                before_run(i)
            flush.zero_()
            torch.cuda.synchronize()
            if method == CUDA_EVENTS:
                starts[i].record()
                fn()
                ends[i].record()
            else:
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                times_ms.append((time.perf_counter() - t0) * 1000.0)
        torch.cuda.synchronize()
    if method == CUDA_EVENTS:
        times_ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    del flush
    return summarize(times_ms, method)
