"""Work starts on a shared GPU only when the device has its memory free now: it waits (cancellable, bounded)
while other processes hold the memory, and counts what the lane's running work was admitted with. Work that
would run alone starts with its minimum free once nothing more comes back (its estimate is an upper bound)."""

from __future__ import annotations

import threading
import time

import pytest

from sandbox_service.devices import DeviceMemory
from sandbox_service.worker.pool import FreeMemory, MemoryShort

GB = 10**9
TOTAL = 80 * GB


class Gpu:
    """A stand-in for NVML's reading of a GPU that other processes share: `free` is what they leave."""

    def __init__(self, free: int):
        self.free = free

    def read(self) -> DeviceMemory:
        return DeviceMemory(self.free, TOTAL)

    def later(self, seconds: float, free: int) -> None:
        threading.Timer(seconds, lambda: setattr(self, "free", free)).start()


def gate(gpu: Gpu, wait_s: float = 30.0, settle_s: float = 0.3) -> FreeMemory:
    memory = FreeMemory(gpu.read, margin=1 * GB, wait_s=wait_s)
    memory.poll_s = 0.02
    memory.settle_s = settle_s
    return memory


def test_work_that_fits_starts_at_once():
    with gate(Gpu(free=10 * GB)).admitted(4 * GB) as wait:
        assert wait.seconds < 0.5 and wait.needed == 5 * GB and wait.free == 10 * GB


def test_work_waits_until_other_processes_give_the_memory_back():
    gpu = Gpu(free=2 * GB)
    gpu.later(0.5, free=20 * GB)
    with gate(gpu).admitted(4 * GB) as wait:
        assert wait.seconds >= 0.4 and wait.free == 2 * GB
        assert "until 5.0 GB was free on the GPU (2.0 GB at first)" in wait.describe()


def test_admitted_work_counts_against_the_next_until_it_ends():
    # The first may not have allocated its memory yet: the device's reading alone would let both in.
    memory = gate(Gpu(free=10 * GB))
    first = memory.admitted(6 * GB)
    first.__enter__()
    threading.Timer(0.5, lambda: first.__exit__(None, None, None)).start()
    started = time.monotonic()
    with memory.admitted(6 * GB):
        assert time.monotonic() - started >= 0.4


def test_memory_that_stays_taken_ends_the_wait_with_what_was_free_and_needed():
    with pytest.raises(MemoryShort) as short:
        with gate(Gpu(free=2 * GB), wait_s=0.3).admitted(4 * GB):
            pass
    assert short.value.needed == 5 * GB
    assert "did not have 5.0 GB free for 0 s (2.0 GB free of 80.0 GB at last)" in str(short.value)


def test_a_cancelled_wait_stops():
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(TimeoutError, match="cancelled"):
        with gate(Gpu(free=0)).admitted(4 * GB, cancel.is_set):
            pass


def test_a_refused_allocation_larger_than_the_device_is_not_waited_for():
    started = time.monotonic()
    with pytest.raises(MemoryShort, match="the GPU has 80.0 GB in all, less than the 101.0 GB needed"):
        gate(Gpu(free=70 * GB)).wait_free(100 * GB)
    assert time.monotonic() - started < 1.0


def test_without_a_reading_nothing_waits():
    memory = FreeMemory(None, margin=1 * GB, wait_s=30.0)
    assert not memory.watching
    with memory.admitted(1000 * GB) as wait:
        assert wait.free is None


def test_work_that_would_run_alone_starts_with_its_minimum_once_nothing_more_comes_back():
    # The estimate (40 GB) is never free: the lane's own idle processes hold the rest. The minimum (20 GB) is.
    with gate(Gpu(free=30 * GB)).admitted(40 * GB, minimum=20 * GB) as wait:
        assert 0.25 <= wait.seconds < 2.0 and wait.started_with == 30 * GB
        assert "then started alone with 30.0 GB free, below the 41.0 GB it waited for" in wait.describe()


def test_work_below_its_minimum_still_waits_to_the_end():
    with pytest.raises(MemoryShort):
        with gate(Gpu(free=15 * GB), wait_s=0.8).admitted(40 * GB, minimum=20 * GB):
            pass


def test_memory_still_coming_back_is_waited_for():
    gpu = Gpu(free=25 * GB)
    for step in range(1, 6):  # more free every 0.15 s, less than the settling time apart
        gpu.later(0.15 * step, free=(25 + 3 * step) * GB)
    with gate(gpu, settle_s=0.3).admitted(40 * GB, minimum=20 * GB) as wait:
        assert wait.started_with is not None and wait.started_with >= 40 * GB - 1 and wait.seconds >= 0.75 - 0.05


def test_work_does_not_start_below_its_estimate_beside_other_admitted_work():
    memory = gate(Gpu(free=30 * GB), wait_s=0.6, settle_s=0.1)
    first = memory.admitted(5 * GB)
    first.__enter__()
    try:
        with pytest.raises(MemoryShort):
            with memory.admitted(40 * GB, minimum=20 * GB):
                pass
    finally:
        first.__exit__(None, None, None)


def test_while_work_waits_the_lane_is_asked_to_give_back_what_its_idle_processes_hold():
    # Memory the lane's own idle processes hold never comes back by itself (on an H100: idle executors' contexts
    # and the judges' caches, 33 GB); relieved, the work starts on its estimate, without the settle.
    gpu = Gpu(free=2 * GB)
    memory = gate(gpu, settle_s=60.0)
    calls = []

    def relieve():
        calls.append(memory.waiting)
        gpu.free = 20 * GB

    memory.relieve = relieve
    with memory.admitted(4 * GB, minimum=1 * GB) as wait:
        assert wait.started_with is None and wait.seconds < 5
    assert calls and calls[0] == 1 and memory.waiting == 0


def test_there_is_no_room_for_spare_processes_while_work_waits_or_what_it_was_admitted_with_is_not_free():
    gpu = Gpu(free=10 * GB)
    memory = gate(gpu)
    assert memory.has_room(1 * GB)
    with memory.admitted(8 * GB):
        assert not memory.has_room(2 * GB)  # 10 GB free: 8 owed, 1 of margin
        assert memory.has_room(1 * GB)
    seen = []
    gpu.free = 1 * GB
    memory.relieve = lambda: (seen.append(memory.has_room(0)), setattr(gpu, "free", 20 * GB))
    with memory.admitted(4 * GB):
        pass
    assert seen == [False] and memory.has_room(1 * GB)


def test_a_wait_that_fails_is_no_longer_counted_as_waiting():
    memory = gate(Gpu(free=1 * GB), wait_s=0.2)
    with pytest.raises(MemoryShort):
        with memory.admitted(4 * GB):
            pass
    assert memory.waiting == 0
