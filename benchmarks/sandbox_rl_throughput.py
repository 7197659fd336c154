"""Sandbox throughput on RL-sized problems: evaluations per minute with and without timing, side by side
with a baseline server (another checkout of the sandbox, e.g. the previous design) in the same job, measured in
both orders (new, baseline, baseline, new; `--one-order`: once each, new first): a server measured after another
read 10-15% faster by its place alone, so a ratio from one order is mostly that.

Five small KernelBench-style problems x four distinct honest candidates (benchmarks/rl_problems.py), each
submitted `--repeats` times, all at once through the gRPC client as a trainer would send a batch. Every
verdict must be `ok`. Reported per server and phase: evaluations per minute, the verdicts, and where the
time went (medians of the layers the sandbox reports, and the queueing beyond them).

On the CPU (`--size cpu`, the Triton interpreter) the job also measures the floor the issue sets: a design
that starts a fresh Python with torch and Triton per evaluation can do at most 60 s x cores / (that start-up
time) evaluations per minute; the ratio to it is printed.

    python benchmarks/sandbox_rl_throughput.py --size gpu --baseline-root /path/to/old/checkout --out r.json
    python benchmarks/sandbox_rl_throughput.py --size cpu --repeats 3          # the CPU figure and its floor
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from process_cpu import RoleCPU, cpu_times  # noqa: E402
from rl_problems import cases  # noqa: E402
from sandbox_service.client import Pair, SandboxClient  # noqa: E402
from sandbox_service.options import EvalOptions  # noqa: E402
from sandbox_service.results import Status  # noqa: E402

AGAIN = "#2"  # the label suffix of a server measured a second time, in the other order
LAYERS = ("process", "reference", "compile", "runtime", "correctness", "reference_runner", "build", "memory",
          "timing")
WARMUP_REFERENCE = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n" \
                   "        return x * 3.0\n\n\ndef get_inputs():\n    return [torch.randn(8, 64)]\n\n\n" \
                   "def get_init_inputs():\n    return []\n"


def import_floor_s(runs: int = 3) -> float:
    """Median wall time of a fresh `python -c "import torch, triton"` (what a process-per-evaluation design pays)."""
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch, triton"], check=True)
        times.append(time.monotonic() - started)
    return statistics.median(times)


class Server:
    """`python -m sandbox_service serve` from a given checkout, on a free port; stopped on exit."""

    def __init__(self, root: Path, backend: str, workers: int, extra: list[str] = (), env_extra: dict | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="tritonrl-bench-server-"))
        ready = self.dir / "ready.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p),
               **(env_extra or {})}
        command = [sys.executable, "-m", "sandbox_service", "--log-level", "DEBUG", "serve", "--host", "127.0.0.1", "--port", "0",
                   "--backend", backend, "--workers", str(workers), "--queue", "1024", "--ready-file", str(ready),
                   "--exit-on-stdin-eof", *extra]
        self.log = open(self.dir / "server.log", "wb")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                        env=env, cwd=root)
        deadline = time.monotonic() + 300
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server from {root} did not start: {(self.dir / 'server.log').read_text()[-3000:]}")
            time.sleep(0.1)
        self.address = json.loads(ready.read_text())["address"]

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
        self.log.close()


def hold_summary(log_text: str) -> dict[str, float]:
    """The server's debug lines about holding the GPU to time (this design's; other designs print none)."""
    found = re.findall(r"timing: waited ([0-9.]+) ms for the GPU, held it ([0-9.]+) ms \(batch ([0-9.]+) ms", log_text)
    if not found:
        return {}
    waited, held, batch = ([float(f[i]) for f in found] for i in range(3))
    return {"timed": len(found), "held_ms_total": round(sum(held), 1), "held_ms_median": round(statistics.median(held), 2),
            "batch_ms_median": round(statistics.median(batch), 2), "waited_ms_median": round(statistics.median(waited), 2)}


def batch_summary(log_text: str, calls: int) -> dict[str, Any]:
    """The timed batches the server's clock trusted against those it did not (the floor bound, or the batch read
    no longer than the empty one: evaluation._TimedAttempt), from its DEBUG `timing:` lines: per group, medians of
    the batch's excess over the empty batch and the checked runs, and the mean of the executor's CPU during the
    batch (about the batch's length when its process ran throughout, less when it waited off the CPU; a mean,
    because /proc counts CPU in 10 ms ticks). `calls`: warm-up + timed."""
    found = re.findall(r"\(batch ([0-9.]+) ms, empty batch ([0-9.]+) ms\); the batch checked ([0-9]+) runs, the "
                       r"executor's CPU in it ([0-9.na]+) ms, its median ([0-9.]+) us", log_text)
    groups: dict[str, list[tuple[float, ...]]] = {"trusted": [], "not trusted": []}
    for batch, empty, checked, cpu, median in found:
        batch_ms, empty_ms, median_us = float(batch), float(empty), float(median)
        outside_us = max(0.0, batch_ms - empty_ms) * 1e3 / max(1, calls)
        trusted = median_us >= 0.5 * outside_us and batch_ms > empty_ms
        groups["trusted" if trusted else "not trusted"].append(
            (batch_ms, batch_ms - empty_ms, float(cpu), int(checked), median_us, outside_us))
    out: dict[str, Any] = {}
    for name, rows in groups.items():
        if rows:
            medians = [round(statistics.median(column), 2) for column in zip(*rows)]
            out[name] = {"batches": len(rows), **dict(zip(("batch_ms", "excess_ms", "executor_cpu_ms", "checked_runs",
                                                           "executor_median_us", "outside_us"), medians))}
            out[name]["executor_cpu_ms"] = round(statistics.fmean(r[2] for r in rows), 2)
    return out


def executor_cpu_summary(log_text: str) -> dict[str, float]:
    """Mean CPU ms an executor spent per job in each stage (the server's DEBUG `executor CPU` lines, read from
    /proc: sandbox_service/worker/cpu_trace.py), over the jobs whose executor was reused."""
    jobs = re.findall(r"executor \d+ CPU ms by stage: (.*)", log_text)
    totals: dict[str, float] = {}
    for line in jobs:
        for stage, ms in re.findall(r"([a-z_ ]+?) (-?[0-9.]+)(?:, |$)", line.strip()):
            totals[stage] = totals.get(stage, 0.0) + float(ms)
    return {stage: round(total / len(jobs), 1) for stage, total in totals.items()} | {"jobs": len(jobs)} if jobs else {}


def outside_us(result) -> float | None:
    """What the server's own clock saw per timed run (its timing layer's detail), or None (the in-process design)."""
    for layer in result.layers:
        found = re.search(r"server's clock saw ([0-9.]+) us per run", layer.detail) if layer.name == "timing" else None
        if found:
            return float(found.group(1))
    return None


def run_batch(client: SandboxClient, items: list, options: EvalOptions, concurrency: int,
              server_pid: int | None = None, server_log: Path | None = None) -> dict[str, Any]:
    pairs = [Pair(c.reference, c.candidate, options) for c in items]
    log_start = server_log.stat().st_size if server_log is not None else 0
    busy0, total0 = cpu_times()
    roles = RoleCPU(server_pid) if server_pid else None
    started = time.monotonic()
    results = dict(client.evaluate_many(pairs, max_concurrency=concurrency))
    wall = time.monotonic() - started
    busy1, total1 = cpu_times()
    role_cpu = roles.stop() if roles else {}
    statuses: dict[str, int] = {}
    for result in results.values():
        statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
    layer = {name: [l.duration_s for r in results.values() for l in r.layers if l.name == name] for name in LAYERS}
    judge_work = [float(found.group(1)) for r in results.values() for l in r.layers if l.name == "reference_runner"
                  for found in [re.search(r"reference-runner work ([0-9.]+) s", l.detail)] if found]
    failures = [f"{items[i].problem}/{items[i].variant}: {r.status.value}: {r.error[:300]}"
                for i, r in sorted(results.items()) if r.status != Status.OK]
    # Per candidate: the time the verdict used, and (new design) what the server's clock saw per run.
    timed: dict[str, list[float]] = {}
    speedups: dict[str, list[float]] = {}
    outside: dict[str, list[float]] = {}
    for i, r in results.items():
        if r.candidate_time_us:
            key = f"{items[i].problem}/{items[i].variant}"
            timed.setdefault(key, []).append(r.candidate_time_us)
            if r.speedup:
                speedups.setdefault(key, []).append(r.speedup)
            seen_us = outside_us(r)
            if seen_us is not None and r.candidate_timing is not None:
                outside.setdefault(key, []).append(r.candidate_timing.median_us / max(seen_us, 1e-9))
    # Each timed evaluation: candidate, the verdict's time, the executor's median, the server clock's per-run
    # figure (None in the in-process design), the reference's time, the executor's quickest run and its standard
    # deviation (what the spread above is made of).
    each = [[f"{items[i].problem}/{items[i].variant}", r.candidate_time_us,
             r.candidate_timing.median_us if r.candidate_timing else None,
             outside_us(r),
             r.ref_time_us, r.candidate_timing.min_us if r.candidate_timing else None,
             r.candidate_timing.std_us if r.candidate_timing else None]
            for i, r in sorted(results.items()) if r.candidate_time_us]
    hold, executor_cpu, batches = {}, {}, {}
    if server_log is not None:
        with open(server_log, errors="replace") as f:
            f.seek(log_start)
            text = f.read()
        hold, executor_cpu = hold_summary(text), executor_cpu_summary(text)
        batches = batch_summary(text, options.warmup_runs + options.timing_runs)
    return {
        "gpu_hold": hold,
        "timed_batches": batches,
        "executor_cpu_ms_per_job": executor_cpu,
        "evaluations": len(items),
        "wall_s": round(wall, 2),
        "per_minute": round(len(items) / wall * 60, 1),
        "statuses": statuses,
        "all_ok": statuses.get("ok", 0) == len(items),
        "median_duration_s": round(statistics.median(r.duration_s for r in results.values()), 3),
        "cpu_busy": round((busy1 - busy0) / (total1 - total0), 3) if total1 > total0 else None,
        "median_layer_s": {name: round(statistics.median(v), 4) for name, v in layer.items() if v},
        # of the reference_runner layer (the evaluation's time in judge calls), what the judges worked
        "median_judge_work_s": round(statistics.median(judge_work), 4) if judge_work else None,
        # CPU seconds per evaluation by process role (the server's share also shows whether its GIL limits)
        "cpu_s_per_evaluation": {role: round(value / len(items), 3) for role, value in role_cpu.items()
                                 if role != "wall_s"},
        "server_cpu_share": round(role_cpu["server"] / role_cpu["wall_s"], 2) if role_cpu.get("server") else None,
        "failures": failures[:10],
        "candidate_us": {k: round(statistics.median(v), 2) for k, v in sorted(timed.items())},
        # How far the same kernel's figure moves between its evaluations (largest / smallest of its repeats).
        "candidate_spread": {k: round(max(v) / min(v), 3) for k, v in sorted(timed.items()) if len(v) > 1},
        "speedup": {k: round(statistics.median(v), 3) for k, v in sorted(speedups.items())},
        "executor_over_outside": {k: round(statistics.median(v), 3) for k, v in sorted(outside.items())},
        "timed_evaluations": each,
        # evaluations timed twice (the first batch not trusted: evaluation.TIMING_ATTEMPTS), each a second hold
        "second_batches": sum(1 for r in results.values() for l in r.layers
                              if l.name == "timing" and l.detail.count("server's clock saw") > 1),
    }


def measure(label: str, server: Server, size: str, repeats: int, phases: list[str], concurrency: int,
            budget_s: float | None, timing_runs: int) -> dict[str, Any]:
    work = [c for _ in range(repeats) for c in cases(size)]
    out: dict[str, Any] = {"server": label}
    with SandboxClient([server.address], timeout_s=3600) as client:
        client.evaluate(WARMUP_REFERENCE, cases(size)[0].candidate.replace("tl.maximum(x, 0.0)", "x * 3.0"),
                        EvalOptions(trials=1, time=False))
        for phase in phases:
            items = work
            if budget_s is not None and label == "baseline":
                items = work[: max(len(cases(size)), int(len(work) * 0.25))]  # the slow baseline gets a quarter
            options = EvalOptions(trials=5, time=phase == "timed", timing_runs=timing_runs)
            out[phase] = run_batch(client, items, options, concurrency, server.process.pid, server.dir / "server.log")
            print(f"[{label}] {phase}: {out[phase]['evaluations']} evaluations in {out[phase]['wall_s']} s -> "
                  f"{out[phase]['per_minute']}/min; {out[phase]['statuses']}; CPU busy {out[phase]['cpu_busy']}; "
                  f"median duration {out[phase]['median_duration_s']} s; layers {out[phase]['median_layer_s']} "
                  f"(judges' own work {out[phase]['median_judge_work_s']} s); "
                  f"CPU s per evaluation {out[phase]['cpu_s_per_evaluation']}; server process "
                  f"{out[phase]['server_cpu_share']} of a core; GPU held to time {out[phase]['gpu_hold']} "
                  f"(timed twice: {out[phase]['second_batches']}; batches {out[phase]['timed_batches']}); executor CPU ms a "
                  f"job by stage {out[phase]['executor_cpu_ms_per_job']}", flush=True)
            spreads = list(out[phase]["candidate_spread"].values())
            if spreads:
                print(f"[{label}] {phase}: {timing_runs} timed runs; a candidate's time over its {repeats} "
                      f"evaluations moved by a factor of {statistics.median(spreads):.3f} (median of "
                      f"{len(spreads)}; max {max(spreads):.3f})", flush=True)
    return out


def profile_summary(folder: Path, top: int = 40) -> str:
    """The profiled processes' profiles added up per role (candidate, tracer, executor...): functions by own
    time and by cumulative time, and the modules the one-shot roles imported beyond the template's."""
    import io
    import pstats

    roles = sorted({p.name.split("-")[0] for p in folder.glob("*-*.prof")})
    if not roles:
        return f"no profiles in {folder}"
    text = io.StringIO()
    for role in roles:
        files = sorted(str(p) for p in folder.glob(f"{role}-*.prof"))
        stats = pstats.Stats(*files, stream=text)
        text.write(f"== {role}: {len(files)} processes profiled\n")
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
        imported: dict[str, int] = {}
        for path in folder.glob(f"{role}-*.modules"):
            for name in path.read_text().split():
                imported[name] = imported.get(name, 0) + 1
        roots = sorted({name.split(".")[0] for name in imported})
        text.write(f"modules imported by {role} processes (not by the template): {len(imported)}, under {roots}\n")
        for name, count in sorted(imported.items(), key=lambda item: (-item[1], item[0]))[:top]:
            text.write(f"  {count:4d}  {name}\n")
    summary = "\n".join(line for line in text.getvalue().splitlines() if not line.rstrip().endswith(".prof"))
    (folder / "summary.txt").write_text(summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--concurrency", type=int, help="evaluations the client keeps in flight (default: 4 x "
                                                          "workers; 1 times each candidate on a quiet GPU)")
    parser.add_argument("--also-workers", default="", help="comma-separated other worker counts to measure the "
                                                             "new server at (reported as new@N)")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME:VAR=VALUE[,VAR=VALUE]: the new server again with these environment variables "
                             "(e.g. conn8:TRITONRL_CUDA_MAX_CONNECTIONS=0), reported as NAME")
    parser.add_argument("--repeats", type=int, default=5, help="times each of the 20 candidates is submitted")
    parser.add_argument("--timing-runs", type=int, default=EvalOptions.timing_runs,
                        help="timed runs per evaluation (KernelBench's protocol: 100)")
    parser.add_argument("--also-timing-runs", default="", help="comma-separated other timed-run counts to measure "
                                                                 "the new server at (reported as new/Nruns)")
    parser.add_argument("--phases", default="timed,untimed", help="comma-separated: timed, untimed")
    parser.add_argument("--baseline-root", type=Path, help="a checkout whose sandbox_service is the baseline")
    parser.add_argument("--one-order", action="store_true",
                        help="measure the new server and the baseline once each, new first (default: A B B A)")
    parser.add_argument("--baseline-workers", type=int, help="workers of the baseline server (default: --workers)")
    parser.add_argument("--time-budget", type=float, help="give the baseline a quarter of the work")
    parser.add_argument("--profile-dir", type=Path, help="profile every candidate process of the new server "
                        "(cProfile, TRITONRL_PROFILE_DIR) into this folder and print where their time went")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    report: dict[str, Any] = {"size": args.size, "workers": args.workers, "repeats": args.repeats,
                              "cores": os.cpu_count(), "candidates": len(cases(args.size))}
    if args.size == "cpu":
        floor = import_floor_s()
        report["import_s"] = round(floor, 3)
        report["floor_per_minute"] = round(60 * (os.cpu_count() or 1) / floor, 1)
        print(f"floor: a fresh python + torch + triton import takes {floor:.2f} s -> at most "
              f"{report['floor_per_minute']} evaluations/min on {os.cpu_count()} cores for a process-per-evaluation design")
    profile_env = {}
    if args.profile_dir:
        args.profile_dir.mkdir(parents=True, exist_ok=True)
        profile_env = {"TRITONRL_PROFILE_DIR": str(args.profile_dir.resolve())}
    runs = args.timing_runs
    servers = [("new", REPO_ROOT, args.workers, profile_env, runs)]
    servers += [(f"new@{n}", REPO_ROOT, int(n), {}, runs) for n in args.also_workers.split(",") if n]
    servers += [(f"new/{n}runs", REPO_ROOT, args.workers, {}, int(n)) for n in args.also_timing_runs.split(",") if n]
    for variant in args.variant:
        name, _, assignments = variant.partition(":")
        servers.append((name, REPO_ROOT, args.workers, dict(a.split("=", 1) for a in assignments.split(",") if a),
                        runs))
    if args.baseline_root:
        baseline = ("baseline", args.baseline_root.resolve(), args.baseline_workers or args.workers, {}, runs)
        servers.append(baseline)
        if not args.one_order:
            # ... and again in the other order (A B B A): a server measured after another on the same machine read
            # 10-15% faster by its place alone (benchmarks/RESULTS.md, ninth session)
            servers += [(f"{baseline[0]}{AGAIN}", *baseline[1:]), (f"new{AGAIN}", *servers[0][1:])]
    for label, root, workers, env_extra, timing_runs in servers:
        server = Server(root, args.backend, workers, env_extra=env_extra)
        try:
            report[label] = measure(label, server, args.size, args.repeats, phases,
                                    args.concurrency or 4 * workers, args.time_budget, timing_runs)
        finally:
            server.close()
    lines = []
    for phase in phases:
        new = _per_minute(report, "new", phase)
        line = f"{phase}: new {new}/min"
        for label, *_ in servers[1:]:
            if not label.startswith("baseline") and not label.endswith(AGAIN):
                line += f", {label} {report[label][phase]['per_minute']}/min"
            if label.startswith("new/") and report["new"][phase]["candidate_us"]:
                ours, theirs = report[label][phase]["candidate_us"], report["new"][phase]["candidate_us"]
                ratios = [ours[k] / theirs[k] for k in ours if theirs.get(k)]
                if ratios:
                    report[f"timing_ratio_{phase}_{label}"] = round(statistics.median(ratios), 3)
                    line += f" (candidate time / new's: median {statistics.median(ratios):.3f})"
        if "baseline" in report:
            old = _per_minute(report, "baseline", phase)
            report[f"ratio_{phase}"] = round(new / old, 3)
            line += f", baseline {old}/min, ratio {new / old:.2f}x"
            if f"new{AGAIN}" in report:
                first = report["new"][phase]["per_minute"] / report["baseline"][phase]["per_minute"]
                second = report[f"new{AGAIN}"][phase]["per_minute"] / report[f"baseline{AGAIN}"][phase]["per_minute"]
                report[f"ratio_{phase}_by_order"] = [round(first, 3), round(second, 3)]
                line += f" (means of both orders; new first {first:.2f}x, baseline first {second:.2f}x)"
        if "baseline" in report and report["new"][phase]["candidate_us"]:
            new_us, old_us = report["new"][phase]["candidate_us"], report["baseline"][phase]["candidate_us"]
            ratios = [new_us[k] / old_us[k] for k in new_us if old_us.get(k)]
            if ratios:
                report[f"timing_ratio_{phase}"] = round(statistics.median(ratios), 3)
                line += (f"; candidate time new/baseline: median {statistics.median(ratios):.3f} "
                         f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} candidates")
            new_x, old_x = report["new"][phase]["speedup"], report["baseline"][phase]["speedup"]
            speedup_ratios = [new_x[k] / old_x[k] for k in new_x if old_x.get(k)]
            if speedup_ratios:
                report[f"speedup_ratio_{phase}"] = round(statistics.median(speedup_ratios), 3)
                line += f"; speedup new/baseline: median {statistics.median(speedup_ratios):.3f}"
        if "floor_per_minute" in report:
            report[f"floor_ratio_{phase}"] = round(new / report["floor_per_minute"], 2)
            line += f", {new / report['floor_per_minute']:.2f}x the process-per-evaluation floor"
        lines.append(line)
    print("\n".join(lines))
    if args.profile_dir:
        print(profile_summary(args.profile_dir))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(report["new"][p]["all_ok"] for p in phases) else 1


def _per_minute(report: dict, label: str, phase: str) -> float:
    """A server's rate: the mean of its runs in both orders when it was measured again (AGAIN)."""
    runs = [report[name][phase]["per_minute"] for name in (label, label + AGAIN) if name in report]
    return round(statistics.fmean(runs), 1)


if __name__ == "__main__":
    sys.exit(main())
