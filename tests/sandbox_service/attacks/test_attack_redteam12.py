"""Red team 12: the lane giving back its idle processes' GPU memory while an evaluation waits for memory (0e99a84:
`Lane.relieve_memory` called before every poll of `FreeMemory._wait`, `CandidatePool.shed_idle`,
`ServiceProcess.request_if_idle` with the judges' `trim`, spare starts only while `FreeMemory.has_room`). Each test
asserts the secure behaviour, so each FAILS while its flaw is there. Everything runs on the CPU: the pool with
stand-in children (as tests/sandbox_service/worker/test_pool.py does), the judges on the interpreter lane.

- FINDING shed-closes-a-process-an-acquire-is-owed: `shed_idle` closed every process in the pool's idle queue,
  including one that a waiting `acquire()` was about to take: an executor another evaluation had just released,
  or the start a waiting call had demanded (the commit's own rule: "a start an acquire() waits for is never held
  back"), between the moment it was put with the idle and the waiting call's turn on the pool's lock. Any
  evaluation waiting for memory sheds every 0.5 s, so on a lane short of memory (the only time it sheds) with
  every executor in use, an evaluation queued for the next one released lost it and waited for a fresh CUDA
  context instead (behind up to `starting` others in the driver), and the context closed was the one it would
  have used: memory given back only to be taken again at once. Not a verdict (a shed process is no failed start,
  and `_last_ready` keeps the 300 s bound from firing), a delay. Shown by holding the pool's lock across the
  release and the shed, which is the interleaving the race needs.
  Fix (worker/pool.py): `shed_idle` leaves as many idle processes as there are waiting `acquire()` calls (the
  first ones, which those calls take in turn); only processes kept ahead of demand are closed.

- FINDING trim-inside-a-timing-hold (GPU, argued; shown with the gate): every request a judge gets that can touch
  the GPU goes through the timing gate's shared side (JudgeLink._call, compare_together; the reference's own
  timing inside the timed evaluation's exclusive hold), so that "a timing phase has the GPU alone" holds for the
  lane's trusted processes. `relieve_memory` sent `trim` with `request_if_idle`, which takes the judge's lock and
  not the gate: judges freed their kept expected outputs and emptied torch's cache (cudaFree of up to 4 GB a judge;
  the driver clears freed memory on the GPU) while another evaluation's batch, its empty batch or its reference
  (whose time is kept per task for every later candidate) was being timed. Any evaluation that waits for memory
  triggers it, at most every 5 s. The effect on a timed kernel is not measured here (no GPU for the red team).
  Fix (lane.py, worker/pool.py): trims are sent only with the gate's shared side entered without waiting
  (`TimingGate.shared_if_free`); during a hold, or while a timing waits for the gate, they are put off to a later
  poll (the interval is not spent). Open: the executors `shed_idle` closes during a hold are torn down by the driver
  then too (as executors discarded by failed evaluations always were, and contexts are made during holds by design).

Ideas that failed (what was checked and found sound):
- a trim making the judge compare against other outputs than the reference's for the trial: the executor design's
  trials and timing checks carry their own seeds and never read the kept outputs; the in-process design's trials
  are recomputed from the prepared seed (`problem.seeds[trial]`, `harness.trial_inputs` seeds every RNG first), as
  large problems' always were; the reference's kept timings survive a trim; a trim evicts no task.
- a trim or shed racing a hand-out: `acquire`, `release`, `discard` and `shed_idle` change the idle queue under one
  lock, and only idle processes are closed (a handed-out executor is never in it); a trim takes the judge's lock
  without waiting, so it never runs inside another request (a compare, an IPC read, the reference's timing) and a
  busy judge is skipped; a trim that times out restarts the judge, which the next request re-prepares and checks.
- deadlocks: `relieve` runs without FreeMemory's lock; `spare_ok` runs without the pool's; `request_if_idle` never
  waits for a judge's lock; no caller of `FreeMemory._wait` holds a judge's lock, a pool's lock or the gate.
- the `waiting` counter: raised once per wait, lowered in `finally` under the lock on every exit (found, short,
  cancelled, relieve raising); spares held back never hold back a demanded start, so a waiting evaluation waits on
  no spare, and a pool held back polls and refills once the wait ends: it does not shrink for good.
- a candidate making waits at will: an admission wait needs the device short (the executor's allocations are capped
  at twice its share, red team 10); a judge out of memory on a candidate's outsized hand-over (up to 8 times the
  reference's outputs) is still load (red team 6's open item), and now also makes the lane shed and trim while it
  waits: fewer warm executors for up to FREE_MEMORY_WAIT_S, a slower lane, no verdict changed.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from sandbox_service.worker.pool import CandidatePool


class _Child:
    """A stand-in process that is ready as soon as it is asked."""

    def __init__(self):
        self.spec = SimpleNamespace(role="executor")
        self.exited = False
        self.closed = False
        self.ready_after_s = 0.0
        self.started_at = time.monotonic()

    def receive(self, timeout=None):
        return {"type": "ready"}

    def describe_exit(self, wait_s=2.0):
        return "exited"

    def output(self):
        return ""

    def close(self, wait=True):
        self.closed = True


def _wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_shedding_leaves_a_waiting_evaluation_the_executor_released_for_it():
    # FINDING shed-closes-a-process-an-acquire-is-owed. Every executor is in use (size 1) and memory is short (no
    # spares); evaluation B waits for the next executor; evaluation A releases its own; an evaluation waiting for
    # memory sheds just before B's turn.
    children: list[_Child] = []

    def spawn() -> _Child:
        children.append(_Child())
        return children[-1]

    pool = CandidatePool(spawn, size=1, starting=1, reusable=True, spare_ok=lambda: False)
    pool.spare_poll_s = 0.02
    try:
        released = pool.acquire()
        got: list[_Child] = []
        waiter = threading.Thread(target=lambda: got.append(pool.acquire()), daemon=True)
        waiter.start()
        _wait_until(lambda: len(pool._waiting) == 1)
        with pool._cond:  # the interleaving: released, then shed, before the waiting call has its turn
            pool.release(released)
            shed = pool.shed_idle()
        waiter.join(10)
        assert got == [released] and not released.closed, \
            "the executor released for the waiting evaluation was closed; it waited for a fresh one"
        assert shed == 0 and len(children) == 1
    finally:
        pool.close()


def test_shedding_still_closes_the_processes_nobody_waits_for():
    # The fix keeps only what waiting calls are owed: the rest of the idle still goes.
    children: list[_Child] = []

    def spawn() -> _Child:
        children.append(_Child())
        return children[-1]

    room = threading.Event()
    room.set()
    pool = CandidatePool(spawn, size=3, starting=3, reusable=True, spare_ok=room.is_set)
    pool.spare_poll_s = 0.02
    try:
        _wait_until(lambda: pool.idle == 3)
        room.clear()
        assert pool.shed_idle() == 3 and all(child.closed for child in children)
    finally:
        pool.close()


def _trims(lane) -> int:
    with lane.judges[0].lock:
        return lane.judges[0].request({"op": "stats"}, 60)["counts"].get("trims", 0)


def test_the_judges_are_not_trimmed_while_an_evaluation_is_timed(cpu_lane, monkeypatch):
    # FINDING trim-inside-a-timing-hold. An evaluation holds the GPU for its timing (the gate's exclusive side);
    # another one, waiting for memory, asks the lane to give back what its idle processes hold.
    before = _trims(cpu_lane)  # the judge is running
    monkeypatch.setattr(cpu_lane, "_judges_trimmed", float("-inf"))
    with cpu_lane.gate.exclusive():
        cpu_lane.relieve_memory()
        during = _trims(cpu_lane)
    assert during == before, "a judge was trimmed (GPU work outside the gate) while an evaluation was timed"
    cpu_lane.relieve_memory()  # put off, not skipped for the interval: the next poll after the hold trims
    assert _trims(cpu_lane) == before + 1


def test_a_timing_waits_for_a_trim_already_running_and_none_starts_while_it_waits():
    # The other half of the trim fix: a hold that begins while judges are being trimmed waits for them (housekeeping
    # is waited for, unlike a judge's turn, whose judge is frozen instead), and a trim asked for while a timing waits
    # for the gate is put off.
    from sandbox_service.worker.pool import TimingGate

    gate = TimingGate()
    held, done = threading.Event(), threading.Event()

    def timed() -> None:
        with gate.exclusive():
            held.set()
            done.wait(5)

    with gate.shared_if_free() as free:
        assert free
        timing = threading.Thread(target=timed, daemon=True)
        timing.start()
        time.sleep(0.1)
        assert not held.is_set()  # waits for the trim
        with gate.shared_if_free() as again:
            assert not again  # a timing waits: no new trim
    held.wait(5)
    assert held.is_set()
    with gate.shared_if_free() as during:
        assert not during  # and none while the timing holds the GPU
    done.set()
    timing.join(5)
