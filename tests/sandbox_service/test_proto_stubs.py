"""The committed gRPC stubs are exactly what the pinned grpcio-tools generates from protos/."""

from __future__ import annotations

import pytest

from sandbox_service.proto_gen import GENERATED_FILES, REPO_ROOT, generate


def test_committed_stubs_match_the_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools is in the dev extra")
    generate(tmp_path)
    for name in GENERATED_FILES:
        fresh = (tmp_path / name).read_text()
        committed = (REPO_ROOT / name).read_text()
        assert committed == fresh, f"{name} is stale: run python -m sandbox_service.proto_gen"
