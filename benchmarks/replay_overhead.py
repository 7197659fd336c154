"""What the executor's replay costs per forward against the candidate's own forward, in one process on one GPU.

For each RL-sized honest candidate (benchmarks/rl_problems.py): the program is traced the way the jailed
tracer traces it (a CPU-only subprocess), then, in this process on the GPU, timed by timing.time_cuda
(KernelBench's method: CUDA events, L2 flush, a synchronisation before every run) as
- `forward`: the candidate's own ModelNew on the same inputs every run (the in-process design's figure);
- `replay`: the executor's Replay of the program, same inputs;
- `replay_fresh`: the replay with fresh inputs for every run, made just before it as the executor makes them
  (runner.TimingInputs), with the wall time of the whole batch and the share of it that making inputs takes;
- `reference`: the PyTorch reference;
- `graph`: the replay captured once in a CUDA graph and replayed.
The ratio printed is replay / forward (median over the candidates): the target is within 5%.

    python benchmarks/replay_overhead.py --out benchmarks/results/replay_overhead_h100.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from rl_problems import cases  # noqa: E402

TRACE = """
import json, sys
from sandbox_service.untrusted import candidate
job = json.loads(sys.argv[1])
candidate.run(job, lambda kind, **fields: print(json.dumps({"type": kind, **fields})), None)
"""


def trace(folder: Path, properties: dict) -> dict:
    job = {"reference_path": str(folder / "reference.py"), "candidate_path": str(folder / "candidate.py"),
           "input_sets": [], "seed": 42, "device_properties": properties}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", TRACE, json.dumps(job)], cwd=folder, env=env, capture_output=True,
                          text=True, check=True)
    message = json.loads(done.stdout.strip().splitlines()[-1])
    if message["type"] != "program":
        raise RuntimeError(f"{folder.name}: {message}")
    return json.loads((folder / "program.json").read_text())


def traced(root: Path, case, properties: dict) -> tuple[Path, dict]:
    """`case`'s reference and candidate written to a folder of their own under `root`, and the candidate's
    launch program (`trace`)."""
    folder = root / f"{case.problem}_{case.variant}"
    folder.mkdir()
    (folder / "reference.py").write_text(case.reference)
    (folder / "candidate.py").write_text(case.candidate)
    return folder, trace(folder, properties)


@dataclasses.dataclass
class LoadedCase:
    """An RL-sized case ready to time in this process: its program's replay, the candidate's own model, the
    reference's model and one trial's inputs."""

    case: object
    reference: object  # the reference's module (get_inputs)
    replay: object
    model: object
    ref_model: object
    inputs: list


def loaded_cases(root: Path, device) -> Iterator[LoadedCase]:
    """Every RL-sized case of rl_problems (`cases("gpu")`), traced under `root` and loaded on `device`."""
    from sandbox_service.lane import _device_properties

    properties = _device_properties("cuda", 0)
    for index, case in enumerate(cases("gpu")):
        folder, program = traced(root, case, properties)
        yield load_case(case, folder, program, index, device)


def load_case(case, folder: Path, program: dict, index: int, device) -> LoadedCase:
    """A traced case (`traced`) loaded on `device` in this process."""
    from sandbox_service.executor import kernels as kernel_module
    from sandbox_service.executor.replay import Replay
    from sandbox_service.options import Policy
    from sandbox_service.worker import harness

    reference = harness.load_module(folder / "reference.py", f"reference_{index}")
    candidate = harness.load_module(folder / "candidate.py", f"candidate_{index}")
    module = kernel_module.load_kernels(program["kernels"], folder, f"kernels_{index}")
    return LoadedCase(case, reference, Replay(program["sets"][0], module, {}, device, Policy.STRICT),
                      harness.build_model(candidate, "ModelNew", [], 42, device),
                      harness.build_model(reference, "Model", [], 42, device),
                      harness.trial_inputs(reference, 1, device))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    from sandbox_service import timing
    from sandbox_service.executor.runner import TimingInputs
    from sandbox_service.worker import harness

    device = torch.device("cuda")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonrl-replay-") as tmp:
        for loaded in loaded_cases(Path(tmp), device):
            case, replay, model, ref_model, inputs = (loaded.case, loaded.replay, loaded.model, loaded.ref_model,
                                                      loaded.inputs)
            made = TimingInputs(loaded.reference, harness.trial_seeds(7, args.runs), device)
            current = {}

            def fresh(i: int) -> None:
                started = time.perf_counter()
                current["inputs"] = made(i)
                current["making"] = current.get("making", 0.0) + time.perf_counter() - started

            def stats(fn, before_run=None) -> tuple[float, float]:
                started = time.perf_counter()
                result = timing.time_cuda(fn, warmup=args.warmup, runs=args.runs, method=timing.CUDA_EVENTS,
                                          before_run=before_run)
                return result.median_us, time.perf_counter() - started

            stats(lambda: model(*inputs))  # first launches (compilation) outside every figure
            stats(lambda: replay.run(inputs))
            row = {"case": f"{case.problem}/{case.variant}"}
            row["forward_us"], row["forward_batch_s"] = stats(lambda: model(*inputs))
            row["replay_us"], row["replay_batch_s"] = stats(lambda: replay.run(inputs))
            row["replay_fresh_us"], row["replay_fresh_batch_s"] = stats(lambda: replay.run(current["inputs"]), fresh)
            row["making_inputs_s"] = current["making"]
            row["reference_us"], _ = stats(lambda: ref_model(*inputs))
            graph = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                replay.run(inputs)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph):
                replay.run(inputs)
            row["graph_us"], row["graph_batch_s"] = stats(graph.replay)
            # Host time of one call alone (no synchronisation): what the launch path costs in Python.
            for name, fn in (("forward", lambda: model(*inputs)), ("replay", lambda: replay.run(inputs))):
                torch.cuda.synchronize()
                started = time.perf_counter()
                for _ in range(200):
                    fn()
                row[f"{name}_host_us"] = (time.perf_counter() - started) / 200 * 1e6
                torch.cuda.synchronize()
            row["ratio"] = row["replay_us"] / row["forward_us"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    summary = {
        "device": torch.cuda.get_device_name(),
        "runs": args.runs,
        "median_ratio_replay_over_forward": statistics.median(r["ratio"] for r in rows),
        "median_ratio_fresh_over_forward": statistics.median(r["replay_fresh_us"] / r["forward_us"] for r in rows),
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
