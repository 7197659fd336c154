"""Record what Inductor writes for the fixture references, for the converter's tests (not a test itself).

The converter reads text, and that text changes with torch's version and the device: the tests convert
captures made with the CPU torch of the development machine and with the CUDA torch of the GPU machine.
Run it on each machine to refresh them:

    TRITON_INTERPRET=1 python tests/sandbox_service/inductor/capture_fixtures.py cpu
    python3 tests/sandbox_service/inductor/capture_fixtures.py cuda [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", choices=["cpu", "cuda"])
    parser.add_argument("--out", type=Path, default=FIXTURES / "captures")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))
    import torch

    from sandbox_service.inductor.capture import CaptureError, capture
    from sandbox_service.worker import harness

    args.out.mkdir(parents=True, exist_ok=True)
    version = torch.__version__.split("+")[0]
    for reference in sorted(FIXTURES.glob("*.py")):
        module = harness.load_problem_sets(reference, [], 0)[0][1]
        try:
            captured = capture(module, torch.device(args.device), 42, Path(tempfile.mkdtemp()))
        except CaptureError as exc:
            print(f"{reference.stem}: {exc}")
            continue
        record = {"torch": torch.__version__, "device": args.device, **dataclasses.asdict(captured)}
        path = args.out / f"{reference.stem}.{args.device}-torch{version}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{reference.stem}: {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
