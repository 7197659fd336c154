"""Red team 13: the lane's reference figure (bea9f79: `Lane.reference_times`, `JudgeLink.time_reference`,
`REFERENCE_REFRESH`, the judge's `remeasure`) and clients' `timing_runs` (705937e: jaxrl's `sandbox.timing_runs`,
from 1 to 10,000; the GRPO configurations time 30). Each test asserts the secure behaviour, so each FAILS while its
flaw is there. Timing runs only on CUDA: the executor's own timing code runs here under timing.time_cuda's call
order without CUDA (timing_support.time_on_the_cpu), and the server's side with stand-ins for the judge.

- FINDING warm-up-does-run-zero-s-work: the untimed warm-up calls run on run 0's inputs (`time_cuda` calls
  `before_run(0)` before the warm-up, and `TimingInputs` hands the same tensors to run 0). A kernel with memory
  across forwards (a buffer of the model) that keeps its last inputs and answer, and serves a call whose inputs
  equal the last call's with a copy (Triton can tell by comparing a few sampled elements), does run 0's work in the
  warm-up, outside the CUDA-event figure, and passes run 0's check (its outputs are right). One run in 100 or 30
  does not move a median; a client's `timing_runs` of 1 makes it the whole figure: the executor's figure is a copy's,
  and the outside floor, averaged over warm-up and timed calls (`calls = warmup_runs + timing_runs`), is half of one
  call's work spread over four calls: the candidate's time is about an eighth of its real one (8x its speedup, and
  R_speedup's cap of 2 for any kernel as fast as the reference); with 2 runs the median of a copy and one real run
  is half (2x). Every run is checked when there are at most 5, so the checks see nothing.
  Fix (executor/runner.py): the warm-up runs on inputs of its own (a seed after every run's), so run 0's are made
  after it like any other run's; the empty batch does the same (both go through one `before_run`).
- FINDING reference-protocol-from-the-untrusted-message: the reference's protocol key (and the judge's timing
  method) is the `method` the timing message carries, any string of up to 64 characters (messages._timing_stats).
  In the in-process design the candidate writes that message: every new string is a reference figure of its own,
  measured anew with the GPU held (up to REFERENCE_TIMING_TIMEOUT_S) and kept for good in the lane's dict (and in
  the judge's), one entry per evaluation without bound; and any string but cuda_events makes the judge time the
  reference on the host's clock with a synchronise (launch latency counted: a slower reference, a larger speedup).
  In the executor design the executor always times with CUDA events; a message forged there (argued, GPU: on a
  machine with HMM or ATS a kernel reaches the executor's pageable memory, docs/security.md) would choose the
  reference's protocol too.
  Fix (worker/messages.py, evaluation.py): a timing figure names one of timing's two methods; the executor
  design's reference is timed with the protocol the executor uses (CUDA events), whatever the message says.
- FINDING failed-remeasure-fails-the-evaluation (GPU, argued; shown with a stand-in judge): a remeasure (a secret
  tenth of timed evaluations) that the judge cannot finish (out of GPU memory: memory a frozen sibling holds beyond
  its share, such as a spilling kernel's local memory, which nothing caps (red team 10's open item); or a judge
  killed) ended the evaluation being timed `infra_error`, masked by the trainer, although the lane kept a figure
  for the task. Before bea9f79 a judge with the figure cached never timed again; now every tenth honest evaluation
  of a task is exposed. Fix (evaluation.py): a remeasure that fails for want of the judge keeps the lane's figure.
"""

from __future__ import annotations

import contextlib
import os
import threading
import types

import pytest
import torch

from sandbox_service import evaluation, timing
from sandbox_service.evaluation import JudgeLink, _Evaluation
from sandbox_service.executor import runner
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status, TimingStats
from sandbox_service.worker import harness
from sandbox_service.worker.messages import Malformed, Schema
from sandbox_service.worker.pool import TimingGate
from sandbox_service.worker.service import ServiceFailure
from timing_support import stand_in_judge, stand_in_lane, time_on_the_cpu


class Reference:
    @staticmethod
    def get_inputs():
        return [torch.randn(64, 64)]


