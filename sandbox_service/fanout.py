"""More than one GPU: one server process per GPU (a *lane server*), behind this process's gRPC front.

Why: a lane's server side (message streams, checks, hand-overs, the screens) is Python that holds the GIL for
about 50 ms of each evaluation, so one process drives one GPU at about a core; with every GPU's lane in one
process the host stops scaling (measured: 1.11x with two GPUs). Here each lane server is a plain
`python -m sandbox_service serve --gpus I` listening on a Unix socket in a private folder (mode 0700: no
other user, and no candidate, whose jail cannot reach it, talks to it), and the front only forwards requests:
- a request goes to the lane server with the fewest in flight (ties rotate); one that answers
  RESOURCE_EXHAUSTED or UNAVAILABLE is skipped for that request, and the request tried on the next;
- EvaluateStream is read only while the lanes have room (their workers plus queues), every request gets
  one response, in completion order;
- a lane server that dies is started again (its requests in flight are retried elsewhere; meanwhile the
  others take every request);
- the front's caller going away cancels the forwarded call, which cancels the evaluation.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from sandbox_service.client import MESSAGE_OPTIONS
from sandbox_service.convert import result_to_pb
from sandbox_service.devices import BackendInfo
from sandbox_service.results import EvalResult, Status
from sandbox_service.streams import AnswerStream, InFlight, answer_stream, stream_slots
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

START_TIMEOUT_S = 600.0  # a lane server warms its judges and executors (CUDA contexts) before it is ready
RESTART_DELAY_S = 2.0
FRONT_EXTRA_THREADS = 32  # the front's gRPC handler threads beyond the lanes' capacity
FULL_LANES_WAIT_S = 0.2  # a streamed request every lane server refused (full) tries again after this
RETRIED_CODES = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Sandbox"].full_name


class LaneServerError(RuntimeError):
    """A lane server did not start."""


@dataclasses.dataclass(eq=False)
class LaneLink:
    """One lane server: its process, socket and stub, and the front's count of requests sent to it."""

    gpu: int
    process: subprocess.Popen
    address: str
    channel: grpc.Channel
    stub: pb_grpc.SandboxStub
    capacity: int
    in_flight: int = 0
    up: bool = True


