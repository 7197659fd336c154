"""Concurrent requests -> batched `generate` calls on one thread (the one that owns the JAX sampler).

A request is a rendered prompt, its sampling settings and n (choices). The batcher thread waits for a
request, then `window_s` more for others (less when `max_rows` rows are already waiting), and takes
everything waiting. Requests whose settings match (temperature, top_p, top_k, max_tokens, stop) share one
`generate` call, each prompt repeated n times; the sampler sorts the rows by length and decodes them in
batches of its `max_batch_size`. Requests that arrive while a batch decodes wait for the next one, so
under load every call is as full as the queue. A call that fails with ValueError (e.g. one prompt over the
sampler's limits) is retried request by request, so only the bad request fails.

Seeds: each call gets the next value of a counter (from `seed`), so identical requests still get
different samples; a client's `seed` is not honoured (its samples would depend on its batch-mates).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from jaxrl.sampling.api import Completion, SamplingParams, TextGenerator

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Request:
    """One API request: a rendered prompt and the settings of its n choices (params.num_samples)."""

    prompt: str
    params: SamplingParams
    future: Future = dataclasses.field(default_factory=Future, compare=False)

    @property
    def group(self) -> tuple:
        """Requests with equal groups can share one generate call."""
        p = self.params
        return p.temperature, p.top_p, p.top_k, p.max_new_tokens, p.stop_strings, p.stop_token_ids


@dataclasses.dataclass
class BatchStats:
    """What the batcher did (for tests, the benchmark and logs)."""

    calls: int = 0
    requests: int = 0
    rows: int = 0
    largest_call_rows: int = 0


class Batcher:
    """Owns `generator` on its own thread; `submit` from any thread, `close` to stop."""

    def __init__(self, generator: TextGenerator, *, window_s: float = 0.01, max_rows: int = 64, seed: int = 0):
        if window_s < 0 or max_rows < 1:
            raise ValueError(f"window_s must be >= 0 and max_rows >= 1, got {window_s}, {max_rows}")
        self.generator = generator
        self.window_s = window_s
        self.max_rows = max_rows
        self.stats = BatchStats()
        self._seed = seed
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)
        self._thread.start()

    def submit(self, prompt: str, params: SamplingParams) -> Future:
        """A Future of the request's `params.num_samples` completions."""
        if not self._thread.is_alive():
            raise RuntimeError("the batcher is closed")
        request = Request(prompt, params)
        self._queue.put(request)
        return request.future

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish the calls under way, fail what still waits, stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    # ------------------------------------------------------------------ the batcher thread

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return self._fail_waiting()
            waiting, stop = self._collect(first)
            for requests in _groups(waiting):
                self._run(requests)
            if stop:
                return self._fail_waiting()

    def _collect(self, first: Request) -> tuple[list[Request], bool]:
        """`first` and what arrives within the window (or until max_rows rows wait); True when closing."""
        waiting, rows = [first], first.params.num_samples
        deadline = time.monotonic() + self.window_s
        while rows < self.max_rows:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return waiting, True
            waiting.append(item)
            rows += item.params.num_samples
        return waiting, False

    def _run(self, requests: list[Request]) -> None:
        live = [r for r in requests if r.future.set_running_or_notify_cancel()]
        if not live:
            return
        try:
            results = self._generate(live)
        except ValueError as exc:
            if len(live) == 1:
                live[0].future.set_exception(exc)
            else:  # one bad prompt must not fail its batch-mates
                for request in live:
                    self._run_alone(request)
            return
        except Exception as exc:  # noqa: BLE001 - the requests' callers see it; the thread keeps serving
            log.exception("generate failed for %d requests", len(live))
            for request in live:
                request.future.set_exception(exc)
            return
        for request, completions in zip(live, results):
            request.future.set_result(completions)

    def _run_alone(self, request: Request) -> None:
        try:
            request.future.set_result(self._generate([request])[0])
        except Exception as exc:  # noqa: BLE001 - delivered to the request's caller
            request.future.set_exception(exc)

    def _generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        """One generate call for requests of one group: prompt i repeated n_i times, one sample per row."""
        prompts = [r.prompt for r in requests for _ in range(r.params.num_samples)]
        params = dataclasses.replace(requests[0].params, num_samples=1, seed=self._seed)
        self._seed += 1
        flat = [samples[0] for samples in self.generator.generate(prompts, params)]
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.rows += len(prompts)
        self.stats.largest_call_rows = max(self.stats.largest_call_rows, len(prompts))
        out, start = [], 0
        for request in requests:
            out.append(flat[start:start + request.params.num_samples])
            start += request.params.num_samples
        return out

    def _fail_waiting(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None and item.future.set_running_or_notify_cancel():
                item.future.set_exception(RuntimeError("the server is shutting down"))


def _groups(requests: list[Request]) -> list[list[Request]]:
    """Requests split by `Request.group`, in arrival order of each group's first request."""
    groups: dict[tuple, list[Request]] = {}
    for request in requests:
        groups.setdefault(request.group, []).append(request)
    return list(groups.values())
