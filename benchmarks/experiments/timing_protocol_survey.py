"""One-off survey: what the timing protocol does to an RL-sized candidate's figure, its spread and the GPU time
a timed batch holds (issue 20: the hold bounds the sandbox's timed evaluations a minute; the figure must agree
with the in-process design's within 5%).

For each RL-sized candidate of benchmarks/rl_problems.py, traced as the tracer traces it and replayed in this
process on the GPU, `--batches` batches of each protocol, interleaved:
- `forward_sync`: the candidate's own ModelNew on the same inputs every run, a synchronisation before each run
  (the in-process design's figure, 08542ea);
- `replay_sync`: the executor's replay on fresh inputs for every run, synchronised (the executor until now);
- `replay_lead{0,40,250}`: the same runs queued with no synchronisation between them, the GPU given a spin of
  that many microseconds before each start event (timing.time_cuda's `lead_us`);
- `forward_lead250`: the candidate's own forward, same inputs, queued (the in-process design under this protocol);
- `replay_lead250_30`: the default protocol with 30 runs instead of 100;
- `reference_sync`, `reference_lead250`: the PyTorch reference on fresh inputs (the speedup's denominator).
Per protocol: the median of the batches' medians, their spread (standard deviation over mean), and the batch's
wall time per run (what holds the GPU). With `--cpu-load N`, N busy processes share the host meanwhile (the
server's tracers and judges do when it is loaded).

    python benchmarks/experiments/timing_protocol_survey.py [--batches 6] [--cpu-load 12] [--out survey.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from replay_overhead import loaded_cases  # noqa: E402


def _spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--cpu-load", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    from sandbox_service import timing
    from sandbox_service.executor import runner

    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.cpu_load)]
    for burner in burners:
        burner.start()
    device = torch.device("cuda")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonrl-survey-") as tmp:
        for loaded in loaded_cases(Path(tmp), device):
            case, reference, model, ref_model, same = (loaded.case, loaded.reference, loaded.model,
                                                       loaded.ref_model, loaded.inputs)

            def batch(fn, runs: int, seed: int | None, lead_us: float | None) -> tuple[float, float]:
                current: dict = {"x": same}
                before = None
                if seed is not None:
                    made = runner.timing_inputs({"timing_runs": runs, "trial_key": "k" * 32}, reference, seed, device)

                    def before(i: int) -> None:
                        current.pop("x", None)
                        current["x"] = made(i)
                started = time.perf_counter()
                stats = timing.time_cuda(lambda: fn(current["x"]), warmup=3, runs=runs, method=timing.CUDA_EVENTS,
                                         before_run=before, lead_us=lead_us)
                return stats.median_us, (time.perf_counter() - started) / (runs + 3) * 1e6

            forward, replayed, referenced = (lambda x: model(*x)), loaded.replay.run, (lambda x: ref_model(*x))
            protocols = {
                "forward_sync": (forward, 100, False, None),
                "replay_sync": (replayed, 100, True, None),
                "replay_lead0": (replayed, 100, True, 0.0),
                "replay_lead40": (replayed, 100, True, 40.0),
                "replay_lead250": (replayed, 100, True, 250.0),
                "forward_lead250": (forward, 100, False, 250.0),
                "replay_lead250_30": (replayed, 30, True, 250.0),
                "reference_sync": (referenced, 100, True, None),
                "reference_lead250": (referenced, 100, True, 250.0),
            }
            for fn, runs, fresh, lead in protocols.values():  # compilation, first allocations
                batch(fn, 10, 1 if fresh else None, lead)
            medians: dict[str, list[float]] = {name: [] for name in protocols}
            walls: dict[str, list[float]] = {name: [] for name in protocols}
            for b in range(args.batches):
                for name, (fn, runs, fresh, lead) in protocols.items():
                    median, wall = batch(fn, runs, 1000 * b + 7 if fresh else None, lead)
                    medians[name].append(median)
                    walls[name].append(wall)
            row = {"case": f"{case.problem}/{case.variant}"}
            for name in protocols:
                row[name] = {"median_us": round(statistics.median(medians[name]), 2),
                             "cv": round(statistics.pstdev(medians[name]) / statistics.fmean(medians[name]), 4),
                             "wall_per_run_us": round(statistics.median(walls[name]), 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    stop.set()

    def ratio(a: str, b: str) -> float:
        return round(statistics.median(r[a]["median_us"] / r[b]["median_us"] for r in rows), 4)

    summary = {
        "device": torch.cuda.get_device_name(), "batches": args.batches, "cpu_load": args.cpu_load,
        "median_over_candidates": {
            name: {"over_forward_sync": ratio(name, "forward_sync"),
                   "cv": round(statistics.median(r[name]["cv"] for r in rows), 4),
                   "wall_per_run_us": round(statistics.median(r[name]["wall_per_run_us"] for r in rows), 1)}
            for name in rows[0] if name != "case"},
        "replay_over_forward_lead250": ratio("replay_lead250", "forward_lead250"),
        "speedup_lead250_over_sync": round(statistics.median(
            (r["reference_lead250"]["median_us"] / r["replay_lead250"]["median_us"])
            / (r["reference_sync"]["median_us"] / r["replay_sync"]["median_us"]) for r in rows), 4),
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
