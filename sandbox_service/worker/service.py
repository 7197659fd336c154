"""A long-lived trusted child (the judge, the builder) answering one request at a time.

If it dies or does not answer in time it is killed and forked again on the next request; `generation`
counts the restarts so that callers know its caches are gone. The request that was running when it died
fails with ServiceFailure naming the cause; requests waiting for the lock simply run on the new process.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

from sandbox_service.worker.process import Child
from sandbox_service.worker.protocol import ChannelClosed, ProtocolError
from sandbox_service.worker.zygote import ChildStartError, wait_ready

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 300.0


class ServiceFailure(Exception):
    """The service process died or timed out while answering; `cause` says how."""

    def __init__(self, cause: str, timed_out: bool = False):
        super().__init__(cause)
        self.cause = cause
        self.timed_out = timed_out


class ServiceProcess:
    def __init__(self, name: str, spawn: Callable[[], Child], memory_limit_mb: int | None = None,
                 paused: Callable[[ServiceProcess], float] | None = None):
        """`paused(service)`: a clock that runs only while this service's process is frozen
        (pool.Freezer.frozen_seconds, which leaves out the holds that keep it running); a request's time limit is
        extended by what it ran while the request waited."""
        self.name = name
        self._paused = paused
        self._spawn = spawn
        self._memory_limit_mb = memory_limit_mb
        self._child: Child | None = None
        self._ids = itertools.count()
        self.lock = threading.Lock()
        self.generation = 0
        self.restarts = 0

    def _ensure(self) -> Child:
        if self._child is None:
            child = self._spawn()
            try:
                wait_ready(child, READY_TIMEOUT_S)
            except ChildStartError:
                child.close()
                raise
            if self._memory_limit_mb:
                child.watch_memory(self._memory_limit_mb)
            self._child = child
            self.generation += 1
        return self._child

    def _discard(self) -> str:
        child, self._child = self._child, None
        if child is None:
            return ""
        how = child.describe_exit(wait_s=0.5)
        if child.memory_exceeded:
            how = f"killed after exceeding its memory limit of {self._memory_limit_mb} MB"
        tail = child.output()[-1500:]
        child.close()
        self.restarts += 1
        return f"{how}: {tail}" if tail.strip() else how

    def _send(self, message: dict) -> Child:
        """Deliver to a live process: one that died between requests is replaced first, not blamed."""
        for attempt in range(2):
            child = self._ensure()
            if child.returncode() is not None:
                self._discard()
                continue
            try:
                child.send(message)
                return child
            except OSError:
                self._discard()  # its end of the pipe is gone: it died while idle
        raise ServiceFailure(f"the {self.name} process cannot be reached")

    def request(self, message: dict, timeout_s: float) -> dict:
        """Send one request and wait for its answer. Call with `lock` held."""
        request_id = next(self._ids)
        child = self._send({**message, "type": "request", "id": request_id})
        try:
            answer = self._receive(child, timeout_s)
        except TimeoutError:
            self._discard()
            raise ServiceFailure(f"the {self.name} did not answer within {timeout_s:.0f} s", timed_out=True) from None
        except (ChannelClosed, ProtocolError, OSError) as exc:
            cause = self._discard()
            raise ServiceFailure(f"the {self.name} process died ({exc}; {cause})") from None
        if answer.get("id") != request_id:
            self._discard()
            raise ServiceFailure(f"the {self.name} answered out of turn")
        return answer

    def _receive(self, child: Child, timeout_s: float) -> dict:
        """The answer within `timeout_s` of the process's own time: time it spent frozen meanwhile is added (a
        partly read answer stays in the channel's buffer between waits)."""
        started = time.monotonic()
        paused_at = self._paused(self) if self._paused else 0.0
        while True:
            frozen = self._paused(self) - paused_at if self._paused else 0.0
            remaining = started + timeout_s + frozen - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer within {timeout_s:.0f} s")
            try:
                return child.receive(timeout=remaining)
            except TimeoutError:
                if self._paused is None:
                    raise

    def request_if_idle(self, message: dict, timeout_s: float) -> dict | None:
        """`request` to a running process nobody is using now; None when it is busy or not running (it is never
        started or waited for: for housekeeping that must not hold up evaluations)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self._child is None or self._child.returncode() is not None:
                return None
            return self.request(message, timeout_s)
        finally:
            self.lock.release()

    def close(self) -> None:
        with self.lock:
            if self._child is not None:
                self._child.close()
                self._child = None
