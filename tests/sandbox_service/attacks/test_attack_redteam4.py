"""Red team 4: the timing secrets drawn per timing (evaluation.timing_order, runner._time_checked, the judge's
seeded compare), the option names reserved for Triton, the line-by-line fence search and the streams. Each test
asserts the secure behaviour, so each FAILS while its flaw is there. Everything runs on the CPU: the executor's
own timing code under timing.time_cuda's call order without CUDA (as tests/sandbox_service/executor/
test_timing_inputs.py does), the server's `_Evaluation._time` on stand-ins for the lane, the judge and the
executor, and the one-process server's EvaluateStream on a stand-in scheduler.

What a candidate's kernels can do in the executor (kernels.py lets all of this through): read the GPU's clock
(`triton.language.extra.cuda.globaltimer()`), read their pointers' addresses (`ptr.to(tl.int64)`), and keep
state from one forward to the next by storing into a constant (the model's parameters are the same tensors in
every run: Replay.run starts each run's environment from `self.constants`).

- FINDING timing-checks-visible-between-runs: `_time_checked` moves a checked run's outputs to the host in the
  *next* run's `before_run`, and does nothing of the kind after an unchecked run. The gap between two runs is
  therefore longer exactly after the checked ones (a device-to-host copy of the outputs: for MB-sized outputs,
  hundreds of microseconds against a gap that is otherwise the same every run). A kernel that stamps
  `globaltimer()` into a constant at the end of each forward and compares at the start of the next counts the
  checks as they pass; once it has seen all three of them, no later run can be checked, and it skips
  every remaining run without any risk. With 100 runs all three checks fall in the first half one time in
  eight (C(50,3)/C(100,3) = 0.12), and then more than half the runs are empty: the median is an empty kernel's,
  bounded only by the outside floor (about a quarter of the honest time), in a timing whose three checks all
  passed. The empty batch (calibrate) copies too, so the server's clock is no help. Secure: the checks seen
  say nothing of the runs to come. Fixed first by copying every run's outputs (what the executor does between
  runs did not depend on the checks), then, as that cost a third of the timed batch, by checking each run on its
  own (evaluation.timing_order): a kernel may see the checks pass and learns nothing from them.
- FINDING checked-run-zero-visible-in-warmup: the warm-up's calls are on run 0's inputs and, when run 0 is a
  checked run, `forward` stores each warm-up call's outputs in `held[0]`, so the next call (and the timed run 0)
  allocates its outputs while the previous call's are still alive: its output pointer moves from call to call
  (A, B, A, B ...), where an unchecked run 0 gets the same block every call (the last outputs were freed). A
  kernel reading its output pointer during the warm-up knows, before run 0 is timed, whether run 0 is checked.
- FINDING empty-batch-shared-across-timing-options: the server's empty batch (what its clock subtracts for the
  outside floor) is measured once per lane and task, `lane.empty_batch_s[problem.key]`, but the task key does
  not hold the timing options (`ProblemRef.create`: sources, sets, seed, trials, tolerances), while the empty
  batch's length is `warmup_runs + timing_runs` calls. One evaluation of a task with more runs (timing_runs=1000:
  a careful final measurement, a benchmark) sets the empty batch for every later evaluation of that task on the
  lane with the default 100: `batch_s - empty_s` is negative, the outside floor is 0, and the executor's figure
  (which candidate kernels can fake: the floor exists because of that) is taken as it is. The other way round
  (calibrated with fewer runs) the floor charges an honest kernel the per-run overhead of the extra runs.
- FINDING stream-server-keeps-every-job: red team 3's fix bounded what the front keeps per stream (InFlight),
  but the one-process server's EvaluateStream (server.py, also every lane server behind the front) still
  appends every Job it ever submitted to `jobs` and never removes one: each Job holds its request's reference
  and candidate sources (the `work` closure) and its result until the stream ends, and a trainer's stream lives
  for the whole run.

Ideas that failed (no test): the judge compares a check against something else (the server pins each check's
trial to `trials + check` and passes its own seed, `_expect`); a candidate-derived message choosing the expected
outputs (the judge takes the seed only from the server, set 0 and the trial checked); learning a check's seed
from its inputs (the seeds are independent SystemRandom draws: knowing one predicts nothing); a checked run told
apart by its inputs' addresses (every run's inputs are made after the last run's outputs and inputs are gone);
Triton option names through another path (Triton 3.9's JITFunction.run passes only launch keywords, checked
against every CUDAOptions/HIPOptions/InterpreterOptions field; the replay calls `kernel.run` itself, never the
autotuner or heuristics); `_fenced_blocks` against the old regex (equal on 100,000 random texts built from
backticks, line ends of every kind, blanks and language tags; linear); `answer_stream` leaking a slot (the slot
is taken inside the generator, released in `finally`, an abort before it takes none).
"""

