"""The gRPC server: Sandbox service + standard health service, over the Scheduler.

- Evaluate, Validate and Inductor run as jobs of the scheduler (see their comments in the .proto).
- Evaluate: RESOURCE_EXHAUSTED when the queue is full; the call's deadline and cancellation reach the
  running evaluation (its children are killed).
- EvaluateStream: requests are read only while the queue has room, so the stream is flow-controlled;
  results come back in completion order.
- Shutdown (SIGTERM/SIGINT): health goes NOT_SERVING, new calls are refused, queued jobs are answered
  with infra_error, running ones get `grace_s` to finish and are then cancelled.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from sandbox_service import __version__
from sandbox_service.client import MESSAGE_OPTIONS
from sandbox_service.convert import (
    inductor_options_from_pb, inductor_to_pb, input_sets_from_pb, options_from_pb, result_to_pb,
    validate_options_from_pb, validation_to_pb,
)
from sandbox_service.devices import BackendInfo, resolve_backend
from sandbox_service.fanout import FanoutServer, lane_server_args, log_level_name
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status
from sandbox_service.verifier.llm_judge import JudgeConfig, OpenAIChatJudge
from sandbox_service.scheduler import (
    Job, QueueFull, Scheduler, SchedulerConfig, ShuttingDown, default_workers, evaluation_job, inductor_job,
    validation_batch_job, validation_job,
)
from sandbox_service.streams import AnswerStream, InFlight, answer_stream, stream_slots
from sandbox_service.validation import MAX_BATCH
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Sandbox"].full_name


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    backend: str = "auto"
    gpus: tuple[int, ...] = ()
    workers: int | None = None  # per lane
    queue_capacity: int = 64
    warm: int | None = None
    judges: int | None = None  # judge processes per lane (default: 8 on a GPU, 1 on the CPU)
    gpu_memory_fraction: float = 0.9
    grace_s: float = 30.0
    default_options: EvalOptions = dataclasses.field(default_factory=EvalOptions)
    judge: JudgeConfig | None = None  # the optional LLM judge (off by default)


class SandboxServicer(pb_grpc.SandboxServicer):
    def __init__(self, scheduler: Scheduler, info: BackendInfo, defaults: EvalOptions, threads: int):
        self.scheduler = scheduler
        self.info = info
        self.defaults = defaults
        self.stream_slots = stream_slots(threads)

    def _parse(self, request: pb.EvaluateRequest) -> Job:
        """A job for a request; ValueError says what is wrong with it."""
        if not request.reference_source.strip() or not request.candidate_source.strip():
            raise ValueError("reference_source and candidate_source are required")
        options = options_from_pb(request.options, self.defaults)
        return evaluation_job(request.reference_source, request.candidate_source, options,
                              input_sets_from_pb(request.input_sets))

    def Evaluate(self, request, context):
        try:
            job = self._parse(request)
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        result = self._run_unary(job, context)
        return pb.EvaluateResponse(request_id=request.request_id, result=result_to_pb(result))

    def Validate(self, request, context):
        try:
            if not request.reference_source.strip():
                raise ValueError("reference_source is required")
            job = validation_job(request.reference_source, input_sets_from_pb(request.input_sets),
                                 validate_options_from_pb(request.options))
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        result = self._run_unary(job, context)
        return pb.ValidateResponse(request_id=request.request_id, result=validation_to_pb(result))

    def ValidateBatch(self, request, context):
        try:
            if not 0 < len(request.items) <= MAX_BATCH:
                raise ValueError(f"a batch holds 1 to {MAX_BATCH} items, got {len(request.items)}")
            items = []
            for index, item in enumerate(request.items):
                if not item.reference_source.strip():
                    raise ValueError(f"item {index}: reference_source is required")
                items.append((item.reference_source, input_sets_from_pb(item.input_sets)))
            job = validation_batch_job(items, validate_options_from_pb(request.options))
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        results = self._run_unary(job, context)
        return pb.ValidateBatchResponse(request_id=request.request_id, results=[validation_to_pb(r) for r in results])

    def Inductor(self, request, context):
        try:
            if not request.reference_source.strip():
                raise ValueError("reference_source is required")
            job = inductor_job(request.reference_source, inductor_options_from_pb(request.options))
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        result = self._run_unary(job, context)
        return pb.InductorResponse(request_id=request.request_id, result=inductor_to_pb(result))

    def _run_unary(self, job: Job, context):
        remaining = context.time_remaining()
        if remaining is not None:
            job.deadline = time.monotonic() + remaining
        try:
            self.scheduler.submit(job)
        except QueueFull as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except ShuttingDown:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        context.add_callback(job.cancel)  # runs when the RPC ends for any reason, a cancelled caller included
        return job.result()

    def EvaluateStream(self, request_iterator, context):
        """Every request read gets exactly one response, in completion order (streams.AnswerStream)."""
        jobs = InFlight()
        context.add_callback(jobs.cancel_all)

        def answer(stream: AnswerStream, request_id: str, result: EvalResult) -> None:
            stream.put(pb.EvaluateResponse(request_id=request_id, result=result_to_pb(result)))

        def finished(stream: AnswerStream, request_id: str, job: Job, future) -> None:
            jobs.discard(job)
            answer(stream, request_id, future.result())

        def feed(stream: AnswerStream) -> None:
            for request in request_iterator:
                stream.read += 1
                try:
                    job = self._parse(request)
                except ValueError as exc:
                    answer(stream, request.request_id, EvalResult(Status.INFRA_ERROR, error=f"invalid request: {exc}"))
                    continue
                jobs.add(job)
                try:
                    self.scheduler.submit(job, block=True, should_stop=lambda: not context.is_active())
                except ShuttingDown:
                    answer(stream, request.request_id, EvalResult(Status.INFRA_ERROR, error="the server is shutting down"))
                    break
                job.future.add_done_callback(lambda f, rid=request.request_id, j=job: finished(stream, rid, j, f))

        yield from answer_stream(self.stream_slots, context, feed, "stream-feeder")

    def GetServerInfo(self, request, context):
        return pb.ServerInfo(
            server_version=__version__,
            backend=self.info.backend,
            devices=list(self.info.device_names),
            python_version=self.info.python_version,
            torch_version=self.info.torch_version,
            triton_version=self.info.triton_version,
            workers=self.scheduler.workers,
            queue_depth=self.scheduler.queue_depth,
            queue_capacity=self.scheduler.config.queue_capacity,
            in_flight=self.scheduler.in_flight,
            evaluations_done=self.scheduler.done,
        )


class SandboxServer:
    """A running server; `stop()` shuts it down gracefully."""

    def __init__(self, config: ServerConfig):
        self.info = resolve_backend(config.backend, list(config.gpus) or None)
        workers = config.workers or default_workers(self.info.backend)
        self.scheduler = Scheduler(
            SchedulerConfig(
                backend=self.info.backend,
                gpus=self.info.gpus,
                workers_per_lane=workers,
                queue_capacity=config.queue_capacity,
                warm_per_lane=config.warm,
                judges_per_lane=config.judges,
                gpu_memory_fraction=config.gpu_memory_fraction,
                judge=OpenAIChatJudge(config.judge) if config.judge else None,
            )
        )
        self.config = config
        threads = config.queue_capacity + self.scheduler.workers + 16
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=threads),
            options=MESSAGE_OPTIONS,
        )
        pb_grpc.add_SandboxServicer_to_server(
            SandboxServicer(self.scheduler, self.info, config.default_options, threads), self._grpc
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._grpc)
        # `unix:PATH` listens on a Unix socket (a lane server behind fanout.FanoutServer), otherwise HOST:PORT.
        self._unix = config.host.startswith("unix:")
        bind = config.host if self._unix else f"{config.host}:{config.port}"
        self.port = self._grpc.add_insecure_port(bind)
        if self.port == 0:
            raise RuntimeError(f"could not bind {bind}")
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        if self._unix:
            return self.config.host
        host = "127.0.0.1" if self.config.host in ("0.0.0.0", "::", "[::]") else self.config.host
        return f"{host}:{self.port}"

    def start(self) -> SandboxServer:
        self._grpc.start()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("sandbox serving on %s (backend %s, devices %s, %d workers)", self.address, self.info.backend,
                 ", ".join(self.info.device_names), self.scheduler.workers)
        return self

    def stop(self, grace_s: float | None = None) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        grace = self.config.grace_s if grace_s is None else grace_s
        self.health.enter_graceful_shutdown()
        self.scheduler.shutdown(grace)
        self._grpc.stop(grace=2.0).wait()
        log.info("sandbox stopped after %d evaluations", self.scheduler.done)

    def wait(self) -> None:
        self._stopped.wait()


def make_server(config: ServerConfig) -> SandboxServer | FanoutServer:
    """One process for one lane (a GPU, or the interpreter); for several GPUs a front over one lane server
    process per GPU (fanout.py: one process's GIL would cap the host)."""
    info = resolve_backend(config.backend, list(config.gpus) or None)
    if info.backend == "cuda" and len(info.gpus) > 1 and not config.host.startswith("unix:"):
        return FanoutServer(config.host, config.port, info, lane_server_args(config), log_level_name(), config.grace_s)
    return SandboxServer(config)


def serve_forever(config: ServerConfig, ready_file: Path | None = None, exit_on_stdin_eof: bool = False) -> int:
    server = make_server(config).start()
    if ready_file is not None:
        tmp = ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"address": server.address, "port": server.port, "backend": server.info.backend}))
        tmp.replace(ready_file)
    print(f"sandbox listening on {server.address} (backend {server.info.backend})", flush=True)

    def handle(signum, frame):
        threading.Thread(target=server.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    if exit_on_stdin_eof:
        def watch_stdin() -> None:
            sys.stdin.buffer.read()  # returns at EOF: the parent that started us is gone
            server.stop()

        threading.Thread(target=watch_stdin, daemon=True).start()
    server.wait()
    return 0
