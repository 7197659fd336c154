"""Sandbox test fixtures: a warm CPU lane, the same with the in-process design (tests of that design's own
protocol and runtime monitor, kept while it ships), a GPU lane (gpu tests only) and a running server on a
free port."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from sandbox_service.lane import IN_PROCESS_DESIGN, Lane


@pytest.fixture(scope="session")
def cpu_lane():
    with tempfile.TemporaryDirectory(prefix="tritonrl-test-lane-") as root:
        lane = Lane.create("interpreter", None, warm=1, work_root=Path(root))
        yield lane
        lane.close()


@pytest.fixture(scope="session")
def in_process_lane():
    with tempfile.TemporaryDirectory(prefix="tritonrl-test-lane-") as root:
        lane = Lane.create("interpreter", None, warm=1, work_root=Path(root), design=IN_PROCESS_DESIGN)
        yield lane
        lane.close()


@pytest.fixture(scope="module")
def gpu_lane():
    with tempfile.TemporaryDirectory(prefix="tritonrl-test-gpu-lane-") as root:
        lane = Lane.create("cuda", 0, warm=1, work_root=Path(root))
        yield lane
        lane.close()


@pytest.fixture(scope="module")
def in_process_gpu_lane():
    with tempfile.TemporaryDirectory(prefix="tritonrl-test-gpu-lane-") as root:
        lane = Lane.create("cuda", 0, warm=1, work_root=Path(root), design=IN_PROCESS_DESIGN)
        yield lane
        lane.close()


@pytest.fixture(scope="session")
def server():
    from sandbox_service.server import SandboxServer, ServerConfig

    server = SandboxServer(ServerConfig(port=0, backend="interpreter", workers=2, queue_capacity=8, warm=1, grace_s=5)).start()
    yield server
    server.stop(grace_s=2)
