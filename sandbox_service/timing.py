"""Layer 5, timing on CUDA: warm-up, L2 flush before every run, median over many runs.

Both the reference and the candidate are timed here, by the same function, while the evaluation holds its GPU
alone. Two methods:
- cuda_events: events recorded on the current stream around the call, the device synchronised before each run
  (KernelBench's protocol: the host's launch latency is timed too, and for RL-sized kernels that is most of the
  figure and moves 1.6-1.8x between processes: benchmarks/RESULTS.md). `lead_us` keeps the synchronisation
  but gives the GPU a spin of that length after it, before the start event, so that the call's kernels are
  queued by the time the GPU reaches the start: the figure is then the GPU's work alone, as long as the host
  queues the call within the lead (a run where it did not includes the host's launch time, as the synchronised
  protocol's always does).
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
    inputs for every run). `lead_us` (cuda_events only): each run's start event after a GPU spin of that
    length (module docstring)."""
    flush = torch.empty(l2_flush_bytes() // 4, dtype=torch.int32, device="cuda")
    lead_cycles = launch_lead_cycles(torch.cuda.current_device(), lead_us) \
        if method == CUDA_EVENTS and lead_us else 0
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
            if lead_cycles:
                torch.cuda._sleep(lead_cycles)
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


def launch_lead_cycles(device_index: int, lead_us: float) -> int:
    """GPU clock cycles that `torch.cuda._sleep` spins for about `lead_us` on this device."""
    return max(1, int(lead_us * _spin_cycles_per_us(device_index)))


@functools.cache
def _spin_cycles_per_us(device_index: int) -> float:
    """How fast `torch.cuda._sleep` spins on this device (measured once per process)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(_LEAD_CALIBRATION_CYCLES // 10)  # the spin kernel's first launch outside the measurement
    start.record()
    torch.cuda._sleep(_LEAD_CALIBRATION_CYCLES)
    end.record()
    end.synchronize()
    return _LEAD_CALIBRATION_CYCLES / max(start.elapsed_time(end) * 1000.0, 1e-3)


def warm_up(device: torch.device) -> None:
    """Load the kernels a timed batch launches besides the timed call (the L2 flush's fill, the lead's spin,
    the events) and measure the spin, before any batch is timed: CUDA loads a kernel at its first launch in a
    process, a driver call that waits behind other processes' context creation, and a batch that paid for it
    read milliseconds longer on the server's clock than its task's empty batch (evaluation._time's floor)."""
    with torch.cuda.device(device):
        torch.empty(1024, dtype=torch.int32, device=device).zero_()
        _spin_cycles_per_us(device.index if device.index is not None else torch.cuda.current_device())
        torch.cuda.synchronize(device)
