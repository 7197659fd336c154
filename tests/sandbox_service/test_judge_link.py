"""JudgeLink: a timed batch's checks go to the judge in one turn (the gate and the judge taken once), anything but
a plain answer is left to compare(), which knows how to recover, and the reference's time is the lane's, whichever
judge measured it."""

from __future__ import annotations

import contextlib
import threading
import types

from sandbox_service import evaluation
from sandbox_service.evaluation import JudgeLink
from sandbox_service.worker.pool import TimingGate
from sandbox_service.worker.service import ServiceFailure


class _Gate(TimingGate):
    def __init__(self):
        super().__init__()
        self.turns = 0

    @contextlib.contextmanager
    def turn(self, judge_lock):
        self.turns += 1
        with super().turn(judge_lock):
            yield


class _Judge:
    """Answers each request with the next of `answers` (an exception is raised)."""

    def __init__(self, answers: list):
        self.lock = threading.Lock()
        self.answers = list(answers)
        self.requests: list[dict] = []

    def request(self, message: dict, timeout_s: float) -> dict:
        assert self.lock.locked(), "the judge is asked only while it is held"
        self.requests.append(message)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _link(answers: list, lane: types.SimpleNamespace | None = None) -> tuple[JudgeLink, _Gate, _Judge]:
    link = JudgeLink.__new__(JudgeLink)
    gate, judge = _Gate(), _Judge(answers)
    link.lane, link.service = lane or types.SimpleNamespace(gate=gate, reference_times={}), judge
    link.problem = types.SimpleNamespace(key="task")
    link.options = types.SimpleNamespace(warmup_runs=3, timing_runs=100, timeout_s=60.0)
    link.wall_s = link.service_s = 0.0
    return link, gate, judge


def _item(trial: int) -> tuple:
    message = {"set": 0, "trial": trial, "handover": {"kind": "file", "path": f"/outputs/set_0_trial_{trial}"}}
    return message, "/outputs", None, 1000 + trial, 7000 + trial


def test_the_checks_of_a_batch_take_the_gate_and_the_judge_once():
    compared = {"type": "compared", "passed": True}
    link, gate, judge = _link([compared, compared, compared])
    answers = link.compare_together([_item(2), _item(3), _item(4)])
    assert answers == [compared] * 3
    assert gate.turns == 1
    assert [(r["op"], r["trial"], r["seed"], r["sample_seed"]) for r in judge.requests] == [
        ("compare", 2, 1002, 7002), ("compare", 3, 1003, 7003), ("compare", 4, 1004, 7004)]


def test_an_answer_that_needs_recovery_is_left_to_compare():
    compared = {"type": "compared", "passed": False, "message": "wrong"}
    malformed = {"type": "malformed", "rule": "malformed-handover", "error": "not a file"}
    link, _, _ = _link([{"type": "unknown_problem"}, malformed, compared, {"type": "error", "error": "oom"}])
    assert link.compare_together([_item(2), _item(3), _item(4), _item(5)]) == [None, malformed, compared, None]


def test_a_judge_that_fails_leaves_the_rest_to_compare():
    compared = {"type": "compared", "passed": True}
    link, gate, judge = _link([compared, ServiceFailure("the judge died"), compared])
    assert link.compare_together([_item(2), _item(3), _item(4)]) == [compared, None, None]
    assert len(judge.requests) == 2 and not judge.lock.locked()
    with gate.exclusive():  # and the gate was given back
        pass



def _timed(median_us: float) -> dict:
    return {"type": "timed", "stats": {"median_us": median_us, "mean_us": median_us, "std_us": 1.0,
                                       "min_us": median_us, "max_us": median_us, "runs": 100}}


def _reference_time(link: JudgeLink, fresh_inputs: bool = True) -> float:
    """As a timing asks it: with the GPU and the judge held (Lane.gpu_alone)."""
    with link.service.lock:
        return link.time_reference("cuda_events", fresh_inputs=fresh_inputs).median_us


def test_every_judge_of_a_task_gives_the_lane_s_reference_time(monkeypatch):
    monkeypatch.setattr(evaluation, "REFERENCE_REFRESH", 0.0)
    lane = types.SimpleNamespace(gate=TimingGate(), reference_times={})
    first, _, first_judge = _link([_timed(52.0), _timed(60.0)], lane)
    second, _, second_judge = _link([_timed(30.0)], lane)
    assert _reference_time(first, True) == 52.0
    assert _reference_time(second, True) == 52.0
    assert [r["remeasure"] for r in first_judge.requests] == [False, True] and not second_judge.requests
    # another protocol is another figure
    third, _, third_judge = _link([_timed(41.0), _timed(40.0)], lane)
    assert _reference_time(third, False) == 40.0


def test_a_first_figure_is_measured_twice_and_the_quicker_kept(monkeypatch):
    """Queued GPU work of frozen processes runs through the first measurement of a hold: the second is clean."""
    monkeypatch.setattr(evaluation, "REFERENCE_REFRESH", 0.0)
    lane = types.SimpleNamespace(gate=TimingGate(), reference_times={})
    link, _, judge = _link([_timed(90.0), _timed(31.0)], lane)
    assert _reference_time(link, True) == 31.0
    assert len(judge.requests) == 2


def test_a_remeasured_reference_keeps_the_quicker_figure(monkeypatch):
    monkeypatch.setattr(evaluation, "REFERENCE_REFRESH", 1.0)
    lane = types.SimpleNamespace(gate=TimingGate(), reference_times={})
    figures = []
    for median_us in (52.0, 30.0, 60.0):
        link, _, judge = _link([_timed(median_us)] * 2, lane)
        figures.append(_reference_time(link, True))
    assert figures == [52.0, 30.0, 30.0]
    assert judge.requests[0]["remeasure"] is True
