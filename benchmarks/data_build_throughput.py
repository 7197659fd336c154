"""Data-engine build speed: verified SFT pairs per minute, side by side with a baseline checkout in one job.

Runs `python -m jaxrl.main data --config CONFIG [overrides]` from this checkout (and, with `--baseline-root`,
from another one: the previous design) for `--seconds` each, from an empty output folder, then stops it as a
user would (SIGTERM: finished shards are kept). Reported per build, from the build's own per-shard log lines
and shard files:
  - pairs per minute in the steady state (from the end of the first shard to the end of the last; the first
    shard also pays for starting the sandbox and compiling ahead) and over the whole run (from the command's
    start, sandbox start-up included);
  - each shard's wall time, seconds per stage (stages that overlap each count their own wall time) and when
    each stage last ended (which one the shard waited for);
  - CPU: the machine's busy share and the CPU seconds of each process role in the build's tree (`build` is
    the build process, `untagged` its embedded sandbox server, the rest the sandbox's `trl-*` processes),
    which shows whether cores or the GPU's context churn bind.

    python benchmarks/data_build_throughput.py --seconds 150 --rounds 2 --baseline-root /path/to/old/checkout \\
        --out r.json -- data.inductor=true sandbox.backend=cuda sandbox.workers=16 sandbox.max_concurrency=64
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from jaxrl.data.kernelbench_source import KernelBenchUnavailable, resolve_kernelbench  # noqa: E402
from process_cpu import RoleCPU, cpu_times, pids, stat_fields  # noqa: E402

SHARD_LINE = re.compile(r"^shard (\d+): SFT pairs (\d+)/\d+, RL tasks (\d+)/\d+")
STOP_GRACE_S = 60.0


def parse_shard_lines(lines: list[tuple[float, str]]) -> list[dict[str, Any]]:
    """The build's `shard N: SFT pairs A/B, RL tasks C/D, ...` lines (cumulative counts), each with the
    seconds since the build was started at which the benchmark read it."""
    rows = []
    for seconds, line in lines:
        match = SHARD_LINE.match(line.strip())
        if match:
            shard, pairs, tasks = map(int, match.groups())
            rows.append({"shard": shard, "sft_pairs": pairs, "rl_tasks": tasks, "elapsed_s": round(seconds, 2)})
    return rows


def pace(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Pairs per minute over the whole run and after the first shard."""
    if not rows:
        return {"shards": 0, "sft_pairs": 0, "pairs_per_minute": None, "steady_pairs_per_minute": None}
    last = rows[-1]
    out: dict[str, Any] = {"shards": len(rows), "sft_pairs": last["sft_pairs"], "rl_tasks": last["rl_tasks"],
                           "pairs_per_minute": round(60 * last["sft_pairs"] / max(last["elapsed_s"], 1), 1),
                           "steady_pairs_per_minute": None}
    if len(rows) > 1 and last["elapsed_s"] > rows[0]["elapsed_s"]:
        out["steady_pairs_per_minute"] = round(
            60 * (last["sft_pairs"] - rows[0]["sft_pairs"]) / (last["elapsed_s"] - rows[0]["elapsed_s"]), 1)
    return out