from __future__ import annotations

import gc
import os
import types
import weakref

import pytest
import torch

from sandbox_service.executor import runner
from timing_support import stand_in_judge, stand_in_lane, time_on_the_cpu

# -- the executor's timing batch ------------------------------------------------------------------------------------


class Reference:
    @staticmethod
    def get_inputs():
        return [torch.randn(64, 64)]


def _batch(monkeypatch, checks: list[tuple[int, int]], replay_run, runs: int = 20) -> None:
    """One timed batch of `_time_checked` with these (run, seed) checks."""
    from sandbox_service import timing

    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(runner, "hand_over", lambda *args, **kwargs: None)
    job = {"timing_runs": runs, "warmup_runs": 3, "trial_key": "lane-secret", "max_timing_checks": len(checks),
           "trials": 5}
    replay = types.SimpleNamespace(run=replay_run)
    runner._time_checked(job, lambda kind, **fields: None, None, replay,
                         runner.timing_inputs(job, Reference, 77, torch.device("cpu")), checks, calibrate=False)
    monkeypatch.undo()


# FINDING timing-checks-visible-between-runs
def test_the_checks_a_kernel_has_seen_pass_say_nothing_of_the_runs_to_come():
    """A kernel can tell which runs were checked (the sample copied after a checked run makes the next gap
    longer, and it can read the GPU's clock). That must not tell it which later runs are safe to skip: over many
    of the server's timing orders, a run that comes after three checks already seen is checked as often as any
    run (with a fixed number of checks, three seen would free every later run)."""
    from sandbox_service.evaluation import EXPECTED_TIMING_CHECKS, timing_order

    runs, orders = 100, 4000
    later_runs = later_checked = 0
    for _ in range(orders):
        checked = sorted(timing_order(runs, EXPECTED_TIMING_CHECKS)["checked_runs"])
        if len(checked) >= 3:
            later_runs += runs - checked[2] - 1
            later_checked += len(checked) - 3
    rate = EXPECTED_TIMING_CHECKS / runs
    assert later_runs > 10000
    assert abs(later_checked / later_runs - rate) < 0.25 * rate, (
        f"runs after the third check seen are checked at {later_checked / later_runs:.4f}, where every run is "
        f"checked at {rate:.4f}: a kernel counting the checks as they pass skips the later runs at less risk")


# FINDING checked-run-zero-visible-in-warmup
def test_the_warm_up_does_not_tell_whether_run_zero_is_checked(monkeypatch):
    """During the warm-up (run 0's inputs), how many earlier outputs are still alive when the replay allocates
    the next call's (what decides whether the caching allocator hands out the same block, i.e. the output pointer
    a kernel reads) must be the same whether run 0 is checked or not."""

    def alive_at_each_call(checks: list[tuple[int, int]]) -> list[int]:
        returned: list[weakref.ref] = []
        seen: list[int] = []

        def replay_run(inputs):
            gc.collect()
            seen.append(sum(1 for ref in returned if ref() is not None))
            out = inputs[0] * 2
            returned.append(weakref.ref(out))
            return [out]

        _batch(monkeypatch, checks, replay_run, runs=6)
        return seen[:4]  # the three warm-up calls and timed run 0

    unchecked = alive_at_each_call([(2, 11), (3, 12), (4, 13)])
    checked = alive_at_each_call([(0, 11), (3, 12), (4, 13)])
    assert unchecked == checked, (
        f"earlier outputs alive at the warm-up calls and run 0: {unchecked} when run 0 is not checked, {checked} "
        "when it is: a checked run 0's outputs are held from call to call, so its output pointer alternates "
        "during the warm-up and the kernel knows run 0 is checked before it is timed")


# -- the server's outside floor -------------------------------------------------------------------------------------


OVERHEAD_S = 100e-6  # the batch's own cost per call (inputs, flush, synchronisation): the empty batch measures it
KERNEL_S = 50e-6  # what the candidate's forward really costs per call
CLAIMED_US = 1.0  # what the executor's CUDA events say (kernels in its context can make that up: the floor's reason)


