"""The timing gate (pool.TimingGate): timings hold it one at a time, a judge's turn starts only while no timing
holds or waits for it (writers first: a fairer gate, which let a judge call in after each timing, was measured
slower on an H100), and a timing does not wait for the turns in flight (Lane.gpu_alone freezes their judges)."""

from __future__ import annotations

import threading
import time

from sandbox_service.worker.pool import TimingGate


def _until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class _Holder:
    """A thread that takes the gate (shared or exclusive), says so, and holds it until released."""

    def __init__(self, gate: TimingGate, exclusive: bool, log: list, name: str, drain: bool = False):
        self.inside = threading.Event()
        self.release = threading.Event()
        self.gate, self.exclusive, self.log, self.name, self.drain = gate, exclusive, log, name, drain
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with (self.gate.exclusive(self.drain) if self.exclusive else self.gate.turn(threading.Lock())):
            self.log.append(self.name)
            self.inside.set()
            self.release.wait(10)

    def leave(self) -> None:
        self.release.set()
        self.thread.join(5)


def _waiting(gate: TimingGate, writers: int) -> bool:
    return gate._writers_waiting == writers


def test_turns_share_the_gate_and_a_timing_does_not_wait_for_them():
    gate, log = TimingGate(), []
    first, second = _Holder(gate, False, log, "r1"), _Holder(gate, False, log, "r2")
    _until(lambda: first.inside.is_set() and second.inside.is_set())
    writer = _Holder(gate, True, log, "w")
    assert writer.inside.wait(5)
    for holder in (writer, first, second):
        holder.leave()


def test_a_timing_that_drains_waits_for_the_turns_in_flight_and_keeps_new_ones_out():
    gate, log = TimingGate(), []
    first = _Holder(gate, False, log, "r1")
    _until(first.inside.is_set)
    writer = _Holder(gate, True, log, "w", drain=True)
    _until(lambda: _waiting(gate, writers=1))
    late = _Holder(gate, False, log, "r2")
    assert not writer.inside.wait(0.1) and not late.inside.wait(0.1)
    first.leave()
    assert writer.inside.wait(5)
    assert not late.inside.wait(0.1)
    writer.leave()
    assert late.inside.wait(5)
    late.leave()
    assert log == ["r1", "w", "r2"]


def test_a_turn_whose_judge_was_busy_waits_again_for_the_timings_that_came_meanwhile():
    """It passed the gate, then waited for its judge: a timing that began meanwhile goes first (the turn's GPU work
    would otherwise start inside the hold)."""
    gate, judge, log = TimingGate(), threading.Lock(), []
    judge.acquire()  # busy with another turn
    turn = threading.Thread(target=lambda: _turn(gate, judge, log), daemon=True)
    turn.start()
    time.sleep(0.1)  # past the gate, waiting for its judge
    timing = _Holder(gate, True, log, "w")
    _until(timing.inside.is_set)
    judge.release()
    time.sleep(0.1)
    assert log == ["w"]  # the turn has its judge now, and still waits for the timing
    timing.leave()
    turn.join(5)
    assert log == ["w", "turn"]


def _turn(gate: TimingGate, judge: threading.Lock, log: list) -> None:
    with gate.turn(judge):
        log.append("turn")


def test_timings_hold_the_gate_one_at_a_time_and_turns_wait_for_every_one():
    gate, log = TimingGate(), []
    first = _Holder(gate, True, log, "w1")
    _until(first.inside.is_set)
    second = _Holder(gate, True, log, "w2")
    _until(lambda: _waiting(gate, writers=1))
    turn = _Holder(gate, False, log, "r")
    assert not second.inside.wait(0.1) and not turn.inside.wait(0.1)
    first.leave()
    _until(second.inside.is_set)
    assert not turn.inside.wait(0.1)
    second.leave()
    assert turn.inside.wait(5)
    turn.leave()
    assert log == ["w1", "w2", "r"]


def test_no_two_timings_ever_overlap_among_turns():
    gate = TimingGate()
    inside = {"readers": 0, "writers": 0}
    lock, overlaps = threading.Lock(), []

    def visit(exclusive: bool) -> None:
        for _ in range(200):
            with (gate.exclusive() if exclusive else gate.turn(threading.Lock())):
                with lock:
                    inside["writers" if exclusive else "readers"] += 1
                    if inside["writers"] > 1:
                        overlaps.append(dict(inside))
                time.sleep(0.0001)
                with lock:
                    inside["writers" if exclusive else "readers"] -= 1

    threads = [threading.Thread(target=visit, args=(i % 3 == 0,)) for i in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not overlaps
