"""The timing gate (pool.TimingGate): judges share the GPU, a timing has it alone, and a timing never waits for
judge calls that came after it (writers first: a fairer gate, which let a judge call in after each timing, was
measured slower on an H100: timed evaluations then held their executors longer while they waited)."""

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


def test_readers_share_and_a_writer_waits_for_them():
    gate, log = TimingGate(), []
    first, second = _Holder(gate, False, log, "r1"), _Holder(gate, False, log, "r2")
    _until(lambda: first.inside.is_set() and second.inside.is_set())
    writer = _Holder(gate, True, log, "w")
    _until(lambda: _waiting(gate, writers=1))
    first.leave()
    assert not writer.inside.wait(0.1)
    second.leave()
    assert writer.inside.wait(5)
    writer.leave()


def test_a_reader_that_comes_after_a_waiting_writer_goes_after_it():
    gate, log = TimingGate(), []
    reader = _Holder(gate, False, log, "r1")
    _until(reader.inside.is_set)
    writer = _Holder(gate, True, log, "w")
    _until(lambda: _waiting(gate, writers=1))
    late = _Holder(gate, False, log, "r2")
    assert not late.inside.wait(0.1)
    reader.leave()
    _until(writer.inside.is_set)
    assert not late.inside.wait(0.1)
    writer.leave()
    late.leave()
    assert log == ["r1", "w", "r2"]


def test_no_reader_and_writer_are_ever_in_together():
    gate = TimingGate()
    inside = {"readers": 0, "writers": 0}
    lock, overlaps = threading.Lock(), []

    def visit(exclusive: bool) -> None:
        for _ in range(200):
            with (gate.exclusive() if exclusive else gate.shared()):
                with lock:
                    inside["writers" if exclusive else "readers"] += 1
                    if inside["writers"] > 1 or (inside["writers"] and inside["readers"]):
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
