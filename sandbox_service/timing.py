"""Layer 5, timing on CUDA: warm-up, L2 flush before every run, median over many runs.

Both the reference and the candidate are timed here, by the same function, while the evaluation holds its GPU
alone. Two methods:
- cuda_events: events recorded on the current stream around the call, the device synchronised before each run
  (KernelBench's protocol: the host's launch latency is timed too). `lead_us` queues the runs instead, with no
  synchronisation between them, and gives the GPU a spin of that length before each start event, so that the
  call's kernels are queued when the GPU reaches it: the figure is then the GPU's work alone (benchmarks/
  RESULTS.md, the timing protocols: the same kernel's figure moved 1% between batches instead of 10%, and for
  RL-sized kernels it was a third of the synchronised one). Not the default: the server checks the executor's
  figure against its own clock around the batch (evaluation._time), which only measures GPU work while the
  batch is bound by the GPU, and a loaded server's host took longer per run than a 250 us lead.
- device_sync: a host clock around the call followed by a device-wide synchronize, which counts work
  on every stream. It is used whenever the candidate launched kernels on any stream other than the
  current one, so that side-stream work cannot escape the timer.
"""

from __future__ import annotations

import functools
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


_LEAD_CALIBRATION_CYCLES = 2_000_000

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
              before_run: Callable[[int], object] | None = None, lead_us: float | None = None) -> TimingStats:
    """Time `fn()` on the current CUDA device; `fn` must be a complete forward call. `before_run(i)`, when
    given, runs before the warm-up (with i = 0) and before each timed run i, outside what is timed (fresh
    inputs for every run). `lead_us` (cuda_events only): queue the runs, each after a GPU spin of that length,
    instead of synchronising before each (module docstring)."""
    flush = torch.empty(l2_flush_bytes() // 4, dtype=torch.int32, device="cuda")
    queued = method == CUDA_EVENTS and lead_us is not None
    lead_cycles = launch_lead_cycles(torch.cuda.current_device(), lead_us) if queued and lead_us > 0 else 0
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
            if lead_cycles:
                torch.cuda._sleep(lead_cycles)
            elif not queued:
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


@functools.cache
def launch_lead_cycles(device_index: int, lead_us: float) -> int:
    """GPU clock cycles that `torch.cuda._sleep` spins for about `lead_us` on this device (measured once)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(_LEAD_CALIBRATION_CYCLES // 10)  # the spin kernel's first launch outside the measurement
    start.record()
    torch.cuda._sleep(_LEAD_CALIBRATION_CYCLES)
    end.record()
    end.synchronize()
    cycles_per_us = _LEAD_CALIBRATION_CYCLES / max(start.elapsed_time(end) * 1000.0, 1e-3)
    return max(1, int(lead_us * cycles_per_us))
