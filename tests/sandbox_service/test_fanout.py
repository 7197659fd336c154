"""Several GPUs: a front forwards to one lane server process per GPU (here two interpreter lane servers, as
the CPU has no GPUs; the front does not care what a lane server runs on)."""

from __future__ import annotations

import os
import stat
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sandbox_cases import CHEAT, CORRECT, INCORRECT, REFERENCE
from sandbox_service.client import Pair, SandboxClient
from sandbox_service.convert import options_to_pb, result_from_pb
from sandbox_service.devices import BackendInfo
from sandbox_service.fanout import FanoutServer, lane_server_args
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status
from sandbox_service.server import ServerConfig
from sandbox_service.verifier.llm_judge import JudgeConfig
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc

OPTIONS = EvalOptions(trials=2, timeout_s=60)
LANE_ARGS = ["--backend", "interpreter", "--workers", "1", "--queue", "4", "--grace", "5"]


@pytest.fixture(scope="module")
def front():
    info = BackendInfo("interpreter", (0, 1), ("cpu 0", "cpu 1"), "", "", "")
    server = FanoutServer("127.0.0.1", 0, info, LANE_ARGS, "WARNING", grace_s=5).start()
    yield server
    server.stop()


def request(candidate: str, request_id: str = "r") -> pb.EvaluateRequest:
    return pb.EvaluateRequest(request_id=request_id, reference_source=REFERENCE, candidate_source=candidate,
                              options=options_to_pb(OPTIONS))


def lane_done(front: FanoutServer) -> list[int]:
    return [link.stub.GetServerInfo(pb.ServerInfoRequest(), timeout=10).evaluations_done for link in front.lanes.links]


def test_requests_spread_over_the_lane_servers_with_the_same_verdicts(front):
    before = lane_done(front)
    pairs = [Pair(REFERENCE, c, OPTIONS) for c in (CORRECT, INCORRECT, CHEAT, CORRECT, INCORRECT, CORRECT)]
    with SandboxClient([front.address]) as client:
        results = dict(client.evaluate_many(pairs))
    assert [results[i].status for i in range(6)] == [Status.OK, Status.INCORRECT, Status.CHEAT, Status.OK,
                                                     Status.INCORRECT, Status.OK]
    after = lane_done(front)
    assert all(a > b for a, b in zip(after, before)), (before, after)  # both lane servers did work


def test_the_stream_answers_every_request(front):
    stub = pb_grpc.SandboxStub(grpc.insecure_channel(front.address))
    candidates = {"ok": CORRECT, "wrong": INCORRECT, "hack": CHEAT, "ok2": CORRECT}
    responses = list(stub.EvaluateStream(iter(request(c, k) for k, c in candidates.items()), timeout=300))
    assert {r.request_id: result_from_pb(r.result).status for r in responses} == {
        "ok": Status.OK, "wrong": Status.INCORRECT, "hack": Status.CHEAT, "ok2": Status.OK}


def test_server_info_adds_up_the_lanes_and_health_is_serving(front):
    info = pb_grpc.SandboxStub(grpc.insecure_channel(front.address)).GetServerInfo(pb.ServerInfoRequest(), timeout=10)
    assert info.backend == "interpreter" and info.workers == 2 and info.queue_capacity == 8 and len(info.devices) == 2
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(front.address))
    assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status == \
        health_pb2.HealthCheckResponse.SERVING


def test_lane_sockets_are_the_owners_alone(front):
    assert stat.S_IMODE(os.stat(front.lanes.folder).st_mode) == 0o700
    assert all(link.address.startswith("unix:") for link in front.lanes.links)


def test_a_lane_server_that_dies_is_routed_around_and_started_again(front):
    dead = front.lanes.links[0]
    dead.process.kill()
    dead.process.wait()
    with SandboxClient([front.address]) as client:
        results = dict(client.evaluate_many([Pair(REFERENCE, CORRECT, OPTIONS)] * 3))
    assert all(r.status == Status.OK for r in results.values()), [r.error for r in results.values()]
    deadline = time.monotonic() + 120
    while front.lanes.links[0] is dead or not front.lanes.links[0].up:
        assert time.monotonic() < deadline, "the dead lane server was not started again"
        time.sleep(0.5)
    assert front.lanes.links[0].process.poll() is None


def test_stopping_the_front_stops_every_lane_server():
    info = BackendInfo("interpreter", (0, 1), ("cpu 0", "cpu 1"), "", "", "")
    server = FanoutServer("127.0.0.1", 0, info, LANE_ARGS, "WARNING", grace_s=5).start()
    processes, folder = [link.process for link in server.lanes.links], server.lanes.folder
    server.stop()
    assert all(p.poll() is not None for p in processes) and not folder.exists()


def test_lane_servers_get_the_fronts_settings_but_not_where_it_listens():
    config = ServerConfig(host="0.0.0.0", port=9000, workers=12, queue_capacity=32, judges=8, grace_s=7,
                          judge=JudgeConfig(url="http://judge:8000/v1", model="m", api_key_env="KEY"))
    args = lane_server_args(config)
    flags = dict(zip(args[::2], args[1::2]))
    assert flags["--workers"] == "12" and flags["--queue"] == "32" and flags["--judges"] == "8"
    assert flags["--backend"] == "cuda" and flags["--llm-judge-url"] == "http://judge:8000/v1"
    assert flags["--llm-judge-key-env"] == "KEY" and "--host" not in flags and "--port" not in flags
    assert "--warm" not in flags  # unset settings keep the lane server's defaults


@pytest.mark.gpu
def test_two_gpus_get_a_lane_server_each_and_time_candidates():
    import torch

    from sandbox_service.server import make_server

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    server = make_server(ServerConfig(port=0, backend="cuda", gpus=(0, 1), workers=2, queue_capacity=8)).start()
    try:
        assert isinstance(server, FanoutServer) and len(server.lanes.links) == 2
        with SandboxClient([server.address]) as client:
            results = dict(client.evaluate_many([Pair(REFERENCE, CORRECT, EvalOptions(trials=2, timing_runs=20))] * 4))
            info = client.server_info()[0]
        assert all(r.status == Status.OK and r.speedup is not None for r in results.values())
        assert len(info.devices) == 2 and info.workers == 4
        assert all(done > 0 for done in lane_done(server))
    finally:
        server.stop()
