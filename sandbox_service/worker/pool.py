"""Per-lane resources shared by concurrent evaluations: ready candidate processes, the GPU timing gate
with its freezer, and the GPU memory budget.

Candidate processes are forked ahead of need (their CUDA context is made while they wait) and handed
out once: after its one evaluation a process is killed with its process group, so nothing a candidate
leaves behind (patched modules, a corrupted CUDA context, threads) can reach another one.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator

from sandbox_service.worker.process import Child
from sandbox_service.worker.zygote import ChildStartError, wait_ready

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 300.0


class CandidatePool:
    """Keeps `size` freshly forked, ready (context made), not yet used processes; `acquire()` hands one out.

    At most `starting` of them make their CUDA context at once. The driver creates contexts one at a time
    for the whole GPU, and every driver call of a running evaluation (a first kernel launch, an allocation)
    queues behind the contexts being made: with 32 processes starting at once an evaluation's call waited
    for up to 32 context creations. A short queue keeps evaluations fast while contexts are still made as
    fast as the driver allows (benchmarks/cuda_context_churn.py; docs/sandbox.md, "CUDA contexts").
    Waiting evaluations are served in arrival order; one fails only when the pool makes no process ready
    for READY_TIMEOUT_S, or when three starts in a row failed after it began waiting.
    With `size` 0 there is no pool: `acquire()` forks a process and waits for it.
    """

    backoff_s = 0.2  # after a failed start a fill thread waits this long, doubled per failure in a row (to 5 s)

    def __init__(self, spawn: Callable[[], Child], size: int, starting: int, reusable: bool = False):
        self._spawn = spawn
        self.size = size
        # Reusable processes (executors) come back with `release` or leave with `discard`: then `size` bounds
        # the processes in use too, so that one given back is kept rather than replaced by a fresh one.
        self.reusable = reusable
        self._in_use = 0
        self._idle: collections.deque[Child] = collections.deque()
        self._starting = 0
        self._waiting: collections.deque[int] = collections.deque()  # tickets of acquire() calls, in arrival order
        self._tickets = itertools.count()
        self._failed = 0  # failed starts, ever
        self._failed_in_a_row = 0
        self._errors: collections.deque[str] = collections.deque(maxlen=3)
        self._last_ready = time.monotonic()
        self._cond = threading.Condition()
        self._closed = False
        for index in range(min(max(1, starting), size)):
            threading.Thread(target=self._fill, name=f"candidate-pool-{index}", daemon=True).start()

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and len(self._idle) + self._starting + self._in_use >= self.size:
                    self._cond.wait()
                if self._closed:
                    return
                self._starting += 1
            child, error = self._start()
            with self._cond:
                self._starting -= 1
                closed = self._closed
                if child is not None and not closed:
                    self._idle.append(child)
                    self._failed_in_a_row = 0
                    self._last_ready = time.monotonic()
                elif error is not None:
                    self._failed += 1
                    self._failed_in_a_row += 1
                    self._errors.append(error)
                in_a_row = self._failed_in_a_row
                self._cond.notify_all()
            if child is not None and closed:  # ready after the pool closed
                child.close()
            if error is not None and not closed:
                log.error("could not start a candidate process: %s", error)
                time.sleep(min(5.0, self.backoff_s * 2 ** min(in_a_row, 5)))

    def _start(self) -> tuple[Child | None, str | None]:
        """A ready child, or why there is none (never raises: a fill thread must not die)."""
        try:
            child = self._spawn()
        except Exception as exc:  # noqa: BLE001 - ChildStartError, OSError, or a bug: reported, not fatal
            return None, str(exc) if isinstance(exc, ChildStartError) else f"{type(exc).__name__}: {exc}"
        try:
            wait_ready(child, READY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            child.close()
            return None, str(exc)
        return child, None

    def acquire(self, cancelled: Callable[[], bool] = lambda: False) -> Child:
        """A process that reported ready, to the callers in arrival order. ChildStartError naming the cause
        when three starts in a row failed since this call began, or none became ready for READY_TIMEOUT_S;
        TimeoutError once `cancelled()`."""
        if self.size == 0:
            return self._acquire_unpooled()
        with self._cond:
            ticket = next(self._tickets)
            self._waiting.append(ticket)
            failed_before, began = self._failed, time.monotonic()
            try:
                while True:
                    if self._closed:
                        raise ChildStartError("the sandbox is shutting down")
                    while self._idle and self._waiting[0] == ticket:
                        child = self._idle.popleft()
                        if not child.exited:
                            self._in_use += int(self.reusable)
                            return child
                        child.close(wait=False)  # died while it waited (killed from outside): take the next
                    if self._failed - failed_before >= 3 and self._failed_in_a_row >= 3:
                        raise ChildStartError("candidate processes fail to start: " + " | ".join(self._errors)[-2000:])
                    if time.monotonic() - max(began, self._last_ready) > READY_TIMEOUT_S:
                        raise ChildStartError(f"no candidate process became ready for {READY_TIMEOUT_S:.0f} s "
                                              "(overloaded machine?)")
                    if cancelled():
                        raise TimeoutError("cancelled while waiting for a candidate process")
                    self._cond.wait(timeout=0.5)
            finally:
                self._waiting.remove(ticket)
                self._cond.notify_all()

    def release(self, child: Child) -> None:
        """A reusable process back for another evaluation (first in line: its caches are warm)."""
        if self.size == 0 or not self.reusable:
            child.close(wait=False)
            return
        with self._cond:
            self._in_use -= 1
            if not self._closed and not child.exited:
                self._idle.appendleft(child)
                self._cond.notify_all()
                return
            self._cond.notify_all()
        child.close(wait=False)

    def discard(self, child: Child) -> None:
        """A reusable process that must not serve again; the pool starts another in its place."""
        if self.size == 0 or not self.reusable:
            child.close(wait=False)
            return
        with self._cond:
            self._in_use -= 1
            self._cond.notify_all()
        child.close(wait=False)

    def _acquire_unpooled(self) -> Child:
        errors = []
        for _ in range(3):
            child, error = self._start()
            if child is not None:
                return child
            errors.append(error)
        raise ChildStartError("candidate processes fail to start: " + " | ".join(errors)[-2000:])

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = list(self._idle), collections.deque()
            self._cond.notify_all()
        for child in idle:
            child.close()


class Freezer:
    """The lane's untrusted processes; all but one are frozen (SIGSTOP) while that one is timed.

    Freezing is what makes "timing takes the GPU alone" hold against code that ignores the rules: a
    stopped process cannot launch GPU work. Time spent frozen is added to each evaluation's deadline.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._children: set[Child] = set()
        self._frozen = False
        self._frozen_since = 0.0
        self._frozen_total = 0.0

    def register(self, child: Child) -> None:
        with self._lock:
            self._children.add(child)
            if self._frozen:
                child.freeze()

    def unregister(self, child: Child) -> None:
        with self._lock:
            self._children.discard(child)

    @contextlib.contextmanager
    def others_frozen(self, keep: Child | None) -> Iterator[None]:
        with self._lock:
            self._frozen = True
            self._frozen_since = time.monotonic()
            for child in self._children:
                if child is not keep:
                    child.freeze()
        try:
            yield
        finally:
            with self._lock:
                self._frozen = False
                self._frozen_total += time.monotonic() - self._frozen_since
                for child in self._children:
                    child.thaw()

    def frozen_seconds(self) -> float:
        """Total time processes of this lane spent frozen so far (a clock that runs only while frozen)."""
        with self._lock:
            return self._frozen_total + (time.monotonic() - self._frozen_since if self._frozen else 0.0)


class TimingGate:
    """Per-GPU reader/writer lock: the judge's GPU work shares the GPU, a timing phase has it alone.

    Writers (timing) take precedence over new readers, so timing is not starved under load.
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class MemoryBudget:
    """GPU memory for concurrent evaluations: each reserves an estimate before its candidate starts.

    An estimate larger than the whole budget is clamped to it, so such an evaluation runs alone rather
    than never. Waiting here is not charged to the evaluation's time limit.
    """

    def __init__(self, total_bytes: int):
        self.total = max(1, total_bytes)
        self._used = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def reserve(self, nbytes: int, cancelled: Callable[[], bool] = lambda: False) -> Iterator[float]:
        nbytes = min(max(0, nbytes), self.total)
        started = time.monotonic()
        with self._cond:
            while self._used + nbytes > self.total:
                if cancelled():
                    raise TimeoutError("cancelled while waiting for GPU memory")
                self._cond.wait(timeout=0.2)
            self._used += nbytes
        try:
            yield time.monotonic() - started
        finally:
            with self._cond:
                self._used -= nbytes
                self._cond.notify_all()