class Memoising:
    """The attacker's forward, as its kernels behave: a buffer of the model keeps the last inputs and answer; a call
    whose inputs equal the last call's copies the answer (cheap) instead of doing the work (costly)."""

    def __init__(self):
        self.last: torch.Tensor | None = None
        self.answer: torch.Tensor | None = None
        self.calls: list[str] = []

    def run(self, inputs):
        x = inputs[0]
        if self.last is not None and torch.equal(x, self.last):
            self.calls.append("copied")
            return [self.answer.clone()]
        self.calls.append("worked")
        self.last, self.answer = x.clone(), x * 2
        return [x * 2]


@pytest.mark.parametrize("runs", [1, 2])
def test_no_timed_run_is_served_from_the_warm_up_s_work(monkeypatch, runs):
    warmup, trials = 3, 5
    order = evaluation.timing_order(runs, evaluation.EXPECTED_TIMING_CHECKS)
    checks = list(zip(order["checked_runs"], order["check_seeds"]))
    assert len(checks) == runs  # at most 5 runs: every run is checked
    job = {"timing_runs": runs, "warmup_runs": warmup, "trial_key": "k" * 32, "max_timing_checks": 16,
           "trials": trials}
    handed: dict[int, list[torch.Tensor]] = {}
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(runner, "hand_over", lambda job, emit, control, outputs, set_index, trial, fingerprint:
                        handed.__setitem__(trial - trials, outputs))
    forward = Memoising()
    runner._time_checked(job, lambda kind, **fields: None, None, forward,
                         runner.timing_inputs(job, Reference, order["run_seed"], torch.device("cpu")), checks,
                         calibrate=False, sample_seed=order["sample_seed"])
    monkeypatch.undo()
    # The judge's view: every check passes (the copied answer is the right one for run 0's inputs).
    for check, (run, seed) in enumerate(checks):
        want = (harness.trial_inputs(Reference, seed, torch.device("cpu"))[0] * 2).reshape(-1)
        picked = harness.sample_indices([want.numel()], harness.call_sample_seed(order["sample_seed"], warmup + run))
        assert torch.equal(handed[check][0], want[picked[0]])
    timed = forward.calls[warmup:]
    assert timed == ["worked"] * runs, (
        f"timed runs {timed} after the warm-up's {forward.calls[:warmup]}: run 0's inputs are the warm-up's, so its "
        "work was done in the untimed warm-up and the timed run only copied the answer; with timing_runs="
        f"{runs} the executor's median is {'a copy' if runs == 1 else 'half a run'} and every check passes")


def test_the_empty_batch_makes_its_inputs_as_the_timed_batch_does(monkeypatch):
    """The fix's cost lies in both batches alike: the server's clock subtracts the empty batch, so both make the
    same number of input sets (the warm-up's and each run's)."""
    made: list[list[int]] = []
    real_make = runner.TimingInputs.__call__

    def make(self, index):
        made[-1].append(index)
        return real_make(self, index)

    monkeypatch.setattr(runner.TimingInputs, "__call__", make)
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(runner, "hand_over", lambda *args, **kwargs: None)
    job = {"timing_runs": 4, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 16, "trials": 2}
    for calibrate in (False, True):
        made.append([])
        runner._time_checked(job, lambda kind, **fields: None, None, types.SimpleNamespace(run=lambda i: [i[0] * 2]),
                             runner.timing_inputs(job, Reference, 11, torch.device("cpu")), [(0, 5), (2, 6)],
                             calibrate=calibrate, copy_bytes=64 * 64 * 4)
    assert made[0] == made[1] and len(made[0]) == 1 + job["timing_runs"]


# -- the reference's protocol ------------------------------------------------------------------------------------------
def _stats(median_us: float, method: str = timing.CUDA_EVENTS) -> dict:
    return {"median_us": median_us, "mean_us": median_us, "std_us": 0.0, "min_us": median_us, "max_us": median_us,
            "runs": 100, "method": method}


@pytest.mark.parametrize("method", ["cuda_events#1", "x" * 64, "host clock"])
def test_a_timing_message_names_one_of_the_timing_methods(method):
    schema = Schema(sets=1, trials=5, outputs_dir="/nowhere", ipc_min_bytes=None)
    for known in (timing.CUDA_EVENTS, timing.DEVICE_SYNC):
        schema.check({"type": "timing", "nonce": "n", "candidate": _stats(10.0, known), "violations": []})
    with pytest.raises(Malformed):
        schema.check({"type": "timing", "nonce": "n", "candidate": _stats(10.0, method), "violations": []})