def shard_stages(run_dir: Path) -> list[dict[str, Any]]:
    """Each finished shard's pairs and seconds per stage, from its files (a shard's rows are written last, so
    a timing file without them is a shard the stop interrupted)."""
    out = []
    for rows_path in sorted((run_dir / "shards").glob("shard-*.jsonl")):
        timing_path = rows_path.with_name(rows_path.name.replace(".jsonl", ".timing.json"))
        timing = json.loads(timing_path.read_text()) if timing_path.exists() else {}
        rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
        out.append({"shard": timing.get("shard"), "sft_pairs": sum(1 for r in rows if r.get("sft_row")),
                    "wall_s": timing.get("wall_s"),  # absent in older checkouts
                    "stages_s": {k: round(v, 1) for k, v in timing.get("stages_s", {}).items()},
                    "stage_ends_s": {k: round(v, 1) for k, v in timing.get("stage_ends_s", {}).items()}})
    return out


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`."""
    members = []
    for pid in pids():
        found = stat_fields(pid)
        if found is not None and found[1][0] != "Z" and int(found[1][2]) == pgid:
            members.append(pid)
    return members


def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM to the build's process group (the build and its embedded server, which stops its sandbox
    processes), then SIGKILL to whatever is left after `grace_s`."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_members(pgid):
        time.sleep(0.2)
    if group_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_build(root: Path, config: str, overrides: list[str], seconds: float, work: Path, name: str) -> dict[str, Any]:
    """One build from `root` into work/name for `seconds`, then SIGTERM; what it did."""
    env = dict(os.environ)
    try:  # every build decontaminates against the KernelBench copy this checkout finds (a baseline may look elsewhere)
        env.setdefault("KERNELBENCH_JSONL", str(resolve_kernelbench()))
    except KernelBenchUnavailable as exc:
        print(f"warning: {exc}", file=sys.stderr)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = [sys.executable, "-m", "jaxrl.main", "data", "--config", str(root / config), *overrides,
               f"run.output_root={work}", f"run.name={name}", "--no-progress"]
    lines: list[tuple[float, str]] = []
    busy0, total0 = cpu_times()
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", start_new_session=True)
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic() - started, line)
                                                          for line in process.stdout), daemon=True)
    reader.start()
    roles = RoleCPU(process.pid, interval_s=0.1)
    stopped = False
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        stopped = True
    finally:  # the build and its embedded server are gone before the next build starts, whatever happened
        stop_group(process.pid, STOP_GRACE_S)
        process.wait()
    cpu = roles.stop()
    busy1, total1 = cpu_times()
    reader.join(timeout=10)
    cpu["build"] = cpu.pop("server", 0.0)
    (work / f"{name}.log").write_text("".join(line for _, line in lines))
    return {
        "root": str(root), "command": " ".join(command[1:]), "stopped_by_benchmark": stopped,
        "exit_code": process.returncode, **pace(parse_shard_lines(lines)),
        "cpu_busy": round((busy1 - busy0) / (total1 - total0), 3) if total1 > total0 else None,
        "cpu_s_by_role": cpu, "shards_detail": shard_stages(work / name),
        "log_tail": [line.rstrip() for _, line in lines[-5:]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/learning/data.yaml", help="relative to each checkout")
    parser.add_argument("--seconds", type=float, default=150.0, help="each build runs this long, then is stopped")
    parser.add_argument("--baseline-root", type=Path, help="a checkout whose data engine and sandbox are the baseline")
    parser.add_argument("--baseline-seconds", type=float, help="the baseline's run time (default: --seconds)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each build, alternating")
    parser.add_argument("--out", type=Path)
    parser.add_argument("overrides", nargs="*", help="key=value overrides for both builds (after --)")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "overrides": args.overrides,
                               "this": [], "baseline": []}
    builds = [("this", REPO_ROOT, args.seconds)]
    if args.baseline_root:
        builds.append(("baseline", args.baseline_root.resolve(), args.baseline_seconds or args.seconds))
    with tempfile.TemporaryDirectory(prefix="data-build-bench-") as tmp:
        for round_ in range(args.rounds):  # alternating, so that drift on the machine affects both alike
            for name, root, seconds in builds:
                result = run_build(root, args.config, args.overrides, seconds, Path(tmp), f"{name}-{round_}")
                results[name].append(result)
                print(f"{name} (round {round_ + 1}): {result['sft_pairs']} pairs in {result['shards']} shards; "
                      f"{result['steady_pairs_per_minute']} pairs/min after the first shard "
                      f"({result['pairs_per_minute']} overall); CPU busy {result['cpu_busy']}; "
                      f"CPU s by role {result['cpu_s_by_role']}", flush=True)
                for shard in result["shards_detail"]:
                    print(f"  shard {shard['shard']}: {shard['sft_pairs']} pairs in {shard['wall_s']} s; seconds per "
                          f"stage {shard['stages_s']}; stages ended at {shard['stage_ends_s']}", flush=True)
    for name in ("this", "baseline"):
        paces = [r["steady_pairs_per_minute"] for r in results[name] if r["steady_pairs_per_minute"]]
        results[f"{name}_median_steady_pairs_per_minute"] = statistics.median(paces) if paces else None
    ours, theirs = results["this_median_steady_pairs_per_minute"], results["baseline_median_steady_pairs_per_minute"]
    print(f"this checkout: {ours} pairs/min (median steady pace of {args.rounds} run(s))")
    if ours and theirs:
        results["ratio"] = round(ours / theirs, 2)
        print(f"baseline: {theirs} pairs/min; ratio {results['ratio']}x")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
