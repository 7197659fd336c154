"""Which generated references fail validation's float32 check (a 16-bit output not within its tolerance of
the same reference computed in float32), per family and dtype, through the sandbox's own `ValidateBatch`.

Only the float16 and bfloat16 tasks are validated (the check does not apply to the others). PyTorch computes
some 16-bit ops differently on each device (its CUDA scans accumulate in float16, its CPU scans in float32),
so run it on both: on the CPU interpreter and on a GPU sandbox.

    python benchmarks/float32_check_survey.py --per-family 12                     # the CPU interpreter
    python benchmarks/float32_check_survey.py --per-family 12 --backend cuda --out r.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from jaxrl.data.engine.generator import generate_tasks, list_families  # noqa: E402
from sandbox_service.client import SandboxClient  # noqa: E402
from sandbox_service.options import ValidateOptions  # noqa: E402

UNSTABLE = "unstable in its precision"
BATCH = 64  # the most references one ValidateBatch takes


def survey(client: SandboxClient, per_family: int, scale: str, seed: int) -> dict:
    families = [family.name for family in list_families()]
    tasks = [t for t in generate_tasks(seed, per_family * len(families), scale, families)
             if t.dtype in ("float16", "bfloat16")]
    options = ValidateOptions(time=False)
    started = time.monotonic()
    results = []
    for start in range(0, len(tasks), BATCH):
        group = tasks[start:start + BATCH]
        results += client.validate_batch([(task.code, task.input_sets) for task in group], options)
    validated, unstable, other = collections.Counter(), collections.Counter(), collections.Counter()
    examples: dict[str, str] = {}
    for task, result in zip(tasks, results):
        key = f"{task.family}/{task.dtype}"
        validated[key] += 1
        if UNSTABLE in result.reason:
            unstable[key] += 1
            examples.setdefault(key, f"{task.task_id}: {result.reason}")
        elif not result.ok:
            other[key] += 1
    return {"device": results[0].device if results else "", "scale": scale, "seed": seed, "per_family": per_family, "tasks": len(tasks),
            "seconds": round(time.monotonic() - started, 1), "validated": dict(sorted(validated.items())),
            "unstable": dict(sorted(unstable.items())), "other_invalid": dict(sorted(other.items())),
            "examples": examples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-family", type=int, default=12, help="tasks generated per family (16-bit ones kept)")
    parser.add_argument("--scale", default="cpu", choices=("cpu", "full"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--workers", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with SandboxClient.embedded(backend=args.backend, workers=args.workers) as client:
        report = survey(client, args.per_family, args.scale, args.seed)
    print(f"{report['tasks']} 16-bit tasks validated in {report['seconds']} s on {report['device']}")
    for key, count in report["unstable"].items():
        print(f"  unstable {key}: {count} of {report['validated'][key]}   e.g. {report['examples'][key][:160]}")
    print(f"  invalid for other reasons: {report['other_invalid']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
