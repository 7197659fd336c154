"""The several-GPU front (sandbox_service/fanout.py) over in-process stand-in lane servers: a gRPC Sandbox
service per "GPU" on a Unix socket, answering as the test's servicer does. The front does not care what a
lane server runs, and the real ones cost a lane each."""

from __future__ import annotations

import itertools
import tempfile
import threading
from concurrent import futures
from pathlib import Path

import grpc

from sandbox_service.fanout import FanoutServicer, LaneLink, LaneServers
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc


class StandInFront:
    """FanoutServicer over `lanes` stand-in lane servers (each `make_lane()`, of `capacity`), served by `pool`
    (the front's gRPC handler threads; default: as FanoutServer sizes them)."""

    def __init__(self, lanes: int, capacity: int, make_lane, pool=None):
        self.folder = tempfile.TemporaryDirectory(prefix="tritonrl-fanout-front-")
        self.lane_servers, links = [], []
        for gpu in range(lanes):
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
            pb_grpc.add_SandboxServicer_to_server(make_lane(), server)
            address = f"unix:{Path(self.folder.name) / f'gpu{gpu}.sock'}"
            server.add_insecure_port(address)
            server.start()
            self.lane_servers.append(server)
            channel = grpc.insecure_channel(address)
            links.append(LaneLink(gpu, None, address, channel, pb_grpc.SandboxStub(channel), capacity=capacity))
        lanes_object = LaneServers.__new__(LaneServers)  # its routing, without starting processes
        lanes_object._lock, lanes_object._rotation, lanes_object.links = threading.Lock(), itertools.count(), links
        servicer = FanoutServicer(lanes_object, None)
        self.threads = servicer.threads
        self.front = grpc.server(pool or futures.ThreadPoolExecutor(max_workers=servicer.threads))
        pb_grpc.add_SandboxServicer_to_server(servicer, self.front)
        self.port = self.front.add_insecure_port("127.0.0.1:0")
        self.front.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pb_grpc.SandboxStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.front.stop(0)
        for server in self.lane_servers:
            server.stop(0)
        self.folder.cleanup()


def request(request_id: str) -> pb.EvaluateRequest:
    return pb.EvaluateRequest(request_id=request_id, reference_source="x", candidate_source="y")
