"""The server's side of a conversation with a one-shot child: its message stream and its time limit."""

from __future__ import annotations

import queue
import threading
import time
from typing import Protocol

from sandbox_service.worker import protocol
from sandbox_service.worker.process import Child


class Cancelled(Exception):
    """The caller went away or the server is shutting down."""


class _Frozen(Protocol):
    def frozen_seconds(self) -> float: ...


class Deadline:
    """The candidate's time limit. It runs only while the candidate can run: time frozen for another
    evaluation's timing, and time the server spends on the candidate's behalf (trusted builds, the judge
    reading outputs it waits for), is added back."""

    def __init__(self, freezer: _Frozen, seconds: float):
        self.freezer = freezer
        self.seconds = seconds
        self.started = time.monotonic()
        self.frozen_at_start = freezer.frozen_seconds()
        self.extra = 0.0

    def extend(self, seconds: float) -> None:
        self.extra += seconds

    def remaining(self) -> float:
        frozen = self.freezer.frozen_seconds() - self.frozen_at_start
        return self.started + self.seconds + self.extra + frozen - time.monotonic()


class MessageStream:
    """The candidate's messages, read on a thread; garbage or a missing nonce ends the stream."""

    def __init__(self, child: Child, nonce: str):
        self.queue: queue.Queue = queue.Queue()
        self.child = child
        self.nonce = nonce
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                message = self.child.receive()
            except (protocol.ChannelClosed, OSError):
                self.queue.put({"type": "exited"})
                return
            except protocol.ProtocolError as exc:
                self.queue.put({"type": "garbled", "error": str(exc)})
                return
            if message.get("nonce") != self.nonce:
                self.queue.put({"type": "garbled", "error": "message without this evaluation's nonce"})
                return
            self.queue.put(message)

    def next(self, deadline: Deadline, cancel: threading.Event | None) -> dict:
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            remaining = deadline.remaining()
            if remaining <= 0:
                raise TimeoutError()
            try:
                return self.queue.get(timeout=min(0.1, remaining))
            except queue.Empty:
                continue


def hold_memory(child: Child, hold, message: dict, deadline: Deadline, cancel: threading.Event | None) -> None:
    """Answer a reference process's `estimate`: hold the GPU memory it needs (`Lane.reference_process`),
    then let it go on. The wait is not charged to its time limit."""
    estimate = message.get("bytes")
    estimate = estimate if isinstance(estimate, int) and not isinstance(estimate, bool) and estimate >= 0 else None
    try:
        waited = hold(estimate, lambda: cancel is not None and cancel.is_set())
    except TimeoutError:
        raise Cancelled() from None
    deadline.extend(waited)
    child.send({"type": "go"})
