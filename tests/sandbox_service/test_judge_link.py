"""JudgeLink.compare_together: a timed batch's checks go to the judge in one turn (the gate and the judge taken
once), and anything but a plain answer is left to compare(), which knows how to recover."""

from __future__ import annotations

import contextlib
import threading
import types

from sandbox_service.evaluation import JudgeLink
from sandbox_service.worker.pool import TimingGate
from sandbox_service.worker.service import ServiceFailure


class _Gate(TimingGate):
    def __init__(self):
        super().__init__()
        self.turns = 0

    @contextlib.contextmanager
    def shared(self):
        self.turns += 1
        with super().shared():
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


def _link(answers: list) -> tuple[JudgeLink, _Gate, _Judge]:
    link = JudgeLink.__new__(JudgeLink)
    gate, judge = _Gate(), _Judge(answers)
    link.lane, link.service = types.SimpleNamespace(gate=gate), judge
    link.problem = types.SimpleNamespace(key="task")
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

