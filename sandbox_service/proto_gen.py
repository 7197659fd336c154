"""Generate the Python gRPC stubs for protos/ into tritonrl/ (committed; the GPU image has no grpc_tools).

Usage: python -m sandbox_service.proto_gen [--out DIR]
The stubs are pinned to the grpcio-tools version in pyproject's `dev` extra; tests/sandbox_service/
test_proto_stubs.py regenerates them into a temporary folder and fails if they differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = REPO_ROOT / "protos"
PROTO_FILES = ["tritonrl/sandbox/v1/sandbox.proto"]
GENERATED_FILES = ["tritonrl/sandbox/v1/sandbox_pb2.py", "tritonrl/sandbox/v1/sandbox_pb2_grpc.py"]


def generate(out_dir: Path) -> list[Path]:
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    args = ["protoc", f"-I{PROTO_ROOT}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *PROTO_FILES]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    return [out_dir / name for name in GENERATED_FILES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT)
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path.relative_to(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
