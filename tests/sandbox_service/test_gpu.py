"""On a CUDA GPU (the device machine): timing, side streams, and a corrupted CUDA context.

Run there with `python -m pytest -m gpu tests/sandbox_service/test_gpu.py`.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest

from sandbox_cases import CORRECT, FIXTURES, INCORRECT, REFERENCE
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.lane import Lane
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status

pytestmark = pytest.mark.gpu
OPTIONS = EvalOptions(trials=3, timing_runs=50, timeout_s=120)


def gpu_fixture(name: str) -> str:
    return (FIXTURES / "gpu" / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def gpu_lane():
    with tempfile.TemporaryDirectory() as root:
        lane = Lane.create("cuda", 0, warm=1, work_root=Path(root))
        yield lane
        lane.close()


def test_correct_kernel_is_timed_against_the_reference(gpu_lane):
    result = evaluate(REFERENCE, CORRECT, OPTIONS, gpu_lane)
    assert result.status == Status.OK, result.error
    assert result.device and "cpu" not in result.device
    assert result.candidate_timing.runs == 50 and result.ref_timing.runs == 50
    assert result.candidate_timing.method == "cuda_events"
    assert result.speedup == pytest.approx(result.ref_time_us / result.candidate_time_us)
    assert result.candidate_time_us > 0 and result.ref_time_us > 0


def test_incorrect_kernel_is_not_timed(gpu_lane):
    result = evaluate(REFERENCE, INCORRECT, OPTIONS, gpu_lane)
    assert result.status == Status.INCORRECT and result.speedup is None


def test_device_sync_timing_counts_side_stream_work():
    import torch

    from sandbox_service import timing

    side = torch.cuda.Stream()

    def hidden_work():
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # tens of milliseconds on the side stream

    events = timing.time_cuda(hidden_work, warmup=1, runs=5, method=timing.CUDA_EVENTS)
    synced = timing.time_cuda(hidden_work, warmup=1, runs=5, method=timing.DEVICE_SYNC)
    assert synced.median_us > 20 * events.median_us
    assert synced.median_us > 1000


def test_side_stream_trick_is_caught(gpu_lane):
    # The work escapes the current stream: flagged (by the static layer first), never reported as a speedup.
    assert evaluate(REFERENCE, gpu_fixture("side_stream"), OPTIONS, gpu_lane).status == Status.CHEAT
    # Without the static screen, the runtime layer sees the kernel still running after forward returned.
    result = run_isolated(REFERENCE, gpu_fixture("side_stream"), OPTIONS, gpu_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert "unjoined-side-stream" in {v.rule for v in result.violations}


def test_corrupted_cuda_context_costs_one_result(gpu_lane):
    result = evaluate(REFERENCE, gpu_fixture("illegal_address"), dataclasses.replace(OPTIONS, timeout_s=60), gpu_lane)
    assert result.status in (Status.RUNTIME_ERROR, Status.COMPILE_ERROR), (result.status, result.error)
    assert evaluate(REFERENCE, CORRECT, OPTIONS, gpu_lane).status == Status.OK


def test_a_cache_that_skips_kernels_when_timed_is_caught(gpu_lane):
    # Fresh inputs in every trial pass correctness; the timed calls repeat one input and hit the cache.
    result = run_isolated(REFERENCE, gpu_fixture("cache_by_input_object"), OPTIONS, gpu_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert "work-skipped-when-timed" in {v.rule for v in result.violations}
