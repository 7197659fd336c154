"""The calling thread's CPU per source screen (format + static layers): in that thread, as the server did until
the screens moved to worker processes, against `evaluation._screen_source` with a `ScreenPool`.

40 candidates from `rl_problems.cases("gpu")` (each of the 20 twice, the second copy with a comment appended so
that every source is distinct), `--rounds` passes after one warm-up call per mode; `time.thread_time()` around
each screen. The server's GIL is what the pool spares: the thread's CPU is the figure that matters, the wall time
per screen is the latency an evaluation sees (one request at a time here).

    python benchmarks/screen_cpu.py [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rl_problems import cases  # noqa: E402

from sandbox_service.evaluation import _screen_source  # noqa: E402
from sandbox_service.options import EvalOptions  # noqa: E402
from sandbox_service.results import EvalResult, Status  # noqa: E402
from sandbox_service.verifier.format import check_format  # noqa: E402
from sandbox_service.verifier.screen_pool import ScreenPool  # noqa: E402
from sandbox_service.verifier.static_rules import check_static  # noqa: E402


def in_thread(reference: str, candidate: str, options: EvalOptions) -> bool:
    """What the server's thread did before: both layers here (then under a lock)."""
    fmt = check_format(candidate, options.candidate_format, options.max_source_bytes)
    return not fmt.violations and not check_static(fmt.code, options.policy, reference)


def measure(screen, items: list[tuple[str, str]], rounds: int) -> dict:
    started = time.thread_time()
    wall = time.monotonic()
    assert screen(*items[0])
    first = {"thread_cpu_ms": (time.thread_time() - started) * 1e3, "wall_ms": (time.monotonic() - wall) * 1e3}
    cpu, walls = [], []
    for _ in range(rounds):
        for reference, candidate in items:
            started, wall = time.thread_time(), time.monotonic()
            assert screen(reference, candidate), "an honest candidate was rejected"
            cpu.append(time.thread_time() - started)
            walls.append(time.monotonic() - wall)
    def summary(seconds: list[float]) -> dict[str, float]:
        return {"mean": round(statistics.mean(seconds) * 1e3, 3), "median": round(statistics.median(seconds) * 1e3, 3)}

    return {"screens": len(cpu), "first": {k: round(v, 3) for k, v in first.items()},
            "thread_cpu_ms": summary(cpu), "wall_ms": summary(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = cases("gpu")
    items = [(c.reference, c.candidate) for c in base] + [(c.reference, c.candidate + "\n# copy\n") for c in base]
    options = EvalOptions()
    out = {"in_thread": measure(lambda r, c: in_thread(r, c, options), items, args.rounds)}
    pool = ScreenPool().start()
    try:
        def pooled(reference: str, candidate: str) -> bool:
            result = EvalResult(status=Status.INFRA_ERROR)
            return _screen_source(reference, candidate, options, result, pool) is not None and result.valid

        out["pool"] = measure(pooled, items, args.rounds)
    finally:
        pool.close()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for mode, figures in out.items():
        print(f"{mode}: {figures['screens']} screens; calling thread's CPU per screen mean "
              f"{figures['thread_cpu_ms']['mean']:.3f} ms (median {figures['thread_cpu_ms']['median']:.3f}); "
              f"wall mean {figures['wall_ms']['mean']:.3f} ms (median {figures['wall_ms']['median']:.3f}); "
              f"first call {figures['first']['thread_cpu_ms']:.2f} ms CPU, {figures['first']['wall_ms']:.1f} ms wall")


if __name__ == "__main__":
    main()
