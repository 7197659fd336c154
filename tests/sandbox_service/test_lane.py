"""The lane's long-lived processes: candidate processes used once, judges that cache and restart."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from sandbox_cases import CORRECT, FAST, INCORRECT, REFERENCE
from sandbox_service.evaluation import evaluate
from sandbox_service.results import Status


def _judge_stats(lane) -> dict:
    judge = lane.judges[0]
    with judge.lock:
        return judge.request({"op": "stats"}, 30)


def test_candidate_processes_are_never_handed_out_twice(cpu_lane):
    first = cpu_lane.candidates.acquire()
    second = cpu_lane.candidates.acquire()
    try:
        assert first.pid != second.pid
    finally:
        first.close()
        second.close()
    assert first.returncode() is not None and second.returncode() is not None


def test_a_group_of_candidates_prepares_the_reference_once(cpu_lane):
    before = _judge_stats(cpu_lane)["counts"]
    reference = REFERENCE.replace("return [0.5]", "return [0.25]")  # a task the judge has not seen
    for candidate in (CORRECT, INCORRECT, CORRECT):
        evaluate(reference, candidate, FAST, cpu_lane)
    after = _judge_stats(cpu_lane)["counts"]
    assert after.get("prepare_miss", 0) - before.get("prepare_miss", 0) == 1
    assert after.get("prepare_hit", 0) - before.get("prepare_hit", 0) == 2


def test_a_killed_judge_is_restarted_and_trusts_nothing_from_before(cpu_lane):
    assert evaluate(REFERENCE, CORRECT, FAST, cpu_lane).status == Status.OK
    judge = cpu_lane.judges[0]
    generation = judge.generation
    os.kill(judge._child.pid, signal.SIGKILL)
    after = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert after.status == Status.OK, after.error
    assert evaluate(REFERENCE, INCORRECT, FAST, cpu_lane).status == Status.INCORRECT
    assert judge.generation == generation + 1
    stats = _judge_stats(cpu_lane)["counts"]
    assert stats.get("prepare_miss", 0) >= 1  # the new judge computed the reference again


def test_tracers_are_frozen_while_another_evaluation_is_timed(cpu_lane):
    """A tracer runs the candidate's Python: it stops while a timed run has the machine (its CPU would slow
    the timed launches), and runs again after."""
    tracer = cpu_lane.candidates.acquire()
    try:
        with cpu_lane.freezer.others_frozen(keep=None):
            assert _stopped(tracer.pid)
        assert not _stopped(tracer.pid, expected=False)
    finally:
        tracer.close()


def test_a_process_frozen_for_a_read_stays_frozen_when_a_timing_hold_ends(cpu_lane):
    """Freezes nest: the judge may still be reading a process's IPC outputs (it is frozen so that it cannot change
    them meanwhile) when another evaluation's hold, which froze it too, ends."""
    child = cpu_lane.candidates.acquire()
    try:
        child.freeze()  # as evaluation._compare does for an IPC hand-over
        with cpu_lane.freezer.others_frozen(keep=None):
            pass
        time.sleep(0.1)
        assert _stopped(child.pid)
        child.thaw()
        assert not _stopped(child.pid, expected=False)
    finally:
        child.close()


def test_a_timing_freezes_every_judge_but_its_own(cpu_lane):
    """A timing does not wait for other judges' turns to end (Lane.gpu_alone): they are frozen instead. The timed
    evaluation's own judge runs, and answers it, throughout."""
    judge = cpu_lane.judges[0]
    _judge_stats(cpu_lane)  # started
    with cpu_lane.gpu_alone(keep=None):
        assert _stopped(judge._child.pid)
    with cpu_lane.gpu_alone(keep=None, judge=judge):
        assert judge.request({"op": "stats"}, 5)["type"] == "stats"


def test_a_judge_frozen_mid_request_answers_after_the_hold_within_its_own_time(cpu_lane):
    """A request that waits on a frozen judge is not timed out for the time the judge was frozen (nor the judge
    killed for it): the request's limit runs only while the judge can run."""
    judge = cpu_lane.judges[0]
    _judge_stats(cpu_lane)
    generation, answers = judge.generation, []
    with cpu_lane.gpu_alone(keep=None):
        asking = threading.Thread(target=lambda: answers.append(_judge_stats_within(judge, 0.5)))
        asking.start()
        time.sleep(1.5)  # three times the request's limit, frozen
    asking.join(10)
    assert answers and answers[0]["type"] == "stats"
    assert judge.generation == generation


def _judge_stats_within(judge, timeout_s: float) -> dict:
    with judge.lock:
        return judge.request({"op": "stats"}, timeout_s)


def _stopped(pid: int, expected: bool = True) -> bool:
    """Whether the process is stopped, once it is as `expected` or 5 s have passed (a signal takes effect
    asynchronously)."""
    deadline = time.monotonic() + 5
    while True:
        stopped = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("T", "t")
        if stopped == expected or time.monotonic() > deadline:
            return stopped
        time.sleep(0.01)


def test_judges_per_task_comes_from_the_environment_and_nonsense_is_refused(monkeypatch):
    from sandbox_service import lane

    monkeypatch.delenv(lane.JUDGES_PER_TASK_ENV, raising=False)
    assert lane.judges_per_task() == lane.JUDGES_PER_TASK
    monkeypatch.setenv(lane.JUDGES_PER_TASK_ENV, "8")
    assert lane.judges_per_task() == 8
    for nonsense in ("0", "-2", "four", "1.5"):
        monkeypatch.setenv(lane.JUDGES_PER_TASK_ENV, nonsense)
        with pytest.raises(ValueError, match="TRITONRL_JUDGES_PER_TASK"):
            lane.judges_per_task()
