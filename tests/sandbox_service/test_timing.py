"""timing.time_cuda's protocols, shown by the order of its CUDA calls (stubbed: no GPU needed): KernelBench's
synchronised runs by default, or synchronised runs with a lead spin between the synchronisation and each start
event."""

from __future__ import annotations

import types

import pytest
import torch

from sandbox_service import timing


@pytest.fixture
def cuda_calls(monkeypatch) -> list[str]:
    calls: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool = False):
            pass

        def record(self, *args):
            calls.append("event")

        def elapsed_time(self, other) -> float:
            return 0.05

    fake_torch = types.SimpleNamespace(
        empty=lambda n, dtype=None, device=None: torch.empty(n, dtype=dtype), int32=torch.int32, no_grad=torch.no_grad,
        cuda=types.SimpleNamespace(synchronize=lambda *a: calls.append("sync"), Event=Event, current_device=lambda: 0,
                                   _sleep=lambda cycles: calls.append(f"lead {cycles}")))
    monkeypatch.setattr(timing, "torch", fake_torch)
    monkeypatch.setattr(timing, "l2_flush_bytes", lambda device=None: 1024)
    monkeypatch.setattr(timing, "launch_lead_cycles", lambda device, lead_us: int(lead_us * 1000))
    return calls


def _timed_calls(calls: list[str], **kwargs) -> list[str]:
    stats = timing.time_cuda(lambda: calls.append("call"), warmup=2, runs=3, method=timing.CUDA_EVENTS,
                             before_run=lambda i: calls.append("inputs"), **kwargs)
    assert stats.runs == 3 and stats.median_us == pytest.approx(50.0)
    return calls


def test_by_default_each_run_waits_for_the_gpu_before_its_start_event(cuda_calls):
    calls = _timed_calls(cuda_calls)
    timed = calls[calls.index("sync") + 1:]  # after the warm-up's synchronisation
    assert timed == ["inputs", "sync", "event", "call", "event"] * 3 + ["sync"]


def test_a_lead_spins_the_gpu_between_the_synchronisation_and_each_start_event(cuda_calls):
    calls = _timed_calls(cuda_calls, lead_us=250.0)
    timed = calls[calls.index("sync") + 1:]
    assert timed == ["inputs", "sync", "lead 250000", "event", "call", "event"] * 3 + ["sync"]


def test_a_zero_lead_is_the_synchronised_protocol(cuda_calls):
    calls = _timed_calls(cuda_calls, lead_us=0.0)
    timed = calls[calls.index("sync") + 1:]
    assert timed == ["inputs", "sync", "event", "call", "event"] * 3 + ["sync"]


def test_device_sync_timing_still_waits_around_every_run(cuda_calls):
    timing.time_cuda(lambda: cuda_calls.append("call"), warmup=1, runs=2, method=timing.DEVICE_SYNC)
    timed = cuda_calls[cuda_calls.index("sync") + 1:]
    assert timed == ["sync", "call", "sync"] * 2 + ["sync"]
