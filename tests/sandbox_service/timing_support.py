"""Timing driven with stand-ins, without a GPU: `time_on_the_cpu` makes timing.time_cuda's calls in its order;
`time_with` drives `_Evaluation._time` with no executor and no judge, each timed batch reporting a given executor
figure, and the server's clock a given time per call beyond the empty batch's."""

from __future__ import annotations

import contextlib
import os
import types

from sandbox_service.evaluation import EXPECTED_TIMING_CHECKS, _Evaluation
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status, TimingStats


def stand_in_judge(reference, output_bytes: int = 1 << 20) -> types.SimpleNamespace:
    """What `_Evaluation._timed_attempt` uses of its JudgeLink: the task's output size, its service (none), and the
    reference's figure, `reference(method, fresh_inputs)`, measured whenever it is asked for."""
    return types.SimpleNamespace(
        prepared={"output_bytes": output_bytes}, service=None,
        reference_due=lambda method, fresh_inputs=False: True,
        time_reference=lambda method, fresh_inputs=False, due=None: reference(method, fresh_inputs))


def time_on_the_cpu(fn, *, warmup, runs, method, before_run=None, lead_us=None):
    """timing.time_cuda's calls in its order, without CUDA."""
    from sandbox_service import timing

    before_run(0)
    for _ in range(warmup):
        fn()
    for i in range(runs):
        before_run(i)
        fn()
    return timing.summarize([1.0] * runs, method)


CALLS_S = 100e-6  # the batch's own cost per call (what the empty batch measures)
REFERENCE_US = 400.0


def stand_in_lane() -> types.SimpleNamespace:
    """What `_Evaluation._time` uses of a lane: the empty batches' cache and the GPU held alone."""
    return types.SimpleNamespace(empty_batch_s={}, backend="cuda",
                                 gpu_alone=lambda keep=None, judge=None, drain=False: contextlib.nullcontext())


def time_with(batches: list[tuple[float, float]], empty_extra_us: list[float] | None = None,
              lane: types.SimpleNamespace | None = None) -> tuple[EvalResult, int]:
    """Batch k's executor figure is batches[k][0] us, and the server's clock sees batches[k][1] us per call more
    than the empty batch. `empty_extra_us[j]`: what the j-th empty batch took per call beyond CALLS_S (0: none; a
    first batch pays first-time costs). `lane`: shared between calls (stand_in_lane; default a new one). Returns
    the evaluation's result and how many batches were timed."""
    options = EvalOptions(timing_runs=100, warmup_runs=3)
    calls = options.warmup_runs + options.timing_runs
    timed, calibrated = [], []
    lane = lane if lane is not None else stand_in_lane()
    reference = TimingStats(REFERENCE_US, REFERENCE_US, 0.0, REFERENCE_US, REFERENCE_US, 100)
    evaluation = types.SimpleNamespace(
        lane=lane, options=options, child=types.SimpleNamespace(pid=os.getpid()), result=EvalResult(Status.INFRA_ERROR), seen={},
        problem=types.SimpleNamespace(key="task"), timing_checks=EXPECTED_TIMING_CHECKS, remeasure_empty=False,
        judge=stand_in_judge(lambda method, fresh_inputs: reference))

    def timed_order(order, answer, messages, deadline, job):
        if order["type"] == "calibrate":
            calibrated.append(order)
            extra = (empty_extra_us or [])[len(calibrated) - 1:len(calibrated)] or [0.0]
            return calls * (CALLS_S + extra[0] * 1e-6)
        executor_us, outside_us = batches[len(timed)]
        timed.append(order)
        evaluation.seen["timing"] = {"candidate": TimingStats(executor_us, executor_us, 0.0, executor_us,
                                                              executor_us, 100).__dict__}
        return calls * (CALLS_S + outside_us * 1e-6)

    evaluation._timed_order = timed_order
    evaluation._check_outputs = lambda messages, deadline, checks: iter(())  # no hand-overs: no checks
    evaluation._timed_attempt = lambda messages, deadline, job: _Evaluation._timed_attempt(
        evaluation, messages, deadline, job)
    _Evaluation._time(evaluation, None, types.SimpleNamespace(extend=lambda s: None), {})
    return evaluation.result, len(timed)
