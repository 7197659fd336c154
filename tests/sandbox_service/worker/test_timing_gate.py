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

    def __init__(self, gate: TimingGate, exclusive: bool, log: list, name: str):
        self.inside = threading.Event()
        self.release = threading.Event()
        self.gate, self.exclusive, self.log, self.name = gate, exclusive, log, name
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with (self.gate.exclusive() if self.exclusive else self.gate.shared()):
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
            with (gate.exclusive() if exclusive else gate.shared()):
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
