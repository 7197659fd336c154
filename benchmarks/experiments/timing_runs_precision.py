"""One-off survey: does a timed batch of 30 runs give the same figure as one of 100, and how much more does it
move from batch to batch? (The question behind an RL configuration with fewer timed runs: benchmarks/RESULTS.md,
issue 20.)

For a few RL-sized candidates of benchmarks/rl_problems.py, traced as the tracer traces them and replayed in this
process on the GPU with fresh inputs for every run (as the executor times them: timing.time_cuda, an L2 flush and
a synchronisation before every run), `--batches` batches of 30 and of 100 runs, alternating; per candidate, the
median of the batches' medians for each length, their ratio, and each length's spread between batches
(standard deviation over mean, and max over min).

    python benchmarks/experiments/timing_runs_precision.py [--batches 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from replay_overhead import traced  # noqa: E402
from rl_problems import cases  # noqa: E402

LENGTHS = (30, 100)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=12)
    args = parser.parse_args()

    import torch

    from sandbox_service import timing
    from sandbox_service.executor import kernels as kernel_module
    from sandbox_service.executor import runner
    from sandbox_service.executor.replay import Replay
    from sandbox_service.lane import _device_properties
    from sandbox_service.options import Policy
    from sandbox_service.worker import harness

    device = torch.device("cuda")
    properties = _device_properties("cuda", 0)
    wanted = {("relu", 0), ("gelu", 1), ("softmax", 1), ("matmul", 2), ("row_sum", 3)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonrl-precision-") as tmp:
        for index, case in enumerate(c for c in cases("gpu") if (c.problem, c.variant) in wanted):
            folder, program = traced(Path(tmp), case, properties)
            reference = harness.load_module(folder / "reference.py", f"reference_{index}")
            module = kernel_module.load_kernels(program["kernels"], folder, f"kernels_{index}")
            replay = Replay(program["sets"][0], module, {}, device, Policy.STRICT)

            def batch(runs: int, seed: int) -> float:
                job = {"timing_runs": runs, "trial_key": "k" * 32}
                made = runner.timing_inputs(job, reference, seed, device)
                current: dict = {}

                def before(i: int) -> None:
                    current.pop("x", None)
                    current["x"] = made(i)

                return timing.time_cuda(lambda: replay.run(current["x"]), warmup=3, runs=runs,
                                        method=timing.CUDA_EVENTS, before_run=before).median_us

            batch(30, 1)  # compilation and first allocations outside every figure
            medians: dict[int, list[float]] = {n: [] for n in LENGTHS}
            for b in range(args.batches):
                for n in LENGTHS:
                    medians[n].append(batch(n, 100 * b + n))
            row = {"case": f"{case.problem}/{case.variant}"}
            for n in LENGTHS:
                values = medians[n]
                row[f"median_of_{n}_us"] = round(statistics.median(values), 2)
                row[f"cv_{n}"] = round(statistics.pstdev(values) / statistics.fmean(values), 4)
                row[f"max_over_min_{n}"] = round(max(values) / min(values), 3)
            row["ratio_30_over_100"] = round(row["median_of_30_us"] / row["median_of_100_us"], 4)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(json.dumps({"device": torch.cuda.get_device_name(), "batches": args.batches, "rows": rows}))


if __name__ == "__main__":
    main()
