"""EvaluateStream's contract, shared by the one-process server and the several-GPU front: every request read
gets exactly one response, yielded in completion order, and the stream ends once all of them are out; a
stream holds only the work still running (InFlight) and one of a bounded number of slots."""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

log = logging.getLogger(__name__)
# gRPC handler threads no stream may hold: with every other one taken by open streams (which may send nothing
# for as long as their clients like), GetServerInfo, health and unary calls are still answered.
UNARY_RESERVE = 8


def stream_slots(threads: int) -> threading.BoundedSemaphore:
    """How many streams a server of `threads` handler threads keeps open at once."""
    return threading.BoundedSemaphore(max(1, threads - UNARY_RESERVE))


def answer_stream(slots: threading.BoundedSemaphore, context, feed, name: str) -> Iterator[Any]:
    """An AnswerStream's answers, holding one of `slots` while the stream is open; none free: RESOURCE_EXHAUSTED."""
    if not slots.acquire(blocking=False):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many open streams; try again later")
    try:
        yield from AnswerStream(feed, name).answers()
    finally:
        slots.release()


@dataclasses.dataclass(frozen=True)
class _FedAll:
    """The feeder read `count` requests and will put nothing more."""

    count: int


class InFlight:
    """A stream's work while it runs (jobs, forwarded calls: anything with `cancel()`), cancelled together when
    the stream ends; each leaves once done, so a stream that lasts a whole training run holds only what runs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: set = set()

    def add(self, future) -> None:
        with self._lock:
            self._calls.add(future)

    def discard(self, future) -> None:
        with self._lock:
            self._calls.discard(future)

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)

    def cancel_all(self) -> None:
        with self._lock:
            calls = list(self._calls)
        for future in calls:
            future.cancel()


class AnswerStream:
    """`feed(stream)` runs on its own thread: it reads requests, counts each in `stream.read`, and arranges for
    each to `put` exactly one answer (now or when it finishes). `answers()` yields them as they come."""

    def __init__(self, feed: Callable[[AnswerStream], None], name: str):
        self._queue: queue.Queue = queue.Queue()
        self.read = 0
        self._feed = feed
        self._name = name

    def put(self, answer: Any) -> None:
        self._queue.put(answer)

    def answers(self) -> Iterator[Any]:
        def fed() -> None:
            try:
                self._feed(self)
            except Exception:  # noqa: BLE001 - the client's stream broke; answer what was read
                log.debug("request stream ended early", exc_info=True)
            finally:
                self._queue.put(_FedAll(self.read))

        threading.Thread(target=fed, name=self._name, daemon=True).start()
        answered, total = 0, None
        while total is None or answered < total:
            item = self._queue.get()
            if isinstance(item, _FedAll):
                total = item.count
                continue
            answered += 1
            yield item
