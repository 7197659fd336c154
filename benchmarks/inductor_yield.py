"""The Inductor path's yield: how many generated references become a standalone ModelNew that the strict
verifier accepts, per family, why the others fail, and (on a GPU) how fast the modules run against the
eager PyTorch reference, timed side by side by the sandbox in the same job.

For each family, `--per-family` tasks from the data engine's generator: the sandbox's `Inductor` call, then
an evaluation of the module against the reference on the task's own inputs and every input set (strict
policy; timed on a GPU). Templated families are included too: Inductor is the fallback where a template fails.

    python benchmarks/inductor_yield.py --scale cpu --per-family 1                  # the CPU interpreter
    python benchmarks/inductor_yield.py --scale full --per-family 2 --backend cuda --out r.json
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from jaxrl.data.engine.generator import generate_task, list_families  # noqa: E402
from sandbox_service.client import SandboxClient  # noqa: E402
from sandbox_service.options import CandidateFormat, EvalOptions, InductorOptions, Policy  # noqa: E402
from sandbox_service.results import InductorStatus, Status  # noqa: E402


def run_task(client: SandboxClient, task, timed: bool, trials: int) -> dict:
    started = time.monotonic()
    made = client.inductor(task.code, InductorOptions())
    row = {"family": task.family, "task_id": task.task_id, "inductor": made.status.value, "reason": made.reason,
           "kernels": made.kernels, "inductor_s": made.duration_s, "verdict": None, "speedup": None}
    if made.status == InductorStatus.OK:
        options = EvalOptions(trials=trials, time=timed, policy=Policy.STRICT, candidate_format=CandidateFormat.CODE)
        verdict = client.evaluate(task.code, made.source, options, input_sets=task.input_sets)
        row["verdict"] = verdict.status.value
        row["speedup"] = verdict.speedup
        if verdict.status != Status.OK:
            row["reason"] = (verdict.violations[0].message if verdict.violations else verdict.error)[:300]
    row["wall_s"] = round(time.monotonic() - started, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu", choices=["cpu", "full"])
    parser.add_argument("--per-family", type=int, default=1)
    parser.add_argument("--families", help="comma-separated (default: every family)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    parser.add_argument("--workers", type=int, help="sandbox workers (default: the machine's cores)")
    parser.add_argument("--concurrency", type=int, default=8, help="tasks in flight")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--time-budget", type=float, default=0, help="stop submitting after this many seconds (0: none)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    families = args.families.split(",") if args.families else [f.name for f in list_families()]
    tasks = [generate_task(f, args.seed, args.scale, index) for f in families for index in range(args.per_family)]
    started = time.monotonic()
    rows = []
    with SandboxClient.embedded(backend=args.backend, workers=args.workers) as client:
        backend = client.server_info()[0].backend
        timed = backend == "cuda"
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            futures = []
            for task in tasks:
                futures.append(pool.submit(
                    lambda t: None if args.time_budget and time.monotonic() - started > args.time_budget
                    else run_task(client, t, timed, args.trials), task))
            for future in futures:
                row = future.result()
                if row is not None:
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    wall = time.monotonic() - started

    by_family = collections.defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    print(f"\n{'family':<20} {'tasks':>5} {'module':>6} {'ok':>4} {'speedup (median)':>17}  first failure")
    for family in families:
        items = by_family.get(family, [])
        if not items:
            continue
        ok = [r for r in items if r["verdict"] == "ok"]
        speedups = [r["speedup"] for r in ok if r["speedup"] is not None]
        failure = next((f"{r['inductor'] if r['verdict'] is None else r['verdict']}: {r['reason'][:70]}"
                        for r in items if r["verdict"] != "ok"), "")
        median = f"{statistics.median(speedups):.2f}x" if speedups else "-"
        print(f"{family:<20} {len(items):>5} {sum(r['inductor'] == 'ok' for r in items):>6} {len(ok):>4} "
              f"{median:>17}  {failure}")
    ok = [r for r in rows if r["verdict"] == "ok"]
    speedups = [r["speedup"] for r in ok if r["speedup"] is not None]
    reasons = collections.Counter((r["inductor"] if r["verdict"] is None else r["verdict"]) for r in rows
                                  if r["verdict"] != "ok")
    summary = {
        "backend": backend, "scale": args.scale, "tasks": len(rows), "modules": sum(r["inductor"] == "ok" for r in rows),
        "verified_ok": len(ok), "yield": round(len(ok) / max(1, len(rows)), 3), "failures": dict(reasons),
        "median_speedup_vs_eager": round(statistics.median(speedups), 3) if speedups else None,
        "faster_than_eager": sum(s > 1.0 for s in speedups), "wall_s": round(wall, 1),
        "median_inductor_s": round(statistics.median(r["inductor_s"] for r in rows), 2) if rows else None,
    }
    print(f"\n{json.dumps(summary)}")
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