def test_the_executor_design_times_the_reference_as_the_executor_times_candidates():
    """A figure the executor sent naming another method (forged in its memory) does not choose the reference's
    protocol: the judge times it with CUDA events, as the executor times candidates."""
    asked: list[str] = []
    options = EvalOptions(timing_runs=100, warmup_runs=3)
    lane = stand_in_lane()

    def time_reference(method, fresh_inputs):
        asked.append(method)
        return TimingStats(**_stats(400.0))

    evaluation_ = types.SimpleNamespace(
        lane=lane, options=options, child=types.SimpleNamespace(pid=os.getpid()), result=EvalResult(Status.INFRA_ERROR), seen={},
        problem=types.SimpleNamespace(key="task"), timing_checks=evaluation.EXPECTED_TIMING_CHECKS,
        remeasure_empty=False,
        judge=stand_in_judge(time_reference))

    def timed_order(order, answer, messages, deadline, job):
        evaluation_.seen["timing"] = {"candidate": _stats(100.0, timing.DEVICE_SYNC)}
        return 1.0 if order["type"] == "timing" else 0.5

    evaluation_._timed_order = timed_order
    evaluation_._check_outputs = lambda messages, deadline, checks: iter(())
    _Evaluation._timed_attempt(evaluation_, None, types.SimpleNamespace(extend=lambda s: None), {})
    assert asked == [timing.CUDA_EVENTS]


# -- a remeasure the judge cannot finish ----------------------------------------------------------------------------
class _Judge:
    def __init__(self, answer):
        self.answer, self.requests = answer, []
        self.lock = threading.Lock()

    def request(self, message, timeout_s):
        self.requests.append(message)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _link(answer, lane) -> JudgeLink:
    link = JudgeLink.__new__(JudgeLink)
    link.lane, link.service = lane, _Judge(answer)
    link.problem = types.SimpleNamespace(key="task")
    link.options = types.SimpleNamespace(warmup_runs=3, timing_runs=100, timeout_s=60.0)
    link.wall_s = link.service_s = 0.0
    return link


@pytest.mark.parametrize("failure", [
    {"type": "error", "kind": "memory", "error": "out of GPU memory in the judge", "requested": 1 << 30},
    ServiceFailure("the judge died", False),
])
def test_a_remeasure_the_judge_cannot_finish_keeps_the_lane_s_figure(monkeypatch, failure):
    monkeypatch.setattr(evaluation, "REFERENCE_REFRESH", 1.0)
    lane = types.SimpleNamespace(gate=TimingGate(), reference_times={})
    first = _link({"type": "timed", "stats": _stats(52.0)}, lane)
    assert first.time_reference(timing.CUDA_EVENTS, fresh_inputs=True).median_us == 52.0
    second = _link(failure, lane)
    try:
        figure = second.time_reference(timing.CUDA_EVENTS, fresh_inputs=True).median_us
    except evaluation._Finish as finish:
        pytest.fail(f"a remeasure the judge could not finish ended the evaluation {finish.status.value} "
                    f"({finish.error}) although the lane keeps the task's figure")
    assert figure == 52.0 and second.service.requests[0]["remeasure"] is True


def test_a_first_measurement_the_judge_cannot_finish_still_fails():
    """With no figure kept there is nothing to fall back on: infra_error, as before."""
    lane = types.SimpleNamespace(gate=TimingGate(), reference_times={})
    link = _link({"type": "error", "kind": "memory", "error": "out of GPU memory in the judge"}, lane)
    with pytest.raises(evaluation._Finish) as finish:
        link.time_reference(timing.CUDA_EVENTS, fresh_inputs=True)
    assert finish.value.status is Status.INFRA_ERROR and not lane.reference_times


def test_a_reference_that_fails_when_remeasured_is_still_the_reference_s_failure(monkeypatch):
    monkeypatch.setattr(evaluation, "REFERENCE_REFRESH", 1.0)
    lane = types.SimpleNamespace(gate=TimingGate(), reference_times={})
    _link({"type": "timed", "stats": _stats(52.0)}, lane).time_reference(timing.CUDA_EVENTS, fresh_inputs=True)
    link = _link({"type": "error", "kind": "reference", "error": "RuntimeError: boom"}, lane)
    with pytest.raises(evaluation._Finish) as finish:
        link.time_reference(timing.CUDA_EVENTS, fresh_inputs=True)
    assert finish.value.status is Status.REFERENCE_ERROR
