"""Client for the sandbox: several servers, retries with backoff, deadlines, concurrent batches.

    with SandboxClient.embedded() as client:             # starts a local server, stops it on exit
        result = client.evaluate(reference_src, completion_text)
        for index, result in client.evaluate_many(pairs):  # streamed back as each finishes
            ...

Transient failures (UNAVAILABLE, a server restarting) are retried on the next server with exponential
backoff; RESOURCE_EXHAUSTED (a full queue: the server is busy, not broken) is retried until the call's
deadline, so load makes work wait instead of fail. When every attempt fails the result is `infra_error`,
which trainers mask out rather than score, so a sandbox outage never turns into a zero reward. No torch
is imported.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import grpc

from sandbox_service.convert import (
    inductor_from_pb, inductor_options_to_pb, input_sets_to_pb, options_to_pb, result_from_pb,
    validate_options_to_pb, validation_from_pb,
)
from sandbox_service.options import EvalOptions, InductorOptions, InputSet, ValidateOptions
from sandbox_service.results import (
    EvalResult, InductorResult, InductorStatus, Status, ValidationResult, ValidationStatus,
)
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED})
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Both ends of every Sandbox channel (client, server, the several-GPU front and its lane servers).
MESSAGE_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def backoff(self, attempt: int) -> float:
        base = min(self.max_backoff_s, self.initial_backoff_s * 2**attempt)
        return base * (0.5 + random.random() / 2)


@dataclasses.dataclass(frozen=True)
class Pair:
    """One item of a batch: a reference module and a candidate (completion text or module)."""

    reference: str
    candidate: str
    options: EvalOptions | None = None
    input_sets: tuple[InputSet, ...] = ()


class _Target:
    def __init__(self, address: str):
        self.address = address
        self.channel = grpc.insecure_channel(address, options=MESSAGE_OPTIONS)
        self.stub = pb_grpc.SandboxStub(self.channel)
        self.in_flight = 0


class SandboxClient:
    def __init__(
        self,
        targets: Iterable[str],
        *,
        timeout_s: float = 900.0,
        retry: RetryPolicy = RetryPolicy(),
        max_concurrency: int = 16,
        default_options: EvalOptions | None = None,
    ):
        addresses = [t.strip() for t in targets if t.strip()]
        if not addresses:
            raise ValueError("at least one server address (HOST:PORT) is required; or use SandboxClient.embedded()")
        self._targets = [_Target(a) for a in addresses]
        self._lock = threading.Lock()
        self._rotation = itertools.count()
        self.timeout_s = timeout_s
        self.retry = retry
        self.max_concurrency = max_concurrency
        self.default_options = default_options
        self._embedded: EmbeddedServer | None = None

    @classmethod
    def embedded(cls, backend: str = "auto", workers: int | None = None, gpu_memory_fraction: float | None = None,
                 server_log: Path | None = None, **kwargs) -> SandboxClient:
        """Start a local server on a free port; it stops when the client is closed (or this process exits).
        `server_log`: where its log goes (kept; by default a temporary file removed with the server)."""
        server = EmbeddedServer(backend=backend, workers=workers, gpu_memory_fraction=gpu_memory_fraction,
                                log_path=server_log)
        client = cls([server.address], **kwargs)
        client._embedded = server
        return client

    # -- selection -----------------------------------------------------------------------------
    def _pick(self, attempt: int) -> _Target:
        """Least in-flight first; ties broken by rotation; retries move on to another server."""
        with self._lock:
            start = next(self._rotation)
            ordered = sorted(
                range(len(self._targets)), key=lambda i: (self._targets[i].in_flight, (i - start) % len(self._targets))
            )
            target = self._targets[ordered[attempt % len(ordered)]]
            target.in_flight += 1
            return target

    def _release(self, target: _Target) -> None:
        with self._lock:
            target.in_flight -= 1

    # -- calls ---------------------------------------------------------------------------------
    def evaluate(
        self,
        reference: str,
        candidate: str,
        options: EvalOptions | None = None,
        *,
        input_sets: Sequence[InputSet] = (),
        timeout_s: float | None = None,
        request_id: str = "",
    ) -> EvalResult:
        """Evaluate one pair. Never raises for server trouble: returns an infra_error result instead."""
        options = options or self.default_options
        request = pb.EvaluateRequest(
            request_id=request_id, reference_source=reference, candidate_source=candidate, options=options_to_pb(options)
        )
        input_sets_to_pb(input_sets, request.input_sets)
        answer = self._call("Evaluate", request, timeout_s)
        if isinstance(answer, str):
            return EvalResult(Status.INFRA_ERROR, error=f"sandbox unavailable: {answer}")
        return result_from_pb(answer.result)

    def validate(
        self,
        reference: str,
        input_sets: Sequence[InputSet] = (),
        options: ValidateOptions | None = None,
        *,
        timeout_s: float | None = None,
        request_id: str = "",
    ) -> ValidationResult:
        """Validate a reference against itself. Never raises for server trouble (infra_error instead)."""
        request = pb.ValidateRequest(request_id=request_id, reference_source=reference,
                                     options=validate_options_to_pb(options))
        input_sets_to_pb(input_sets, request.input_sets)
        answer = self._call("Validate", request, timeout_s)
        if isinstance(answer, str):
            return ValidationResult(ValidationStatus.INFRA_ERROR, reason=f"sandbox unavailable: {answer}")
        return validation_from_pb(answer.result)

    def validate_batch(
        self,
        items: Sequence[tuple[str, Sequence[InputSet]]],
        options: ValidateOptions | None = None,
        *,
        timeout_s: float | None = None,
        request_id: str = "",
    ) -> list[ValidationResult]:
        """Validate several references (at most 64) with the same options in shared validator processes (the
        `ValidateBatch` call: for one's own generated references). One result per item, in order; never
        raises for server trouble (infra_error results instead)."""
        request = pb.ValidateBatchRequest(request_id=request_id, options=validate_options_to_pb(options))
        for reference, input_sets in items:
            item = request.items.add(reference_source=reference)
            input_sets_to_pb(input_sets, item.input_sets)
        # each item's limit, plus room for waits that are not charged to it (GPU memory, the timing gate, a fresh
        # process after one that died)
        wait = timeout_s or max(self.timeout_s, len(items) * ((options or ValidateOptions()).timeout_s + 30.0) + 300.0)
        answer = self._call("ValidateBatch", request, wait)
        if isinstance(answer, str):
            return [ValidationResult(ValidationStatus.INFRA_ERROR, reason=f"sandbox unavailable: {answer}")
                    for _ in items]
        return [validation_from_pb(result) for result in answer.results]

    def inductor(self, reference: str, options: InductorOptions | None = None, *, timeout_s: float | None = None,
                 request_id: str = "") -> InductorResult:
        """A standalone ModelNew of TorchInductor's kernels for the reference (not verified: evaluate it).
        Never raises for server trouble (infra_error instead)."""
        request = pb.InductorRequest(request_id=request_id, reference_source=reference,
                                     options=inductor_options_to_pb(options))
        wait = timeout_s or ((options or InductorOptions()).timeout_s + 60.0)
        answer = self._call("Inductor", request, wait)
        if isinstance(answer, str):
            return InductorResult(InductorStatus.INFRA_ERROR, reason=f"sandbox unavailable: {answer}")
        return inductor_from_pb(answer.result)

    def _call(self, method: str, request, timeout_s: float | None):
        """The response, or the last error as text once retries and the deadline are spent."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        last_error = ""
        attempt = unavailable = 0
        while unavailable < self.retry.attempts:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            target = self._pick(attempt)
            try:
                return getattr(target.stub, method)(request, timeout=remaining, wait_for_ready=attempt > 0)
            except grpc.RpcError as exc:
                code = exc.code()
                last_error = f"{target.address}: {code.name}: {exc.details()}"
                if code == grpc.StatusCode.INVALID_ARGUMENT:
                    raise ValueError(exc.details()) from None
                if code not in RETRYABLE:
                    break
                if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    unavailable += 1  # a busy server is waited for until the deadline; a missing one is not
                log.debug("retrying after %s", last_error)
            finally:
                self._release(target)
            time.sleep(min(self.retry.backoff(min(attempt, 5)), max(0.0, deadline - time.monotonic())))
            attempt += 1
        return last_error or "deadline exceeded"

    def evaluate_many(
        self, pairs: Iterable[Pair | tuple[str, str]], *, max_concurrency: int | None = None
    ) -> Iterator[tuple[int, EvalResult]]:
        """Evaluate a batch with bounded concurrency; yields (index, result) as each one finishes."""
        items = [p if isinstance(p, Pair) else Pair(*p) for p in pairs]
        workers = max(1, min(max_concurrency or self.max_concurrency, len(items) or 1))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-client") as pool:
            futures = {
                pool.submit(self.evaluate, item.reference, item.candidate, item.options, input_sets=item.input_sets,
                            request_id=str(index)): index
                for index, item in enumerate(items)
            }
            for future in as_completed(futures):
                yield futures[future], future.result()

    def validate_many(
        self, items: Iterable[tuple[str, Sequence[InputSet]]], options: ValidateOptions | None = None, *,
        max_concurrency: int | None = None,
    ) -> Iterator[tuple[int, ValidationResult]]:
        """Validate references with bounded concurrency; yields (index, result) as each one finishes."""
        items = list(items)
        workers = max(1, min(max_concurrency or self.max_concurrency, len(items) or 1))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-validate") as pool:
            futures = {
                pool.submit(self.validate, reference, tuple(sets), options, request_id=str(index)): index
                for index, (reference, sets) in enumerate(items)
            }
            for future in as_completed(futures):
                yield futures[future], future.result()

    def evaluate_stream(
        self, pairs: Iterable[Pair | tuple[str, str]], *, timeout_s: float | None = None
    ) -> Iterator[tuple[int, EvalResult]]:
        """The server's streaming call on one server: requests sent as `pairs` yields them (e.g. while
        a sampler is still generating), results back as they finish. No retries: use evaluate_many for those."""

        def requests() -> Iterator[pb.EvaluateRequest]:
            for index, pair in enumerate(pairs):
                pair = pair if isinstance(pair, Pair) else Pair(*pair)
                request = pb.EvaluateRequest(
                    request_id=str(index),
                    reference_source=pair.reference,
                    candidate_source=pair.candidate,
                    options=options_to_pb(pair.options or self.default_options),
                )
                input_sets_to_pb(pair.input_sets, request.input_sets)
                yield request

        target = self._pick(0)
        try:
            for response in target.stub.EvaluateStream(requests(), timeout=timeout_s or self.timeout_s):
                yield int(response.request_id), result_from_pb(response.result)
        finally:
            self._release(target)

    def server_info(self, timeout_s: float = 10.0) -> list[pb.ServerInfo]:
        return [t.stub.GetServerInfo(pb.ServerInfoRequest(), timeout=timeout_s) for t in self._targets]

    def close(self) -> None:
        for target in self._targets:
            target.channel.close()
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EmbeddedServer:
    """`python -m sandbox_service serve` on a free loopback port, owned by this process.

    The server exits when our end of its stdin closes, so it never outlives its parent.
    """

    def __init__(self, backend: str = "auto", workers: int | None = None, start_timeout_s: float = 180.0,
                 gpu_memory_fraction: float | None = None, log_path: Path | None = None):
        self._dir = Path(tempfile.mkdtemp(prefix="tritonrl-embedded-"))
        ready = self._dir / "ready.json"
        log_path = Path(log_path) if log_path is not None else self._dir / "server.log"
        command = [
            sys.executable, "-m", "sandbox_service", "serve", "--host", "127.0.0.1", "--port", "0",
            "--backend", backend, "--ready-file", str(ready), "--exit-on-stdin-eof",
        ]
        if workers:
            command += ["--workers", str(workers)]
        if gpu_memory_fraction is not None:
            command += ["--gpu-memory-fraction", str(gpu_memory_fraction)]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        self._log = open(log_path, "wb")
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + start_timeout_s
        while not ready.exists():
            if self._process.poll() is not None:
                raise RuntimeError(f"the embedded sandbox server exited: {log_path.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the embedded sandbox server did not start within {start_timeout_s:.0f} s")
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        self.address = info["address"]
        self.backend = info["backend"]

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.close()  # the server's stdin watcher starts a graceful stop
            except OSError:
                pass
            try:
                self._process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)
