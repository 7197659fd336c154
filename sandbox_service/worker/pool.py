"""Children started ahead of need, each handed out once, so an evaluation skips torch's import time.

A child is never reused: after its one evaluation it is killed with its process group, so nothing a
candidate leaves behind (patched modules, a corrupted CUDA context, threads) can reach another one.
"""

from __future__ import annotations

import logging
import threading

from sandbox_service.worker.process import ChildProcess, ChildSpec
from sandbox_service.worker.protocol import ChannelClosed, ProtocolError

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0


class ChildStartError(RuntimeError):
    """A child could not start (an infrastructure failure, not the candidate's)."""


class WarmPool:
    def __init__(self, spec: ChildSpec, size: int):
        self.spec = spec
        self.size = size
        self._idle: list[ChildProcess] = []
        self._lock = threading.Condition()
        self._closed = False
        self._filler = threading.Thread(target=self._fill, name=f"pool-{spec.role}", daemon=True)
        if size > 0:
            self._filler.start()

    def _fill(self) -> None:
        while True:
            with self._lock:
                while not self._closed and len(self._idle) >= self.size:
                    self._lock.wait()
                if self._closed:
                    return
            try:
                child = ChildProcess(self.spec)
            except OSError as exc:
                log.error("could not start a %s child: %s", self.spec.role, exc)
                with self._lock:
                    self._lock.wait(timeout=5.0)
                continue
            with self._lock:
                if self._closed:
                    child.close()
                    return
                self._idle.append(child)

    def acquire(self) -> ChildProcess:
        """A child that has reported ready; started now if none is waiting."""
        for _ in range(3):
            with self._lock:
                child = self._idle.pop(0) if self._idle else None
                self._lock.notify_all()
            if child is None:
                child = ChildProcess(self.spec)
            try:
                message = child.receive(timeout=READY_TIMEOUT_S)
                if message.get("type") == "ready":
                    return child
                log.error("%s child sent %r before ready", self.spec.role, message.get("type"))
            except (ChannelClosed, ProtocolError, TimeoutError) as exc:
                log.error("%s child failed to start (%s): %s", self.spec.role, exc, child.output()[-2000:])
            child.close()
        raise ChildStartError(f"{self.spec.role} child processes fail to start; see the server log")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._lock.notify_all()
        for child in idle:
            child.close()


class TimingGate:
    """Per-GPU lock: correctness phases share the GPU, a timing phase has it alone.

    Writers (timing) take precedence over new readers, so timing is not starved under load.
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    def acquire_shared(self) -> None:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1

    def release_shared(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def acquire_exclusive(self) -> None:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True

    def release_exclusive(self) -> None:
        with self._cond:
            self._writer = False
            self._cond.notify_all()
