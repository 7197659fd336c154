"""Bounded queue of work (evaluations, validations, Inductor compilations) feeding one lane per GPU (or one CPU lane).

Each lane runs up to `workers_per_lane` jobs at once: their compilation and correctness phases overlap
up to the machine's cores, while timing takes the lane's GPU alone (TimingGate, with every other
process of the lane frozen). A full queue refuses new work (backpressure); a job whose caller has gone
is cancelled, queued or running. A job waits in the queue without using its own time limit, so an
overloaded machine makes work wait instead of fail.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from sandbox_service.evaluation import evaluate
from sandbox_service.inductor.request import compile_with_inductor
from sandbox_service.lane import Lane
from sandbox_service.options import EvalOptions, InductorOptions, InputSet, ValidateOptions
from sandbox_service.results import (
    EvalResult, InductorResult, InductorStatus, Status, ValidationResult, ValidationStatus,
)
from sandbox_service.validation import validate, validate_batch
from sandbox_service.verifier.llm_judge import Judge
from sandbox_service.verifier.screen_pool import ScreenPool

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The queue holds `queue_capacity` jobs already."""


class ShuttingDown(Exception):
    """The scheduler no longer accepts work."""


@dataclasses.dataclass(frozen=True)
class SchedulerConfig:
    backend: str  # "cuda" or "interpreter" (resolved, not "auto")
    gpus: tuple[int, ...] = ()
    workers_per_lane: int = 2
    queue_capacity: int = 64
    warm_per_lane: int | None = None  # candidate processes kept forked and ready; default = 2 x workers_per_lane
    work_root: Path | None = None
    judges_per_lane: int | None = None  # default: 8 on a GPU, 1 on the CPU
    gpu_memory_fraction: float = 0.9  # of each GPU, for evaluations (less when a trainer shares the GPU)
    judge: Judge | None = None  # the optional LLM judge layer, shared by every lane

    def __post_init__(self):
        if self.backend not in ("cuda", "interpreter"):
            raise ValueError(f"backend must be 'cuda' or 'interpreter', got {self.backend!r}")
        if self.backend == "cuda" and not self.gpus:
            raise ValueError("the cuda backend needs at least one GPU")
        if self.workers_per_lane < 1 or self.queue_capacity < 1:
            raise ValueError("workers_per_lane and queue_capacity must be >= 1")


@dataclasses.dataclass(eq=False)  # compared and hashed by identity: jobs live in sets
class Job:
    """One unit of work: `work(lane, cancel_event)` returns its result; `failed(error)` is the result
    given when it never runs (cancelled, server stopping)."""

    work: Callable[[Lane, threading.Event], Any]
    failed: Callable[[str], Any]
    deadline: float | None = None  # time.monotonic() by which the caller stops waiting
    future: Future = dataclasses.field(default_factory=Future)
    cancel_event: threading.Event = dataclasses.field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.cancel_event.set()

    def result(self, timeout: float | None = None) -> Any:
        return self.future.result(timeout)


def evaluation_job(reference_source: str, candidate_source: str, options: EvalOptions,
                   input_sets: tuple[InputSet, ...] = ()) -> Job:
    return Job(
        work=lambda lane, cancel: evaluate(reference_source, candidate_source, options, lane, cancel, input_sets),
        failed=lambda error: EvalResult(Status.INFRA_ERROR, error=error),
    )


def validation_job(reference_source: str, input_sets: tuple[InputSet, ...], options: ValidateOptions) -> Job:
    return Job(
        work=lambda lane, cancel: validate(reference_source, input_sets, options, lane, cancel),
        failed=lambda error: ValidationResult(ValidationStatus.INFRA_ERROR, reason=error),
    )


def validation_batch_job(items: list[tuple[str, tuple[InputSet, ...]]], options: ValidateOptions) -> Job:
    return Job(
        work=lambda lane, cancel: validate_batch(items, options, lane, cancel),
        failed=lambda error: [ValidationResult(ValidationStatus.INFRA_ERROR, reason=error) for _ in items],
    )


def inductor_job(reference_source: str, options: InductorOptions) -> Job:
    return Job(
        work=lambda lane, cancel: compile_with_inductor(reference_source, options, lane, cancel),
        failed=lambda error: InductorResult(InductorStatus.INFRA_ERROR, reason=error),
    )


_STOP = object()


