"""The candidate pool keeps processes ready, lets only a few make their CUDA context at once, and hands each
process out once."""

from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace

import pytest

from sandbox_service.worker.pool import CandidatePool
from sandbox_service.worker.zygote import ChildStartError


class FakeChild:
    """A child that reports ready when its start is released (the time its CUDA context would take)."""

    def __init__(self, starts: "Starts", fails: bool = False):
        self.spec = SimpleNamespace(role="candidate")
        self.starts = starts
        self.fails = fails
        self.exited = False
        self.closed = False
        self.ready_after_s = 0.0
        self.started_at = time.monotonic()

    def receive(self, timeout=None):
        with self.starts.lock:
            self.starts.now += 1
            self.starts.most = max(self.starts.most, self.starts.now)
        try:
            time.sleep(self.starts.seconds)
            if self.fails:
                from sandbox_service.worker.protocol import ChannelClosed

                raise ChannelClosed("the child died while making its context")
            return {"type": "ready"}
        finally:
            with self.starts.lock:
                self.starts.now -= 1

    def describe_exit(self, wait_s=2.0):
        return "exited with code 1"

    def output(self):
        return "CUDA error: out of memory"

    def close(self, wait=True):
        self.closed = True


class Starts:
    def __init__(self, seconds: float, fail: bool = False):
        self.seconds = seconds
        self.fail = fail
        self.lock = threading.Lock()
        self.now = self.most = self.spawned = 0
        self.children: list[FakeChild] = []

    def spawn(self) -> FakeChild:
        with self.lock:
            self.spawned += 1
        if self.fail == "raise":
            raise RuntimeError("a bug in spawn")
        child = FakeChild(self, bool(self.fail))
        self.children.append(child)
        return child


@contextlib.contextmanager
def _running(starts: Starts, size: int, starting: int):
    pool = CandidatePool(starts.spawn, size=size, starting=starting)
    try:
        yield pool
    finally:
        pool.close()


def _wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_no_more_than_starting_processes_make_their_context_at_once():
    starts = Starts(seconds=0.05)
    with _running(starts, size=12, starting=3) as pool:
        _wait_for(lambda: len(pool._idle) == 12)
        assert starts.most == 3
        handed = [pool.acquire() for _ in range(12)]  # every one ready, each handed out once
        assert len({id(c) for c in handed}) == 12
        _wait_for(lambda: len(pool._idle) == 12)  # refilled
        assert starts.most == 3


def test_acquire_waits_for_a_ready_process_instead_of_starting_another():
    starts = Starts(seconds=0.2)
    with _running(starts, size=2, starting=1) as pool:
        first, second, third = pool.acquire(), pool.acquire(), pool.acquire()
        assert len({id(first), id(second), id(third)}) == 3
        assert starts.most == 1


def test_a_process_that_died_while_waiting_is_not_handed_out():
    starts = Starts(seconds=0.0)
    with _running(starts, size=2, starting=1) as pool:
        _wait_for(lambda: len(pool._idle) == 2)
        dead = pool._idle[0]
        dead.exited = True
        handed = pool.acquire()
        assert handed is not dead and not handed.exited
        assert dead.closed


def test_three_failed_starts_in_a_row_fail_acquire_with_the_cause():
    starts = Starts(seconds=0.0, fail=True)
    with _running(starts, size=4, starting=2) as pool:
        with pytest.raises(ChildStartError, match="fail to start.*out of memory"):
            pool.acquire()
        assert sum(c.closed for c in starts.children) >= 3  # each failed start is cleaned up


def test_without_a_pool_acquire_starts_a_process_and_waits_for_it():
    starts = Starts(seconds=0.0)
    pool = CandidatePool(starts.spawn, size=0, starting=1)
    child = pool.acquire()
    assert starts.spawned == 1 and child is starts.children[0]
    starts.fail = True
    with pytest.raises(ChildStartError, match="fail to start"):
        pool.acquire()
    assert starts.spawned == 4  # three tries


def test_closing_the_pool_closes_its_ready_processes_and_wakes_waiters():
    starts = Starts(seconds=0.0)
    pool = CandidatePool(starts.spawn, size=3, starting=2)
    _wait_for(lambda: len(pool._idle) == 3)
    idle = list(pool._idle)
    pool.close()
    assert all(c.closed for c in idle)
    with pytest.raises(ChildStartError, match="shutting down"):
        pool.acquire()


