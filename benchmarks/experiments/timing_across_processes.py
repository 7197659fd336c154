"""One-off survey: does a kernel's timed figure move between processes, and under which protocol?

In the sandbox the same RL-sized kernel, timed one evaluation at a time on a quiet H100, read 47, 83, 46 and 57 us
(each evaluation in whichever executor process was ready; benchmarks/RESULTS.md, eighth session), while two
batches in one process agreed within about 10%. This runs `--processes` fresh processes one after another; each
traces and loads one candidate of each RL-sized problem, replays it as the executor does (fresh inputs every run)
and times it `--batches` times with KernelBench's synchronised runs (free to run on any CPU, and with the timing
thread pinned to one CPU for the batch) and with a 250 us GPU spin between each run's synchronisation and its
start event (timing.time_cuda's `lead_us`; until 2026-11-27's ninth session the lead queued the runs with no
synchronisation between them, the protocol recorded as "queued" in benchmarks/RESULTS.md), interleaved, and the reference the same two ways. Per protocol and kernel: the
spread between processes (largest / smallest of the processes' medians) against the spread within a process.

    python benchmarks/experiments/timing_across_processes.py [--processes 8] [--batches 2] [--out across.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# protocol -> (timing.time_cuda's lead_us, the CPU the timing thread is pinned to for the batch)
PROTOCOLS = {"sync": (None, None), "sync_pinned": (None, 2), "sync_lead250": (250.0, None)}
VARIANTS_PER_PROBLEM = 4  # every fourth of rl_problems.cases("gpu"): one candidate of each of its five problems


def trace_all(root: Path) -> None:
    """One candidate of each problem traced under `root` once (a tracer process each), for every child to load."""
    from replay_overhead import traced
    from rl_problems import cases
    from sandbox_service.lane import _device_properties

    properties = _device_properties("cuda", 0)
    for case in cases("gpu")[::VARIANTS_PER_PROBLEM]:
        traced(root, case, properties)  # leaves program.json in the case's folder


def child(root: Path, batches: int) -> None:
    """One process: every protocol's medians for one candidate of each problem, as JSON lines."""
    import torch

    from replay_overhead import load_case
    from rl_problems import cases
    from sandbox_service import timing
    from sandbox_service.executor import runner

    device = torch.device("cuda")
    for index, case in enumerate(cases("gpu")[::VARIANTS_PER_PROBLEM]):
        folder = root / f"{case.problem}_{case.variant}"
        loaded = load_case(case, folder, json.loads((folder / "program.json").read_text()), index, device)
        timed = {"candidate": loaded.replay.run, "reference": lambda x, m=loaded.ref_model: m(*x)}
        for b, (protocol, (lead_us, pin)), (role, fn) in itertools.product(range(batches), PROTOCOLS.items(),
                                                                            timed.items()):
            made = runner.timing_inputs({"timing_runs": 100, "trial_key": "k" * 32}, loaded.reference,
                                        1000 * b + 7, device)
            current: dict = {}

            def before(i: int) -> None:
                current.pop("x", None)
                current["x"] = made(i)

            allowed = os.sched_getaffinity(0)
            if pin is not None:
                os.sched_setaffinity(0, {pin})
            try:
                stats = timing.time_cuda(lambda: fn(current["x"]), warmup=3, runs=100, method=timing.CUDA_EVENTS,
                                         before_run=before, lead_us=lead_us)
            finally:
                os.sched_setaffinity(0, allowed)
            print(json.dumps({"case": f"{loaded.case.problem}/{loaded.case.variant}", "role": role,
                              "protocol": protocol, "batch": b, "median_us": round(stats.median_us, 2),
                              "min_us": round(stats.min_us, 2)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.batches)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonrl-across-") as tmp:
        trace_all(Path(tmp))
        for process in range(args.processes):
            done = subprocess.run([sys.executable, __file__, "--child", tmp, "--batches", str(args.batches)],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"process {process} failed: {done.stderr[-3000:]}")
            rows += [{**json.loads(line), "process": process} for line in done.stdout.splitlines()
                     if line.startswith("{")]
            print(f"process {process}: {sum(1 for r in rows if r['process'] == process)} figures", flush=True)
            if args.out:
                args.out.write_text(json.dumps({"rows": rows}, indent=1))
    summary: dict = {"processes": args.processes, "batches": args.batches, "kernels": {}}
    for (case, role, protocol), group in itertools.groupby(
            sorted(rows, key=lambda r: (r["case"], r["role"], r["protocol"], r["process"])),
            key=lambda r: (r["case"], r["role"], r["protocol"])):
        group = list(group)
        per_process = {p: [r["median_us"] for r in g] for p, g in itertools.groupby(group, key=lambda r: r["process"])}
        firsts = [values[0] for values in per_process.values()]
        within = statistics.median(max(v) / min(v) for v in per_process.values())
        summary["kernels"][f"{case} {role} {protocol}"] = {
            "medians_by_process": firsts,
            "between_processes": round(max(firsts) / min(firsts), 3), "within_a_process": round(within, 3)}
    for protocol in PROTOCOLS:
        for role in ("candidate", "reference"):
            picked = [v for k, v in summary["kernels"].items() if k.endswith(f" {role} {protocol}")]
            line = {"between": round(statistics.median(v["between_processes"] for v in picked), 3),
                    "within": round(statistics.median(v["within_a_process"] for v in picked), 3)}
            summary[f"{role}_{protocol}"] = line
            print(f"{role:9s} {protocol:7s}: largest / smallest median between processes {line['between']}, "
                  f"within a process {line['within']} (median over {len(picked)} kernels)")
    if args.out:
        args.out.write_text(json.dumps({**summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