class Scheduler:
    def __init__(self, config: SchedulerConfig):
        self.config = config
        self._owned_root = config.work_root is None
        self.work_root = Path(config.work_root or tempfile.mkdtemp(prefix="tritonrl-sandbox-", dir=_memory_backed_dir(config.backend)))
        # Ready processes hide a fork and a CUDA context (about a second) behind the evaluations in flight.
        warm = 2 * config.workers_per_lane if config.warm_per_lane is None else config.warm_per_lane
        devices = config.gpus if config.backend == "cuda" else (None,)
        # One pool of screen workers (format and static layers) for the whole server: they start with it.
        self.screens = ScreenPool().start()
        self.lanes = [Lane.create(config.backend, gpu, warm, self.work_root, config.judge, config.judges_per_lane,
                                  config.gpu_memory_fraction, screens=self.screens) for gpu in devices]
        self._queue: queue.Queue = queue.Queue(maxsize=config.queue_capacity)
        self._lock = threading.Lock()
        self._accepting = True
        self._running: set[Job] = set()
        self.done = 0
        self._threads = [
            threading.Thread(target=self._work, args=(lane,), name=f"lane{index}-worker{slot}", daemon=True)
            for index, lane in enumerate(self.lanes)
            for slot in range(config.workers_per_lane)
        ]
        for thread in self._threads:
            thread.start()

    # -- submission ----------------------------------------------------------------------------
    def submit(self, job: Job, block: bool = False, should_stop=lambda: False) -> Job:
        """Queue a job. Non-blocking raises QueueFull; blocking waits for room until should_stop()."""
        if not self._accepting:
            raise ShuttingDown()
        if not block:
            try:
                self._queue.put_nowait(job)
            except queue.Full:
                raise QueueFull(f"the evaluation queue is full ({self.config.queue_capacity} waiting)") from None
            return job
        while True:
            if not self._accepting:
                raise ShuttingDown()
            if should_stop():
                job.cancel()
                raise ShuttingDown()
            try:
                self._queue.put(job, timeout=0.2)
                return job
            except queue.Full:
                continue

    # -- work ----------------------------------------------------------------------------------
    def _work(self, lane: Lane) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            if job.future.done():
                continue
            if job.cancel_event.is_set() or (job.deadline is not None and time.monotonic() > job.deadline):
                job.future.set_result(job.failed("cancelled before it started: the caller went away"))
                continue
            with self._lock:
                self._running.add(job)
            result = job.failed("sandbox error: the job did not finish")
            try:
                result = job.work(lane, job.cancel_event)
            except BaseException:  # noqa: BLE001 - a worker thread must survive anything
                log.exception("job crashed")
            finally:
                with self._lock:
                    self._running.discard(job)
                    self.done += 1
                job.future.set_result(result)

    # -- introspection -------------------------------------------------------------------------
    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._running)

    @property
    def workers(self) -> int:
        return len(self._threads)

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self, grace_s: float = 30.0) -> None:
        """Stop accepting, cancel what is queued, let running jobs finish for `grace_s`, then cancel them."""
        self._accepting = False
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not _STOP and not job.future.done():
                job.future.set_result(job.failed("the server is shutting down"))
        deadline = time.monotonic() + grace_s
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        with self._lock:
            for job in self._running:
                job.cancel()
        for _ in self._threads:
            self._queue.put(_STOP)
        for thread in self._threads:
            thread.join(timeout=15)
        for lane in self.lanes:
            lane.close()
        self.screens.close()
        if self._owned_root:
            shutil.rmtree(self.work_root, ignore_errors=True)


SHM_MIN_FREE_BYTES = 8 << 30


def _memory_backed_dir(backend: str) -> str | None:
    """/dev/shm when it has room: candidate outputs pass through files, and RAM is faster than disk. Never on a
    CUDA lane, whose jailed candidates may write /dev/shm (jail.shared_writable): the work root holds other
    evaluations' folders."""
    if backend == "cuda":
        return None
    try:
        stats = os.statvfs("/dev/shm")
    except OSError:
        return None
    free = stats.f_bavail * stats.f_frsize
    return "/dev/shm" if free >= SHM_MIN_FREE_BYTES and os.access("/dev/shm", os.W_OK) else None


def default_workers(backend: str) -> int:
    """As many evaluations in flight as the machine has cores: compilation and correctness are CPU work
    (a forked process each), and timing is serialised per GPU anyway."""
    return max(2, os.cpu_count() or 2)

