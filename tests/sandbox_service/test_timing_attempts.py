"""The outside floor with the server's coarse clock: a batch the clock saw as slow is timed again and the floor
takes the lower clock, while the executor's figure stays the first batch's; a forged executor figure meets the
floor on every batch."""

from __future__ import annotations

import contextlib
import types

import pytest

from sandbox_service.evaluation import OUTSIDE_FLOOR, TIMING_CHECKS, _Evaluation
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status, TimingStats

CALLS_S = 100e-6  # the batch's own cost per call (what the empty batch measures)


def _evaluate(executor_us: float, outside_us: list[float]) -> tuple[EvalResult, int]:
    """`_Evaluation._time` with stand-ins: the executor reports `executor_us` every batch; the server's clock
    sees `outside_us[k]` per call more than the empty batch in batch k. Returns the result and the batches."""
    options = EvalOptions(timing_runs=100, warmup_runs=3)
    calls = options.warmup_runs + options.timing_runs
    batches = []
    lane = types.SimpleNamespace(
        empty_batch_s={}, gate=types.SimpleNamespace(exclusive=contextlib.nullcontext),
        freezer=types.SimpleNamespace(others_frozen=lambda keep=None: contextlib.nullcontext()))
    evaluation = types.SimpleNamespace(
        lane=lane, options=options, child=None, result=EvalResult(Status.INFRA_ERROR), seen={},
        problem=types.SimpleNamespace(key="task"), timing_checks=TIMING_CHECKS,
        judge=types.SimpleNamespace(prepared={"output_bytes": 1 << 20}, time_reference=lambda method, fresh_inputs:
                                    TimingStats(400.0, 400.0, 0.0, 400.0, 400.0, 100)))

    def timed_order(order, answer, messages, deadline, job):
        if order["type"] == "calibrate":
            return calls * CALLS_S
        evaluation.seen["timing"] = {"candidate": TimingStats(executor_us, executor_us, 0.0, executor_us,
                                                              executor_us, 100).__dict__}
        batches.append(order)
        return calls * (CALLS_S + outside_us[len(batches) - 1] * 1e-6)

    evaluation._timed_order = timed_order
    evaluation._timing_check = lambda messages, deadline, check, seed, sample_seed: None
    evaluation._timed_attempt = lambda messages, deadline, job: _Evaluation._timed_attempt(
        evaluation, messages, deadline, job)
    _Evaluation._time(evaluation, None, types.SimpleNamespace(extend=lambda s: None), {})
    return evaluation.result, len(batches)


def test_a_quiet_batch_is_timed_once_and_the_executor_s_figure_used():
    result, batches = _evaluate(200.0, [210.0])
    assert batches == 1 and result.candidate_time_us == pytest.approx(200.0)


def test_a_batch_the_clock_saw_as_slow_is_timed_again_and_the_lower_clock_sets_the_floor():
    result, batches = _evaluate(200.0, [700.0, 220.0])  # an honest kernel, one noisy batch
    assert batches == 2 and result.candidate_time_us == pytest.approx(200.0)
    assert result.speedup == pytest.approx(2.0)


def test_a_forged_figure_meets_the_floor_on_every_batch():
    result, batches = _evaluate(1.0, [200.0, 180.0])  # the executor claims 1 us; the clock sees 180-200 us
    assert batches == 2 and result.candidate_time_us == pytest.approx(OUTSIDE_FLOOR * 180.0, rel=0.01)


def test_no_more_than_two_batches():
    result, batches = _evaluate(1.0, [200.0, 200.0, 200.0])
    assert batches == 2
