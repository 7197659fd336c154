"""Per-lane resources shared by concurrent evaluations: ready candidate processes, the GPU timing gate
with its freezer, and the GPU memory budget.

Candidate processes are forked ahead of need (their CUDA context is made while they wait) and handed
out once: after its one evaluation a process is killed with its process group, so nothing a candidate
leaves behind (patched modules, a corrupted CUDA context, threads) can reach another one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

from sandbox_service.worker.process import Child
from sandbox_service.worker.zygote import ChildStartError, wait_ready

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 300.0


class CandidatePool:
    """Keeps `size` freshly forked, not yet used processes; `acquire()` hands one out (forking if none)."""

    def __init__(self, spawn: Callable[[], Child], size: int):
        self._spawn = spawn
        self.size = size
        self._idle: list[Child] = []
        self._cond = threading.Condition()
        self._closed = False
        if size > 0:
            threading.Thread(target=self._fill, name="candidate-pool", daemon=True).start()

    def _fill(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while not self._closed and len(self._idle) >= self.size:
                    self._cond.wait()
                if self._closed:
                    return
            try:
                child = self._spawn()
                failures = 0
            except (ChildStartError, OSError) as exc:
                failures += 1
                log.error("could not fork a candidate process: %s", exc)
                time.sleep(min(5.0, 0.2 * 2**failures))
                continue
            with self._cond:
                if self._closed:
                    child.close()
                    return
                self._idle.append(child)
                self._cond.notify_all()

    def acquire(self) -> Child:
        """A process that reported ready; ChildStartError naming the cause after three failed tries."""
        errors = []
        for _ in range(3):
            with self._cond:
                child = self._idle.pop(0) if self._idle else None
                self._cond.notify_all()
            if child is None:
                child = self._spawn()
            try:
                wait_ready(child, READY_TIMEOUT_S)
                return child
            except ChildStartError as exc:
                errors.append(str(exc))
                child.close()
        raise ChildStartError("candidate processes fail to start: " + " | ".join(errors)[-2000:])

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
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
