"""The gRPC service end to end: every RPC, concurrency, backpressure, deadlines, restarts, embedded mode."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sandbox_cases import CHEAT, CORRECT, INCORRECT, REFERENCE, fixture_candidate
from sandbox_service.client import Pair, RetryPolicy, SandboxClient
from sandbox_service.convert import options_to_pb, result_from_pb
from sandbox_service.options import EvalOptions, ValidateOptions
from sandbox_service.results import Status, ValidationStatus
from sandbox_service.server import SandboxServer, ServerConfig
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc

OPTIONS = EvalOptions(trials=2, timeout_s=60)


def request(candidate: str, options: EvalOptions = OPTIONS, request_id: str = "r") -> pb.EvaluateRequest:
    return pb.EvaluateRequest(
        request_id=request_id, reference_source=REFERENCE, candidate_source=candidate, options=options_to_pb(options)
    )


def stub_for(server: SandboxServer) -> pb_grpc.SandboxStub:
    return pb_grpc.SandboxStub(grpc.insecure_channel(server.address))


def test_evaluate_round_trip(server):
    response = stub_for(server).Evaluate(request(CORRECT, request_id="abc"), timeout=120)
    assert response.request_id == "abc"
    result = result_from_pb(response.result)
    assert result.status == Status.OK and result.correct and result.valid
    assert result.backend == "interpreter" and result.trials_passed == 2


def test_server_info_and_health(server):
    info = stub_for(server).GetServerInfo(pb.ServerInfoRequest(), timeout=10)
    assert info.backend == "interpreter" and info.workers == 2 and info.queue_capacity == 8
    assert info.torch_version and info.triton_version and info.devices
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.address))
    for service in ("", "tritonrl.sandbox.v1.Sandbox"):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_stream_answers_every_request_as_it_finishes(server):
    candidates = {"ok": CORRECT, "wrong": INCORRECT, "hack": CHEAT}
    responses = list(stub_for(server).EvaluateStream(iter(request(c, request_id=k) for k, c in candidates.items()), timeout=300))
    statuses = {r.request_id: result_from_pb(r.result).status for r in responses}
    assert statuses == {"ok": Status.OK, "wrong": Status.INCORRECT, "hack": Status.CHEAT}


def test_invalid_options_are_rejected(server):
    bad = request(CORRECT)
    bad.options.trials = 0
    with pytest.raises(grpc.RpcError) as error:
        stub_for(server).Evaluate(bad, timeout=30)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_concurrent_requests_through_the_client(server):
    pairs = [(REFERENCE, CORRECT), (REFERENCE, INCORRECT), (REFERENCE, CORRECT), (REFERENCE, fixture_candidate("segfault"))]
    with SandboxClient([server.address], default_options=OPTIONS) as client:
        results = dict(client.evaluate_many(pairs, max_concurrency=4))
    assert [results[i].status for i in range(4)] == [Status.OK, Status.INCORRECT, Status.OK, Status.RUNTIME_ERROR]


def test_validate_batch_through_the_client(server):
    broken = REFERENCE.replace("def forward(", "def forward_unused(")
    with SandboxClient([server.address]) as client:
        results = client.validate_batch([(REFERENCE, []), (broken, []), (REFERENCE, [])],
                                        ValidateOptions(seeds=2, timeout_s=60))
        assert [r.status for r in results] == [ValidationStatus.OK, ValidationStatus.INVALID, ValidationStatus.OK]
        with pytest.raises(ValueError, match="a batch holds 1 to 64 items"):
            client.validate_batch([])


def test_client_stream(server):
    with SandboxClient([server.address], default_options=OPTIONS) as client:
        results = dict(client.evaluate_stream([Pair(REFERENCE, CORRECT), Pair(REFERENCE, INCORRECT)]))
    assert results[0].status == Status.OK and results[1].status == Status.INCORRECT


def test_deadline_expiry_cancels_the_evaluation(server):
    slow = request(fixture_candidate("timeout"), EvalOptions(trials=2, timeout_s=120))
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as error:
        stub_for(server).Evaluate(slow, timeout=4)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The evaluation whose caller left is cancelled (its children killed), not run for 120 s.
    while stub_for(server).GetServerInfo(pb.ServerInfoRequest(), timeout=10).in_flight and time.monotonic() - started < 30:
        time.sleep(0.2)
    assert stub_for(server).GetServerInfo(pb.ServerInfoRequest(), timeout=10).in_flight == 0
    assert time.monotonic() - started < 30


def test_full_queue_answers_resource_exhausted():
    server = SandboxServer(ServerConfig(port=0, backend="interpreter", workers=1, queue_capacity=1, warm=0, grace_s=1)).start()
    try:
        stub = stub_for(server)
        hang = request(fixture_candidate("timeout"), EvalOptions(trials=1, timeout_s=30))
        codes: list[grpc.StatusCode] = []

        def call() -> None:
            try:
                stub.Evaluate(hang, timeout=15)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                codes.append(exc.code())

        threads = [threading.Thread(target=call) for _ in range(4)]
        for thread in threads:
            thread.start()
            time.sleep(0.3)
        for thread in threads:
            thread.join()
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes
    finally:
        server.stop(grace_s=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_client_retries_across_a_server_restart():
    port = _free_port()
    config = ServerConfig(port=port, backend="interpreter", workers=1, queue_capacity=4, warm=0, grace_s=1)
    first = SandboxServer(config).start()
    first.stop(grace_s=0)  # the server goes away ...
    holder: dict = {}

    def restart_later() -> None:
        time.sleep(2.0)
        holder["server"] = SandboxServer(config).start()  # ... and comes back on the same address

    restarter = threading.Thread(target=restart_later)
    restarter.start()
    try:
        with SandboxClient([f"127.0.0.1:{port}"], retry=RetryPolicy(attempts=20, initial_backoff_s=0.2)) as client:
            result = client.evaluate(REFERENCE, CORRECT, OPTIONS, timeout_s=180)
        assert result.status == Status.OK, result.error
    finally:
        restarter.join()
        holder["server"].stop(grace_s=0)


def test_unreachable_servers_give_infra_error_not_an_exception():
    with SandboxClient([f"127.0.0.1:{_free_port()}"], retry=RetryPolicy(attempts=2, initial_backoff_s=0.05)) as client:
        result = client.evaluate(REFERENCE, CORRECT, OPTIONS, timeout_s=5)
    assert result.status == Status.INFRA_ERROR and "unavailable" in result.error


def test_embedded_mode_starts_and_stops_a_local_server():
    client = SandboxClient.embedded(backend="interpreter", workers=1)
    process = client._embedded._process
    try:
        assert client.server_info()[0].backend == "interpreter"
        assert client.evaluate(REFERENCE, INCORRECT, OPTIONS).status == Status.INCORRECT
    finally:
        client.close()
    assert process.poll() is not None


def test_an_embedded_server_s_log_can_be_kept(tmp_path):
    log = tmp_path / "server.log"
    client = SandboxClient.embedded(backend="interpreter", workers=1, server_log=log)
    try:
        assert client.evaluate(REFERENCE, INCORRECT, OPTIONS).status == Status.INCORRECT
    finally:
        client.close()
    assert "sandbox listening on" in log.read_text()


def test_graceful_shutdown_answers_everything_and_stops_serving():
    server = SandboxServer(ServerConfig(port=0, backend="interpreter", workers=1, queue_capacity=4, warm=0, grace_s=1)).start()
    stub = stub_for(server)
    hang = request(fixture_candidate("timeout"), EvalOptions(trials=1, timeout_s=120))
    answers: list = []

    def call() -> None:
        try:
            answers.append(result_from_pb(stub.Evaluate(hang, timeout=60).result))
        except grpc.RpcError as exc:
            answers.append(exc.code())

    callers = [threading.Thread(target=call) for _ in range(2)]  # one runs, one waits in the queue
    for caller in callers:
        caller.start()
    time.sleep(3)
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.address))
    started = time.monotonic()
    stopper = threading.Thread(target=server.stop, kwargs={"grace_s": 1})
    stopper.start()
    time.sleep(0.3)
    try:  # while stopping the health service answers NOT_SERVING, or the server is already gone
        status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
    except grpc.RpcError:
        status = None
    assert status != health_pb2.HealthCheckResponse.SERVING
    stopper.join()
    for caller in callers:
        caller.join()
    assert time.monotonic() - started < 30, "a stop waits for the grace period, not for the evaluations"
    assert len(answers) == 2
    assert all(getattr(a, "status", None) == Status.INFRA_ERROR or isinstance(a, grpc.StatusCode) for a in answers)
    assert any(getattr(a, "status", None) == Status.INFRA_ERROR for a in answers)