class LaneServers:
    """Starts, watches and restarts one lane server per GPU; picks the one a request goes to."""

    def __init__(self, gpus: tuple[int, ...], serve_args: list[str], log_level: str, grace_s: float):
        self.serve_args, self.log_level, self.grace_s = serve_args, log_level, grace_s
        self.folder = Path(tempfile.mkdtemp(prefix="tritonrl-lanes-"))  # 0700: the sockets are the owner's alone
        self._lock = threading.Lock()
        self._rotation = itertools.count()
        self._stopping = threading.Event()
        self._starts = itertools.count()
        with futures.ThreadPoolExecutor(len(gpus)) as pool:
            self.links: list[LaneLink] = list(pool.map(self._start, gpus))
        self._watcher = threading.Thread(target=self._watch, name="lane-watcher", daemon=True)
        self._watcher.start()

    # -- processes -----------------------------------------------------------------------------
    def _start(self, gpu: int) -> LaneLink:
        number = next(self._starts)
        socket = self.folder / f"gpu{gpu}-{number}.sock"
        ready = self.folder / f"gpu{gpu}-{number}.ready"
        command = [sys.executable, "-m", "sandbox_service", "--log-level", self.log_level, "serve",
                   "--host", f"unix:{socket}", "--gpus", str(gpu), "--ready-file", str(ready),
                   "--exit-on-stdin-eof", *self.serve_args]
        process = subprocess.Popen(command, stdin=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            if process.poll() is not None:
                raise LaneServerError(f"the lane server for GPU {gpu} exited with {process.returncode} while starting")
            if time.monotonic() > deadline or self._stopping.is_set():
                process.kill()
                raise LaneServerError(f"the lane server for GPU {gpu} was not ready within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        address = json.loads(ready.read_text())["address"]
        channel = grpc.insecure_channel(address, options=MESSAGE_OPTIONS)
        stub = pb_grpc.SandboxStub(channel)
        info = stub.GetServerInfo(pb.ServerInfoRequest(), timeout=30)
        log.info("lane server for GPU %d ready on %s (pid %d, %d workers)", gpu, address, process.pid, info.workers)
        return LaneLink(gpu, process, address, channel, stub, capacity=info.workers + info.queue_capacity)

    def _watch(self) -> None:
        """Start again any lane server that died (not while stopping)."""
        while not self._stopping.wait(1.0):
            for index, link in enumerate(list(self.links)):
                if link.process.poll() is None:
                    continue
                with self._lock:
                    link.up = False
                log.error("the lane server for GPU %d exited with %s; starting it again", link.gpu, link.process.returncode)
                link.channel.close()
                time.sleep(RESTART_DELAY_S)
                try:
                    fresh = self._start(link.gpu)
                except LaneServerError as exc:
                    log.error("%s; trying again", exc)
                    continue
                with self._lock:
                    self.links[index] = fresh

    def stop(self) -> None:
        """Close every lane server's stdin (each stops after its own grace), then wait; kill what is left."""
        self._stopping.set()
        for link in self.links:
            try:
                link.process.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + self.grace_s + 30
        for link in self.links:
            try:
                link.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                link.process.kill()
                link.process.wait()
            link.channel.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- routing -------------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return sum(link.capacity for link in self.links)

    def acquire(self, skip: set[int]) -> LaneLink | None:
        """The lane server with the fewest requests in flight (ties rotate), counted as one more; None if
        every lane server is down or skipped."""
        with self._lock:
            candidates = [link for link in self.links if link.up and id(link) not in skip]
            if not candidates:
                return None
            turn = next(self._rotation)
            link = min(candidates, key=lambda l: (l.in_flight, (self.links.index(l) - turn) % len(self.links)))
            link.in_flight += 1
            return link

    def release(self, link: LaneLink) -> None:
        with self._lock:
            link.in_flight -= 1




class Forwarded(Exception):
    """A forwarded call failed with a status the front passes on."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code, self.details = code, details


class FanoutServicer(pb_grpc.SandboxServicer):
    def __init__(self, lanes: LaneServers, info: BackendInfo):
        self.lanes = lanes
        self.info = info
        # Room for streamed requests, shared by every stream (as the one-process server's queue is): a stream
        # is read only while the lanes have room, whatever other streams hold.
        self.room = threading.BoundedSemaphore(max(1, lanes.capacity))
        self.threads = lanes.capacity + FRONT_EXTRA_THREADS  # FanoutServer's gRPC handler threads
        self.stream_slots = stream_slots(self.threads)

    def call(self, method: str, request, timeout: float | None, on_cancel=None, in_flight: InFlight | None = None):
        """`method` on the least busy lane server; RESOURCE_EXHAUSTED and UNAVAILABLE move the request on to
        the next one. `on_cancel(fn)` registers how the caller's cancellation reaches the forwarded call; a
        stream's `in_flight` holds its forwarded calls while they run (and only then)."""
        skipped: set[int] = set()
        last = Forwarded(grpc.StatusCode.UNAVAILABLE, "no lane server is up")
        while True:
            link = self.lanes.acquire(skipped)
            if link is None:
                raise last
            try:
                future = getattr(link.stub, method).future(request, timeout=timeout)
                if on_cancel is not None:
                    on_cancel(future.cancel)
                if in_flight is not None:
                    in_flight.add(future)
                try:
                    return future.result()
                finally:
                    if in_flight is not None:
                        in_flight.discard(future)
            except grpc.FutureCancelledError:
                raise Forwarded(grpc.StatusCode.CANCELLED, "the caller went away") from None
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
                details = exc.details() if hasattr(exc, "details") else str(exc)
                if code not in RETRIED_CODES:
                    raise Forwarded(code, details) from None
                skipped.add(id(link))
                last = Forwarded(code, f"GPU {link.gpu}: {details}")
            finally:
                self.lanes.release(link)

    def _unary(self, method: str, request, context):
        try:
            return self.call(method, request, context.time_remaining(), lambda cancel: context.add_callback(cancel))
        except Forwarded as exc:
            context.abort(exc.code, exc.details)

    def Evaluate(self, request, context):
        return self._unary("Evaluate", request, context)

    def Validate(self, request, context):
        return self._unary("Validate", request, context)

    def ValidateBatch(self, request, context):
        return self._unary("ValidateBatch", request, context)

    def Inductor(self, request, context):
        return self._unary("Inductor", request, context)

    def EvaluateStream(self, request_iterator, context):
        """Read while the lanes have room; one response per request, in completion order (streams.AnswerStream)."""
        pending = InFlight()
        context.add_callback(pending.cancel_all)

        def one(stream: AnswerStream, request) -> None:
            """Exactly one answer, whatever happens: lanes that are all full are waited for (load is never
            an infra_error), a call cancelled with the stream is answered too (nobody reads it)."""
            try:
                while True:
                    try:
                        stream.put(self.call("Evaluate", request, None, in_flight=pending))
                        return
                    except Forwarded as exc:
                        if exc.code == grpc.StatusCode.RESOURCE_EXHAUSTED and context.is_active():
                            time.sleep(FULL_LANES_WAIT_S)
                            continue
                        error = f"{exc.code.name}: {exc.details}"
                        break
            except Exception as exc:  # noqa: BLE001 - the stream must get its answer
                error = f"the front failed: {type(exc).__name__}: {exc}"
            finally:
                self.room.release()
            result = EvalResult(Status.INFRA_ERROR, error=error)
            stream.put(pb.EvaluateResponse(request_id=request.request_id, result=result_to_pb(result)))

        def feed(stream: AnswerStream) -> None:
            with futures.ThreadPoolExecutor(max(1, self.lanes.capacity), thread_name_prefix="fanout") as pool:
                for request in request_iterator:
                    while not self.room.acquire(timeout=0.2):
                        if not context.is_active():
                            return
                    stream.read += 1
                    pool.submit(one, stream, request)

        yield from answer_stream(self.stream_slots, context, feed, "fanout-feeder")

    def GetServerInfo(self, request, context):
        infos = []
        for link in list(self.lanes.links):
            if not link.up:
                continue
            try:
                infos.append(link.stub.GetServerInfo(request, timeout=10))
            except grpc.RpcError:
                continue
        if not infos:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no lane server is up")
        first = infos[0]
        return pb.ServerInfo(
            server_version=first.server_version, backend=first.backend,
            devices=[d for info in infos for d in info.devices], python_version=first.python_version,
            torch_version=first.torch_version, triton_version=first.triton_version,
            workers=sum(i.workers for i in infos), queue_depth=sum(i.queue_depth for i in infos),
            queue_capacity=sum(i.queue_capacity for i in infos), in_flight=sum(i.in_flight for i in infos),
            evaluations_done=sum(i.evaluations_done for i in infos),
        )


class FanoutServer:
    """The front: the same service and health service as SandboxServer, over one lane server per GPU."""

    def __init__(self, host: str, port: int, info: BackendInfo, serve_args: list[str], log_level: str,
                 grace_s: float):
        self.info = info
        self.host = host
        self.lanes = LaneServers(info.gpus, serve_args, log_level, grace_s)
        servicer = FanoutServicer(self.lanes, info)
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=servicer.threads), options=MESSAGE_OPTIONS)
        pb_grpc.add_SandboxServicer_to_server(servicer, self._grpc)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._grpc)
        self.port = self._grpc.add_insecure_port(f"{host}:{port}")
        if self.port == 0:
            self.lanes.stop()
            raise RuntimeError(f"could not bind {host}:{port}")
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "[::]") else self.host
        return f"{host}:{self.port}"

    def start(self) -> FanoutServer:
        self._grpc.start()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("sandbox serving on %s: %d lane servers (one per GPU: %s)", self.address, len(self.lanes.links),
                 ", ".join(self.info.device_names))
        return self

    def stop(self, grace_s: float | None = None) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.health.enter_graceful_shutdown()
        self.lanes.stop()
        self._grpc.stop(grace=2.0).wait()
        log.info("sandbox front stopped")

    def wait(self) -> None:
        self._stopped.wait()


def lane_server_args(config) -> list[str]:
    """The `serve` flags a lane server gets from the front's ServerConfig (all but where to listen and GPUs)."""
    args = ["--queue", str(config.queue_capacity), "--gpu-memory-fraction", str(config.gpu_memory_fraction),
            "--grace", str(config.grace_s), "--backend", "cuda"]
    for flag, value in (("--workers", config.workers), ("--warm", config.warm), ("--judges", config.judges)):
        if value is not None:
            args += [flag, str(value)]
    if config.judge is not None:
        args += ["--llm-judge-url", config.judge.url, "--llm-judge-model", config.judge.model,
                 "--llm-judge-timeout", str(config.judge.timeout_s)]
        if config.judge.api_key_env:
            args += ["--llm-judge-key-env", config.judge.api_key_env]
    return args


def log_level_name() -> str:
    return logging.getLevelName(logging.getLogger().getEffectiveLevel())

