"""The server's side of a conversation with a one-shot child: its message stream and its time limit."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

from sandbox_service.worker import messages, protocol
from sandbox_service.worker.cpu_trace import CpuTrace
from sandbox_service.worker.process import Child


class Cancelled(Exception):
    """The caller went away or the server is shutting down."""


class _Frozen(Protocol):
    def frozen_seconds(self, of: object = None) -> float: ...


class Deadline:
    """The candidate's time limit. It runs only while the candidate can run: time frozen for another
    evaluation's timing, and time the server spends on the candidate's behalf (trusted builds, the judge
    reading outputs it waits for), is added back. `of`: the process it is the limit of, which a timing hold keeps
    running: its own hold is its own time (else a timed process that never answers holds the GPU for good)."""

    def __init__(self, freezer: _Frozen, seconds: float, of: Child | None = None):
        self.freezer = freezer
        self.seconds = seconds
        self.of = of
        self.started = time.monotonic()
        self.frozen_at_start = freezer.frozen_seconds(of)
        self.extra = 0.0

    def extend(self, seconds: float) -> None:
        self.extra += seconds

    def remaining(self) -> float:
        frozen = self.freezer.frozen_seconds(self.of) - self.frozen_at_start
        return self.started + self.seconds + self.extra + frozen - time.monotonic()


# Messages read ahead of the server: the reader then waits (and the child blocks on its full pipe), so a child
# flooding the channel holds at most this many parsed messages in the server, plus the one being read, each
# from a frame within the channel's limit (Receiver.max_bytes: 4 MB for a candidate, evaluation.py).
QUEUE_MESSAGES = 4
# Types the stream itself reports; a child sending one is tampering with the channel.
STREAM_EVENTS = frozenset({"exited", "garbled", "malformed"})


class MessageStream:
    """The candidate's messages, read on a thread; garbage or a missing nonce ends the stream.

    With `check` (messages.Schema.check), each message is checked as it arrives: one that breaks the
    protocol ends the stream as `{"type": "malformed", "rule", "error"}`. With `trace`, the child's CPU is read
    as each well-formed message arrives (cpu_trace.py)."""

    def __init__(self, child: Child, nonce: str, check: Callable[[dict], dict] | None = None,
                 last: frozenset[str] = frozenset(), trace: CpuTrace | None = None):
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_MESSAGES)
        # Types after which the reader stops reading: the child's next messages belong to another conversation
        # (a reused executor's next job), which a reader still blocked on the channel would steal.
        self.last = last
        self.child = child
        self.nonce = nonce
        self.check = check
        self.trace = trace
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._pump, name="message-stream", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop reading (the reader ends once its pending message is dropped)."""
        self.closed.set()

    def _put(self, message: dict) -> bool:
        # Ends with the conversation: closed here, or the child closed (its conversation is over).
        while not (self.closed.is_set() or getattr(self.child, "_closed", False)):
            try:
                self.queue.put(message, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _pump(self) -> None:
        while True:
            try:
                message = self.child.receive()
            except (protocol.ChannelClosed, OSError):
                self._put({"type": "exited"})
                return
            except protocol.ProtocolError as exc:
                self._put({"type": "garbled", "error": str(exc)})
                return
            except Exception as exc:  # noqa: BLE001 - whatever a frame does to the decoder, it is garbage
                self._put({"type": "garbled", "error": f"unreadable frame: {type(exc).__name__}"})
                return
            if message.get("nonce") != self.nonce:
                self._put({"type": "garbled", "error": "message without this evaluation's nonce"})
                return
            if message["type"] in STREAM_EVENTS:
                self._put({"type": "garbled", "error": f"a message of the reserved type {message['type']!r}"})
                return
            if self.check is not None:
                try:
                    message = self.check(message)
                except messages.Malformed as exc:
                    self._put({"type": "malformed", "rule": exc.rule, "error": exc.error})
                    return
                except Exception as exc:  # noqa: BLE001 - a check that cannot read it: malformed
                    self._put({"type": "malformed", "rule": messages.CHANNEL_RULE,
                               "error": f"unreadable {message['type']!r} message: {type(exc).__name__}"})
                    return
            if self.trace is not None:
                self.trace.mark(message["type"])
            if not self._put(message) or message["type"] in self.last:
                return

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