def test_closing_the_pool_wakes_an_evaluation_waiting_for_a_process():
    starts = Starts(seconds=30.0)  # nothing becomes ready during the test
    pool = CandidatePool(starts.spawn, size=1, starting=1)
    errors = []
    waiter = threading.Thread(target=lambda: _catch(pool.acquire, errors))
    waiter.start()
    time.sleep(0.2)
    closed = time.monotonic()
    pool.close()
    waiter.join(5)
    assert isinstance(errors[0], ChildStartError) and time.monotonic() - closed < 0.3


def _catch(call, errors):
    try:
        call()
    except Exception as exc:  # noqa: BLE001
        errors.append(exc)


def test_waiting_evaluations_get_processes_in_arrival_order():
    starts = Starts(seconds=0.15)
    with _running(starts, size=1, starting=1) as pool:
        _wait_for(lambda: len(pool._idle) == 1)
        pool.acquire()  # the pool is empty now: the next ones wait
        order = []
        threads = []
        for name in range(4):
            threads.append(threading.Thread(target=lambda n=name: order.append((n, pool.acquire()))))
            threads[-1].start()
            time.sleep(0.03)  # arrival order 0, 1, 2, 3
        for thread in threads:
            thread.join(10)
        assert [n for n, _ in order] == [0, 1, 2, 3]


def test_start_failures_before_an_evaluation_began_waiting_do_not_fail_it():
    starts = Starts(seconds=0.0, fail=True)
    with _running(starts, size=2, starting=2) as pool:
        _wait_for(lambda: pool._failed >= 3)  # a burst of failures (say, the GPU briefly out of memory)
        starts.fail = False  # the next start succeeds
        child = pool.acquire()
        assert not child.fails


def test_a_fill_thread_survives_an_unexpected_error_in_spawn(monkeypatch):
    monkeypatch.setattr(CandidatePool, "backoff_s", 0.01)
    starts = Starts(seconds=0.0, fail="raise")
    with _running(starts, size=1, starting=1) as pool:
        with pytest.raises(ChildStartError, match="RuntimeError: a bug in spawn"):
            pool.acquire()
        starts.fail = False
        assert pool.acquire() is not None  # the same thread goes on filling


def test_a_cancelled_evaluation_stops_waiting():
    starts = Starts(seconds=30.0)
    with _running(starts, size=1, starting=1) as pool:
        with pytest.raises(TimeoutError, match="cancelled"):
            pool.acquire(cancelled=lambda: True)


def test_processes_ahead_of_demand_start_only_while_spare_ok_says_the_gpu_has_room():
    starts, room = Starts(seconds=0.0), threading.Event()
    pool = CandidatePool(starts.spawn, size=4, starting=2, spare_ok=room.is_set)
    pool.spare_poll_s = 0.02
    try:
        time.sleep(0.3)
        assert starts.spawned == 0
        room.set()
        deadline = time.monotonic() + 5
        while starts.spawned < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert starts.spawned == 4
    finally:
        pool.close()


def test_an_evaluation_waiting_for_a_process_gets_one_even_without_room_for_spares():
    # Held back spares must never hold back work that is admitted (it would wait on itself).
    starts = Starts(seconds=0.0)
    pool = CandidatePool(starts.spawn, size=4, starting=2, spare_ok=lambda: False)
    pool.spare_poll_s = 0.02
    try:
        child = pool.acquire()
        assert child in starts.children
        time.sleep(0.2)
        assert starts.spawned == 1  # no spare started after it
    finally:
        pool.close()


def test_shedding_closes_the_idle_processes_and_not_those_in_use():
    starts = Starts(seconds=0.0)
    room = threading.Event()
    room.set()
    pool = CandidatePool(starts.spawn, size=3, starting=3, reusable=True, spare_ok=room.is_set)
    pool.spare_poll_s = 0.02
    try:
        in_use = pool.acquire()
        deadline = time.monotonic() + 5
        while (starts.spawned < 3 or starts.now) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # the last one ready and put with the idle
        room.clear()  # memory is wanted: the shed ones are not replaced
        assert pool.shed_idle() == 2
        assert not in_use.closed and sum(child.closed for child in starts.children) == 2
        time.sleep(0.2)
        assert starts.spawned == 3
        pool.release(in_use)
        assert pool.acquire() is in_use  # given back, kept
    finally:
        pool.close()
