"""Red team 2: the several-GPU front (sandbox_service/fanout.py) from the side of an ordinary gRPC client.

Each test asserts the secure behaviour, so each FAILS while its flaw is there. The front is run in-process over
lane servers that are in-process stand-ins (a gRPC Sandbox service on a Unix socket that answers slowly and
with the same RESOURCE_EXHAUSTED a full lane server gives): the front does not care what a lane server runs,
and the real ones cost a CUDA lane each.

- FINDING fanout-stream-cancel-hang: when an EvaluateStream ends early (the client's deadline, a cancel, a
  trainer that stops reading), the front cancels the forwarded calls; `future.result()` then raises
  grpc.FutureCancelledError, which is no grpc.RpcError, so `call` lets it out, `one` puts no answer, and the
  stream's generator waits in `answers.get()` for ever. Every such stream holds one of the front's gRPC
  threads for good: a client with a deadline (SandboxClient.evaluate_stream always sets one) wears the front
  down until it answers nothing at all (denial of service).
- FINDING fanout-stream-room-per-stream: the room a stream is read with is a semaphore of the lanes' whole
  capacity made per stream, so two streams (two trainers, or a stream beside unary callers) forward up to
  twice what the lane servers hold; a lane server's RESOURCE_EXHAUSTED moves the request on, and when every
  lane server is full the stream answers `infra_error` (which trainers mask). The one-process server's stream
  waits for room instead (scheduler.submit(block=True)) and never answers load with infra_error.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent import futures

import grpc
import pytest

from fanout_support import StandInFront, request
from sandbox_service.convert import result_from_pb, result_to_pb
from sandbox_service.results import EvalResult, Status
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc


class _StandInLane(pb_grpc.SandboxServicer):
    """A lane server's Evaluate: `capacity` at a time (beyond: RESOURCE_EXHAUSTED, as a full queue answers),
    each taking `seconds` (or until its caller goes away)."""

    def __init__(self, capacity: int, seconds: float):
        self.capacity, self.seconds = capacity, seconds
        self.in_flight = 0
        self.lock = threading.Lock()

    def Evaluate(self, request, context):
        with self.lock:
            if self.in_flight >= self.capacity:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "the queue is full")
            self.in_flight += 1
        try:
            deadline = time.monotonic() + self.seconds
            while time.monotonic() < deadline and context.is_active():
                time.sleep(0.02)
            result = EvalResult(Status.OK)
            return pb.EvaluateResponse(request_id=request.request_id, result=result_to_pb(result))
        finally:
            with self.lock:
                self.in_flight -= 1

    def GetServerInfo(self, request, context):
        return pb.ServerInfo(backend="interpreter", workers=1, queue_capacity=self.capacity - 1)


class _DaemonPool:
    """A fixed number of gRPC handler threads, as the front's ThreadPoolExecutor gives, but daemon threads: a
    handler the flaw leaves waiting for ever must not keep the test process from exiting."""

    def __init__(self, threads: int):
        self.work: queue.Queue = queue.Queue()
        for _ in range(threads):
            threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            future, fn, args, kwargs = self.work.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # noqa: BLE001 - handed to the future, as an executor does
                    future.set_exception(exc)

    def submit(self, fn, *args, **kwargs) -> futures.Future:
        future: futures.Future = futures.Future()
        self.work.put((future, fn, args, kwargs))
        return future


def _front(lanes: int, capacity: int, seconds: float, threads: int) -> StandInFront:
    return StandInFront(lanes, capacity, lambda: _StandInLane(capacity, seconds), _DaemonPool(threads))


@pytest.fixture
def front_factory():
    made = []

    def make(**kwargs) -> StandInFront:
        made.append(_front(**kwargs))
        return made[-1]

    yield make
    for front in made:
        front.close()


# FINDING fanout-stream-cancel-hang
def test_a_stream_that_ends_early_gives_its_front_thread_back(front_factory):
    """Two streams whose deadline passes while their evaluation runs; the front has two gRPC threads. Once
    both streams are over, the front must still answer (it has nothing in flight)."""
    front = front_factory(lanes=2, capacity=4, seconds=30.0, threads=2)
    for index in range(2):
        with pytest.raises(grpc.RpcError) as ended:
            list(front.stub.EvaluateStream(iter([request(f"s{index}")]), timeout=1.0))
        assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(1.0)  # the cancellation reaches the front's callbacks
    try:
        front.stub.GetServerInfo(pb.ServerInfoRequest(), timeout=5.0)
    except grpc.RpcError as exc:
        pytest.fail(f"after two streams ended by their deadline the front answers nothing ({exc.code().name}): "
                    "each stream's handler waits for ever for an answer its cancelled forwarded call never puts")


# FINDING fanout-stream-room-per-stream
def test_two_streams_never_get_infra_error_because_the_lanes_are_busy(front_factory):
    """Two lane servers holding 2 evaluations each; two clients stream 4 requests each. The one-process server
    would make them wait for room; no request may come back infra_error for load."""
    front = front_factory(lanes=2, capacity=2, seconds=1.0, threads=8)
    answers: dict[int, list] = {}

    def stream(index: int) -> None:
        requests = iter([request(f"{index}-{i}") for i in range(4)])
        answers[index] = [result_from_pb(r.result) for r in front.stub.EvaluateStream(requests, timeout=60)]

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    results = [r for index in sorted(answers) for r in answers[index]]
    assert len(results) == 8, f"{len(results)} answers for 8 requests"
    load_errors = [r.error for r in results if r.status == Status.INFRA_ERROR]
    assert not load_errors, (f"{len(load_errors)}/8 stream requests came back infra_error because the lane servers "
                             f"were busy: {load_errors[:2]}")
