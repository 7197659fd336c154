"""Per-lane resources shared by concurrent evaluations: ready candidate processes, the GPU timing gate
with its freezer, the GPU memory budget and the device's free memory.

Candidate processes are forked ahead of need (their CUDA context is made while they wait) and handed
out once: after its one evaluation a process is killed with its process group, so nothing a candidate
leaves behind (patched modules, a corrupted CUDA context, threads) can reach another one.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator

from sandbox_service.devices import DeviceMemory
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

    Processes that hold GPU memory (a CUDA context each) are started ahead of demand only while `spare_ok()`
    says the GPU has room, and `shed_idle()` closes those not in use: on an H100 running full-size level 1,
    32 idle executors held 19 GB that the largest tasks waited for (benchmarks/RESULTS.md). A start an
    `acquire()` is waiting for is never held back.
    """

    backoff_s = 0.2  # after a failed start a fill thread waits this long, doubled per failure in a row (to 5 s)
    spare_poll_s = 0.5  # how often a fill thread held back by `spare_ok` asks again

    def __init__(self, spawn: Callable[[], Child], size: int, starting: int, reusable: bool = False,
                 spare_ok: Callable[[], bool] = lambda: True):
        self._spawn = spawn
        self._spare_ok = spare_ok  # called without the pool's lock held
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
                while not self._closed and self._full():
                    self._cond.wait()
                if self._closed:
                    return
                demanded = len(self._waiting) > len(self._idle) + self._starting
            if not demanded and not self._spare_ok():
                with self._cond:
                    self._cond.wait(timeout=self.spare_poll_s)
                continue
            with self._cond:
                if self._closed or self._full():
                    continue
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

    def _full(self) -> bool:
        """Whether the pool holds `size` processes, ready, starting or (reusable ones) in use. Call with the lock."""
        return len(self._idle) + self._starting + self._in_use >= self.size

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
            self._cond.notify_all()  # a fill thread held back by `spare_ok` starts one for this call
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

    @property
    def idle(self) -> int:
        """Processes ready and not in use."""
        return len(self._idle)

    def shed_idle(self) -> int:
        """Close every process not in use and not owed to a waiting `acquire()` (their GPU memory is wanted); how
        many. A process ready while an `acquire()` waits for it is that call's (the first ones, taken in turn), not
        one kept ahead of demand: closing it between its start and the waiting call's turn made the call wait
        for another start (red team 12)."""
        with self._cond:
            owed = min(len(self._idle), len(self._waiting))
            idle = list(self._idle)
            self._idle, idle = collections.deque(idle[:owed]), idle[owed:]
            self._cond.notify_all()
        for child in idle:
            child.close(wait=False)
        return len(idle)

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
    """The lane's processes that share its GPU; all but the timed evaluation's are frozen (SIGSTOP) while it is timed.

    Freezing is what makes "timing takes the GPU alone" hold against code that ignores the rules: a
    stopped process cannot launch GPU work. The untrusted processes are registered alone; a trusted service's
    (a judge's) with the service as its `owner`, so that the timed evaluation keeps its own judge running
    whichever process serves it (one started during the hold included). Time spent frozen is added to each
    evaluation's deadline and to the wait for a frozen judge's answer.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._children: dict[Child, object] = {}  # child -> its owner (None: an untrusted process)
        self._frozen = False
        self._kept: tuple[object, ...] = ()
        self._stopped: list[Child] = []  # what this hold froze, each thawed once at its end
        self._frozen_since = 0.0
        self._frozen_total = 0.0
        # Seconds of holds that kept each process (or owner) running: not frozen time for it (frozen_seconds).
        self._kept_total: dict[object, float] = {}

    def register(self, child: Child, owner: object = None) -> None:
        with self._lock:
            self._children[child] = owner
            if self._frozen and not self._is_kept(child, owner):
                child.freeze()
                self._stopped.append(child)

    def unregister(self, child: Child) -> None:
        with self._lock:
            self._children.pop(child, None)
            self._kept_total.pop(child, None)

    def _is_kept(self, child: Child, owner: object) -> bool:
        return any(kept is child or (owner is not None and kept is owner) for kept in self._kept)

    @contextlib.contextmanager
    def others_frozen(self, keep: Child | None, keep_owner: object = None) -> Iterator[None]:
        """Everything registered frozen but `keep` and the processes of `keep_owner`."""
        with self._lock:
            self._frozen = True
            self._kept = tuple(kept for kept in (keep, keep_owner) if kept is not None)
            self._frozen_since = time.monotonic()
            for child, owner in self._children.items():
                if not self._is_kept(child, owner):
                    child.freeze()
                    self._stopped.append(child)
        try:
            yield
        finally:
            with self._lock:
                held = time.monotonic() - self._frozen_since
                for kept in self._kept:
                    self._kept_total[kept] = self._kept_total.get(kept, 0.0) + held
                self._frozen = False
                self._kept = ()
                self._frozen_total += held
                stopped, self._stopped = self._stopped, []
                for child in stopped:
                    child.thaw()

    def frozen_seconds(self, of: object = None) -> float:
        """Total time processes of this lane spent frozen so far (a clock that runs only while frozen); `of` (a
        process or an owner): the time it spent frozen, without the holds that kept it running (its own timing:
        a deadline or a request that counted those as frozen would stand still while it holds the GPU)."""
        with self._lock:
            now = time.monotonic()
            total = self._frozen_total + (now - self._frozen_since if self._frozen else 0.0)
            if of is not None:
                total -= self._kept_total.get(of, 0.0)
                if self._frozen and any(kept is of for kept in self._kept):
                    total -= now - self._frozen_since
            return total


class TimingGate:
    """Per-GPU gate between the judges' turns and timing: a turn starts only while no timing holds or waits for
    the GPU, and timings hold it one at a time (writers first, so timing is not starved under load).

    A timing does not wait for the turns already in flight: their judges are frozen for the hold instead
    (Lane.gpu_alone). Waiting for them to finish, with every new turn kept out meanwhile, idled the lane's
    judges for most of each timed evaluation on an H100 (58 ms of waiting for an 11 ms hold, the judges' work of
    a timed evaluation 3x an untimed one's: benchmarks/RESULTS.md). Two kinds of work are waited for, because
    freezing stops launches and not GPU work already queued: housekeeping (`shared_if_free`: the judges giving
    back memory, which the driver clears on the GPU; red team 12), and, for a timing that `drain`s, every turn
    in flight: one that measures a figure kept for later candidates (the reference's, red team 14).
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._writer = False
        self._writers_waiting = 0
        self._housekeeping = 0
        self._turns = 0  # in flight: their judge held, their requests sent or about to be

    @contextlib.contextmanager
    def turn(self, judge_lock: threading.Lock) -> Iterator[None]:
        """A judge's turn: begun while no timing holds or waits for the gate, with `judge_lock` held throughout
        and counted in flight once it is taken (a turn whose judge was busy waits again for the timings that came
        meanwhile: it holds nothing they need, since a timing takes its own judge's lock before the gate)."""
        with self._cond:
            self._cond.wait_for(self._no_timing)
        with judge_lock:
            with self._cond:
                self._cond.wait_for(self._no_timing)
                self._turns += 1
            try:
                yield
            finally:
                with self._cond:
                    self._turns -= 1
                    self._cond.notify_all()

    def _no_timing(self) -> bool:
        """No timing holds or waits for the gate (call with the condition held)."""
        return not (self._writer or self._writers_waiting)

    @contextlib.contextmanager
    def shared_if_free(self) -> Iterator[bool]:
        """Whether no timing holds or waits for the GPU now, without waiting (for housekeeping that may be put
        off, Lane.relieve_memory)."""
        with self._cond:
            free = self._no_timing()
            if free:
                self._housekeeping += 1
        try:
            yield free
        finally:
            if free:
                with self._cond:
                    self._housekeeping -= 1
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self, drain: bool = False) -> Iterator[None]:
        """The GPU to one timing; `drain`: once the judges' turns in flight have ended, too."""
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._housekeeping or (drain and self._turns):
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


def gigabytes(nbytes: int) -> str:
    return f"{nbytes / 1e9:.1f} GB"


@dataclasses.dataclass(frozen=True)
class MemoryWait:
    """One wait for free device memory: how long, for how much, and what was free when it began (None: the
    device could not be read, so nothing was waited for)."""

    seconds: float
    needed: int
    free: int | None
    # Started alone below `needed` with this much free (FreeMemory.settle_s); None: `needed` was free.
    started_with: int | None = None

    def describe(self) -> str:
        if self.free is None:
            return "the GPU's free memory could not be read"
        if self.started_with is not None:
            return (f"{self.seconds:.1f} s, then started alone with {gigabytes(self.started_with)} free, below the "
                    f"{gigabytes(self.needed)} it waited for (no more came free; {gigabytes(self.free)} at first)")
        return (f"{self.seconds:.1f} s until {gigabytes(self.needed)} was free on the GPU "
                f"({gigabytes(self.free)} at first)")


class MemoryShort(Exception):
    """The device did not have the memory free within the wait's bound."""

    def __init__(self, needed: int, memory: DeviceMemory, waited_s: float):
        if needed > memory.total:
            reason = f"the GPU has {gigabytes(memory.total)} in all, less than the {gigabytes(needed)} needed"
        else:
            reason = (f"the GPU did not have {gigabytes(needed)} free for {waited_s:.0f} s ({gigabytes(memory.free)} "
                      f"free of {gigabytes(memory.total)} at last): other processes on it hold the memory")
        super().__init__(reason)
        self.needed = needed


class FreeMemory:
    """What the GPU has free now, as a condition for starting work on it.

    The lane's budget (MemoryBudget) counts the lane's own reservations against a size taken once; other
    processes on the GPU (trainers, another server) take and give back memory as they go, and when the budget was
    all there was, evaluations beside them ran out of memory (the learning run, docs/sandbox.md). So an
    evaluation also waits, before its executor starts, until the device has its estimate and `margin` free
    beyond what this lane's running evaluations were admitted with (`admitted`): those may not have allocated
    theirs yet, and counting what they did allocate twice is the safe side. Waits poll the device (no process
    says when it frees memory), are cancellable and end after `wait_s` with MemoryShort. `read` None (the
    interpreter, or no NVML): no condition.
    """

    poll_s = 0.5
    # Work that would run alone (nothing else of the lane admitted) and has its minimum free starts once the free
    # reading has not risen for this long: the estimate is an upper bound (L1/47 used 28.6 of its 52 GB), and
    # what the lane's idle processes hold beyond what `relieve` gives back (the judges' contexts, a busy judge's
    # cache) never comes back while it waits; before either, the largest full-size tasks waited out `wait_s`.
    settle_s = 10.0

    def __init__(self, read: Callable[[], DeviceMemory | None] | None, margin: int, wait_s: float,
                 relieve: Callable[[], None] = lambda: None):
        self.watching = read is not None
        self.read: Callable[[], DeviceMemory | None] = read or (lambda: None)
        self.margin = margin
        self.wait_s = wait_s
        # Called (without the lock) before every poll of a wait: the lane gives back what its idle processes
        # hold (Lane.relieve_memory), memory that would otherwise never come free while work waits for it.
        self.relieve = relieve
        self.waiting = 0  # waits in progress
        self._admitted = 0
        self._cond = threading.Condition()

    def has_room(self, nbytes: int) -> bool:
        """Whether `nbytes` more can be taken now without taking what admitted or waiting work is owed: for
        processes started ahead of demand (CandidatePool's `spare_ok`). Reads without the lock."""
        if self.waiting:
            return False
        memory = self.read()
        return memory is None or memory.free >= self._owed(nbytes)

    def _owed(self, nbytes: int) -> int:
        """What the device must have free for `nbytes` more: the admitted work's and the margin beside it."""
        return self._admitted + nbytes + self.margin

    @contextlib.contextmanager
    def admitted(self, nbytes: int, cancelled: Callable[[], bool] = lambda: False,
                 minimum: int | None = None) -> Iterator[MemoryWait]:
        """Held while the work runs: entered once the device has `nbytes` and the margin free beyond the other
        admitted work, or, with nothing else admitted, `minimum` and the margin free and no more coming
        (settle_s)."""
        def alone() -> int | None:
            return None if minimum is None or self._admitted else minimum + self.margin

        with self._cond:
            wait = self._wait(lambda: self._owed(nbytes), cancelled, alone)
            self._admitted += nbytes
        try:
            yield wait
        finally:
            with self._cond:
                self._admitted -= nbytes
                self._cond.notify_all()

    def wait_free(self, nbytes: int, cancelled: Callable[[], bool] = lambda: False) -> MemoryWait:
        """Until the device has `nbytes` and the margin free: for a process that holds the rest of what it needs
        and was refused `nbytes` (a judge out of memory)."""
        memory = self.read()
        if memory is not None and nbytes + self.margin > memory.total:
            raise MemoryShort(nbytes + self.margin, memory, 0.0)  # never: no use waiting
        with self._cond:
            return self._wait(lambda: nbytes + self.margin, cancelled)

    def _wait(self, needed: Callable[[], int], cancelled: Callable[[], bool],
              alone: Callable[[], int | None] = lambda: None) -> MemoryWait:
        """Called with the lock held (released while it waits). `alone()`: what suffices instead of `needed()`
        once the free reading has settled (None: nothing does)."""
        started = time.monotonic()
        first: DeviceMemory | None = None  # when the wait began
        most, rose = -1, started  # the most seen free, and when the reading last rose above it
        try:
            while True:
                memory = self.read()
                now = time.monotonic()
                waited = now - started
                if memory is None or memory.free >= needed():
                    if first is not None:
                        log.info("GPU memory: %s free after %.1f s", gigabytes(needed()), waited)
                    seen = first or memory
                    return MemoryWait(waited, needed(), None if seen is None else seen.free)
                if memory.free > most:
                    most, rose = memory.free, now
                least = alone()
                if least is not None and memory.free >= least and now - rose >= self.settle_s:
                    log.warning("GPU memory: starting alone with %s free, below the %s needed (nothing freed for "
                                "%.0f s)", gigabytes(memory.free), gigabytes(needed()), now - rose)
                    return MemoryWait(waited, needed(), (first or memory).free, started_with=memory.free)
                if waited >= self.wait_s:
                    raise MemoryShort(needed(), memory, waited)
                if cancelled():
                    raise TimeoutError("cancelled while waiting for free GPU memory")
                if first is None:
                    first = memory
                    self.waiting += 1
                    log.warning("waiting for GPU memory: %s needed, %s free of %s", gigabytes(needed()),
                                gigabytes(memory.free), gigabytes(memory.total))
                self._cond.release()
                try:
                    self.relieve()
                except Exception:  # noqa: BLE001 - giving memory back is best effort; the wait goes on regardless
                    log.exception("giving back the lane's idle GPU memory failed")
                finally:
                    self._cond.acquire()
                self._cond.wait(timeout=self.poll_s)
        finally:
            if first is not None:
                self.waiting -= 1