def _timed_evaluation(lane, timing_runs: int):
    """`_Evaluation._time` of one evaluation of the same task on `lane`, with stand-ins whose server-clock
    figures are the batch's calls times the costs above; returns its result."""
    from sandbox_service.evaluation import EXPECTED_TIMING_CHECKS, _Evaluation
    from sandbox_service.options import EvalOptions
    from sandbox_service.results import EvalResult, Status, TimingStats

    options = EvalOptions(timing_runs=timing_runs, warmup_runs=3)
    calls = options.warmup_runs + options.timing_runs
    stats = TimingStats(CLAIMED_US, CLAIMED_US, 0.0, CLAIMED_US, CLAIMED_US, timing_runs)
    evaluation = types.SimpleNamespace(
        lane=lane, options=options, child=types.SimpleNamespace(pid=os.getpid()), result=EvalResult(Status.INFRA_ERROR), seen={},
        problem=types.SimpleNamespace(key="one-task"), timing_checks=EXPECTED_TIMING_CHECKS, remeasure_empty=False,
        judge=stand_in_judge(lambda method, fresh_inputs: TimingStats(500.0, 500.0, 0.0, 500.0, 500.0, 100)),
    )

    def timed_order(order, answer, messages, deadline, job):
        if order["type"] == "calibrate":
            return calls * OVERHEAD_S
        evaluation.seen["timing"] = {"candidate": dict(stats.__dict__)}
        return calls * (OVERHEAD_S + KERNEL_S)

    evaluation._timed_order = timed_order
    evaluation._check_outputs = lambda messages, deadline, checks: iter(())  # no hand-overs: no checks
    evaluation._timed_attempt = lambda messages, deadline, job: _Evaluation._timed_attempt(
        evaluation, messages, deadline, job)
    _Evaluation._time(evaluation, None, types.SimpleNamespace(extend=lambda s: None), {})
    return evaluation.result




# FINDING empty-batch-shared-across-timing-options
def test_an_evaluation_s_outside_floor_uses_an_empty_batch_of_its_own_length():
    """One evaluation of a task with 1000 timed runs, then one with the default 100 on the same lane. The
    second's candidate claims 1 us a run where the server's clock sees 50 us: the floor must hold it to at least
    OUTSIDE_FLOOR of that, as it does on a lane that calibrated with 100 runs."""
    from sandbox_service.evaluation import OUTSIDE_FLOOR

    fresh = _timed_evaluation(stand_in_lane(), 100)
    expected_floor_us = OUTSIDE_FLOOR * KERNEL_S * 1e6
    assert fresh.candidate_time_us == pytest.approx(expected_floor_us, rel=0.01)  # the floor as designed

    lane = stand_in_lane()
    _timed_evaluation(lane, 1000)  # calibrates the lane's empty batch for this task with 1003 calls
    later = _timed_evaluation(lane, 100)
    assert later.candidate_time_us >= 0.9 * expected_floor_us, (
        f"after an evaluation of the same task with 1000 timed runs, an evaluation with 100 is charged "
        f"{later.candidate_time_us:.1f} us (the executor's claim) where the server's clock saw "
        f"{KERNEL_S * 1e6:.0f} us a run: the empty batch measured for 1003 calls was subtracted from a batch of "
        f"103, so the outside floor was 0 (speedup {later.speedup:.0f}x instead of "
        f"{fresh.speedup:.0f}x)")


# -- the one-process server's streams -------------------------------------------------------------------------------


# FINDING stream-server-keeps-every-job
def test_the_one_process_server_s_stream_does_not_keep_every_answered_job():
    """One EvaluateStream on the one-process server's servicer, 60 requests answered while it stays open: what it
    keeps must be bounded by what is in flight, not every Job (sources and result) it ever ran."""
    import threading

    from sandbox_service.options import EvalOptions
    from sandbox_service.results import EvalResult, Status
    from sandbox_service.server import SandboxServicer
    from tritonrl.sandbox.v1 import sandbox_pb2 as pb

    made: list[weakref.ref] = []

    class Scheduler:
        def submit(self, job, block=False, should_stop=None):
            made.append(weakref.ref(job))
            job.future.set_result(EvalResult(Status.OK))  # answered at once

    class Context:
        def add_callback(self, callback):
            return True

        def is_active(self):
            return True

        def abort(self, code, details):
            raise AssertionError(f"aborted: {code} {details}")

    servicer = SandboxServicer(Scheduler(), types.SimpleNamespace(), EvalOptions(), threads=32)
    release = threading.Event()
    big = "x = 1\n" * 20_000  # a candidate's source: 120 kB each

    def requests():
        for index in range(60):
            yield pb.EvaluateRequest(request_id=f"r{index}", reference_source=big, candidate_source=big)
        release.wait(30)  # the trainer's stream stays open

    responses = servicer.EvaluateStream(requests(), Context())
    try:
        answered = [next(responses) for _ in range(60)]
        assert len(answered) == 60
        gc.collect()
        kept = sum(1 for ref in made if ref() is not None)
        assert kept <= 4, (f"after 60 answered requests the open stream still holds {kept} Jobs, each with its "
                           f"request's sources ({2 * len(big) // 1024} kB here) and result: the one-process "
                           "server's `jobs` list grows with every request for the stream's whole life")
    finally:
        release.set()
        list(responses)
