"""Sandbox throughput benchmark: hand-written Triton candidates for KernelBench level 1, through a server.

Phases, all through the gRPC client (an embedded server unless --target is given):
  warm-up     one evaluation that starts the server's children and fills the Triton cache (reported apart);
  concurrent  every candidate submitted at once with `evaluate_many`: evaluations per minute of wall time;
  sequential  each pair evaluated --repeats times, one evaluation at a time, in rounds (every pair once,
              then again): the clean per-evaluation overhead, and the stability of the timings across
              repeats. --time-budget stops starting new rounds' evaluations once spent, so a run under a
              hard time limit still reports what it measured.

Definitions (also written into the JSON):
  timed work  = (warmup_runs + timing_runs) x (reference median + candidate median), the GPU time the
                timing layer must spend; 0 when the evaluation was not timed (the CPU interpreter);
  overhead    = result.duration_s - timed work: everything else the sandbox does for one evaluation
                (children, input generation, correctness trials, output transfer, queueing for the GPU);
                split into `until verdict` (the candidate child's compile and trials layers plus the
                reference child's comparison, as the sandbox reports them in `layers`) and the rest
                (child hand-over, the timing phase beyond the timed runs, teardown);
  CV          = sample standard deviation / mean, across the repeats, of an evaluation's median time;
                flagged when the time is >= 100 us and the CV > 2 %;
  ratio       = measured reference mean / KernelBench's published eager-PyTorch mean on an H100.

  harness     with --kernelbench-harness DIR, after the server has stopped: KernelBench's own
              eval_kernel_against_ref (a copy kept outside this repository, see kernelbench_harness.py) on the
              same candidates, as its eval_from_generations runs on one GPU: one evaluation at a time, each in
              a fresh process, with the same trials (5) and timed runs (100). Each candidate once, or fewer when
              --harness-budget runs out. Reported: its evaluations per minute, the concurrent phase's, their
              ratio (the target is >= 10x), and each problem's verdict beside ours.

    python benchmarks/sandbox_throughput.py --dataset D.jsonl --baselines DIR [--target HOST:PORT] [--workers N]
    python benchmarks/sandbox_throughput.py --dry-run-cpu   # interpreter, CPU-sized problems, untimed

On the device (repository root; the harness copy and the dataset carried under .device_carry), about 8
minutes: the sandbox phases stop starting work at 140 s, the harness takes about 13 s an evaluation, and
about a minute each for the three candidates with 6.4-8.6 GB inputs (it generates them on the CPU, 6 times):
    python3 benchmarks/sandbox_throughput.py --dataset .device_carry/datasets/kernelbench.jsonl \\
        --baselines .device_carry/datasets/kernelbench_baseline_times --repeats 3 --time-budget 140 \\
        --kernelbench-harness .device_carry/kb_harness --harness-budget 330 --harness-timeout 120 \\
        --out $OUT/sandbox_throughput.json

Candidates live in benchmarks/kernels/level1/<problem_id>_<short>.py (see RESULTS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
for _path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(_path) not in sys.path:  # run as a script from anywhere
        sys.path.insert(0, str(_path))

from jaxrl.data.kernelbench import load_problems, resolve_kernelbench  # noqa: E402
from kernelbench_harness import (  # noqa: E402
    HarnessFolderError, HarnessResult, check_harness_dir, require_cuda, run_many,
)
from sandbox_service.client import Pair, SandboxClient  # noqa: E402
from sandbox_service.options import EvalOptions  # noqa: E402
from sandbox_service.results import EvalResult, Status  # noqa: E402

LEVEL = 1
KERNELS_DIR = REPO_ROOT / "benchmarks" / "kernels" / "level1"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "sandbox_throughput.json"
BASELINES_NAME = "kernelbench_baseline_times"  # the folder looked for beside the dataset
# By default every candidate in KERNELS_DIR, the big-input ones included (19 ReLU, 23 Softmax, 47 Sum face
# 6.4-8.6 GB of inputs per trial): the sandbox now hands outputs of 256 MB and more over through CUDA IPC
# (no copy through host memory or a file) and holds one trial's inputs and outputs at a time, so they are
# expected to fit an 80 GB H100. --ids selects a subset.
OVERHEAD_TARGET_S = 1.0
HARNESS_RATIO_TARGET = 10.0
CV_TARGET = 0.02
CV_MIN_TIME_US = 100.0
RATIO_PLAUSIBLE = 2.0
_CANDIDATE_FILE = re.compile(r"^(?P<id>\d+)_[A-Za-z0-9_]+\.py$")


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark pair: a KernelBench problem and the hand-written candidate for it."""

    problem_id: int
    name: str
    reference: str
    candidate: str
    candidate_file: str


@dataclasses.dataclass
class Record:
    """One evaluation as the benchmark saw it: the verdict plus the client-side wall time."""

    problem_id: int
    phase: str
    repeat: int
    wall_s: float
    result: EvalResult

    @property
    def ok(self) -> bool:
        return self.result.status == Status.OK


@dataclasses.dataclass(frozen=True)
class HarnessPhase:
    """KernelBench's harness on the cases: results by problem id, the phase's wall time, and how many
    cases were not run because --harness-budget was spent."""

    results: dict[int, HarnessResult]
    wall_s: float
    skipped: int


# --------------------------------------------------------------------------------------------------
# Inputs


def discover_candidates(kernels_dir: Path) -> dict[int, Path]:
    """problem_id -> candidate file; files must be named <problem_id>_<short>.py, one per problem."""
    found: dict[int, Path] = {}
    for path in sorted(kernels_dir.glob("*.py")):
        match = _CANDIDATE_FILE.match(path.name)
        if not match:
            raise ValueError(f"{path}: candidate files must be named <problem_id>_<short>.py")
        problem_id = int(match["id"])
        if problem_id in found:
            raise ValueError(f"two candidates for problem {problem_id}: {found[problem_id].name} and {path.name}")
        found[problem_id] = path
    if not found:
        raise ValueError(f"no candidates in {kernels_dir}")
    return found


def load_cases(dataset: Path, kernels_dir: Path, ids: list[int] | None, cpu_sized: bool) -> list[Case]:
    """Pair problems with candidates by problem id; `ids` None means every candidate."""
    candidates = discover_candidates(kernels_dir)
    wanted = sorted(candidates) if ids is None else sorted(set(ids))
    missing = [i for i in wanted if i not in candidates]
    if missing:
        raise ValueError(f"no candidate in {kernels_dir} for problem(s) {missing}")
    problems = load_problems(dataset, levels=[LEVEL], ids=wanted, cpu_sized=cpu_sized)
    return [
        Case(p.problem_id, p.name, p.code, candidates[p.problem_id].read_text(), candidates[p.problem_id].name)
        for p in problems
    ]


def load_baselines(directory: Path, level: int = LEVEL) -> dict[str, dict[str, float]]:
    """{hardware label: {problem name: published mean in us}} from KernelBench's H100 eager-PyTorch files.

    The files map "level<N>" -> "<problem name>.py" -> {"mean", "std", ... in milliseconds, "hardware"}.
    torch.compile baselines are skipped: the reference here is eager PyTorch.
    """
    tables: dict[str, dict[str, float]] = {}
    for path in sorted(directory.glob("H100*_baseline_time_torch.json")):
        data = json.loads(path.read_text())
        entries = data.get(f"level{level}")
        if not isinstance(entries, dict):
            raise ValueError(f"{path}: no 'level{level}' table")
        label = path.name.removesuffix("_baseline_time_torch.json").strip("_")
        tables[label] = {name.removesuffix(".py"): float(stats["mean"]) * 1000.0 for name, stats in entries.items()}
    return tables


# --------------------------------------------------------------------------------------------------
# Measures


def timed_work_s(result: EvalResult, options: EvalOptions) -> float:
    """GPU time the timing layer spends: (warmup + runs) x (reference median + candidate median)."""
    if result.ref_timing is None or result.candidate_timing is None:
        return 0.0
    per_call_us = result.ref_timing.median_us + result.candidate_timing.median_us
    return (options.warmup_runs + options.timing_runs) * per_call_us / 1e6


def overhead_s(result: EvalResult, options: EvalOptions) -> float:
    return result.duration_s - timed_work_s(result, options)


VERDICT_PHASES = ("compile", "runtime", "correctness")


def phase_s(result: EvalResult, name: str) -> float | None:
    layer = next((layer for layer in result.layers if layer.name == name), None)
    return None if layer is None else layer.duration_s


def until_verdict_s(result: EvalResult) -> float | None:
    """Compile (set-up, import, ModelNew) + monitored trials + the reference child's comparison."""
    phases = [phase_s(result, name) for name in VERDICT_PHASES]
    return None if any(p is None for p in phases) else sum(phases)


def timing_phase_overhead_s(result: EvalResult, options: EvalOptions) -> float | None:
    """What the timing phase costs beyond the timed runs themselves (L2 flushes, synchronisation, messages)."""
    verdict = until_verdict_s(result)
    if verdict is None or result.candidate_timing is None:
        return None
    return result.duration_s - verdict - timed_work_s(result, options)


def describe(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def coefficient_of_variation(values: list[float]) -> float | None:
    """Sample standard deviation / mean; None with fewer than two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def stability(records: list[Record]) -> dict[str, Any]:
    """Per-problem spread of the timed medians across sequential repeats (ok results only)."""
    timed = [r.result for r in records if r.ok and r.result.candidate_time_us is not None]
    ref = [r.ref_time_us for r in timed]
    cand = [r.candidate_time_us for r in timed]
    ref_means = [r.ref_timing.mean_us for r in timed]
    out: dict[str, Any] = {
        "repeats_timed": len(timed),
        "ref_us": statistics.fmean(ref) if ref else None,
        "ref_mean_us": statistics.fmean(ref_means) if ref_means else None,
        "candidate_us": statistics.fmean(cand) if cand else None,
        "cv_ref": coefficient_of_variation(ref),
        "cv_candidate": coefficient_of_variation(cand),
    }
    measured = (("reference", out["ref_us"], out["cv_ref"]), ("candidate", out["candidate_us"], out["cv_candidate"]))
    out["flags"] = [
        f"{which}: {time_us:.0f} us, CV {cv:.1%} > {CV_TARGET:.0%}"
        for which, time_us, cv in measured
        if time_us is not None and cv is not None and time_us >= CV_MIN_TIME_US and cv > CV_TARGET
    ]
    return out


def overhead_summary(records: list[Record], options: EvalOptions) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    return {
        "evaluations": len(records),
        "ok": len(ok),
        "overhead_s": describe([overhead_s(r.result, options) for r in ok]),
        "duration_s": describe([r.result.duration_s for r in ok]),
        "timed_work_s": describe([timed_work_s(r.result, options) for r in ok]),
        "until_verdict_s": describe([v for r in ok if (v := until_verdict_s(r.result)) is not None]),
        **{
            f"{name}_layer_s": describe([v for r in ok if (v := phase_s(r.result, name)) is not None])
            for name in VERDICT_PHASES
        },
        "timing_phase_overhead_s": describe(
            [v for r in ok if (v := timing_phase_overhead_s(r.result, options)) is not None]
        ),
        # client wall time minus the server's duration: gRPC and (de)serialisation, plus the time spent
        # queued in the server when evaluations are submitted together
        "client_beyond_server_s": describe([r.wall_s - r.result.duration_s for r in ok]),
    }


# --------------------------------------------------------------------------------------------------
# Phases


def evaluate_one(client: SandboxClient, case: Case, options: EvalOptions, phase: str, repeat: int) -> Record:
    """One evaluation; a client-side failure becomes an infra_error record instead of stopping the run."""
    started = time.monotonic()
    try:
        request_id = f"{phase}-{case.problem_id}-{repeat}"
        result = client.evaluate(case.reference, case.candidate, options, request_id=request_id)
    except Exception as exc:  # noqa: BLE001 - one failing evaluation must not end the benchmark
        result = EvalResult(Status.INFRA_ERROR, error=f"client error: {type(exc).__name__}: {exc}")
    return Record(case.problem_id, phase, repeat, time.monotonic() - started, result)


def run_concurrent(client: SandboxClient, cases: list[Case], options: EvalOptions) -> tuple[list[Record], float]:
    """Submit every case at once through evaluate_many; returns the records and the batch's wall time.

    A record's wall_s is when its result arrived, counted from the batch's start."""
    pairs = [Pair(c.reference, c.candidate, options) for c in cases]
    records: dict[int, Record] = {}
    started = time.monotonic()
    try:
        for index, result in client.evaluate_many(pairs, max_concurrency=len(pairs)):
            records[index] = Record(cases[index].problem_id, "concurrent", 0, time.monotonic() - started, result)
    except Exception as exc:  # noqa: BLE001 - keep what finished, mark the rest
        error = f"client error: {type(exc).__name__}: {exc}"
        for index, case in enumerate(cases):
            if index not in records:
                records[index] = Record(case.problem_id, "concurrent", 0, time.monotonic() - started,
                                        EvalResult(Status.INFRA_ERROR, error=error))
    return [records[i] for i in range(len(cases))], time.monotonic() - started


def run_sequential(
    client: SandboxClient,
    cases: list[Case],
    options: EvalOptions,
    repeats: int,
    log: Callable[[str], None],
    deadline: float | None = None,
    on_record: Callable[[list[Record]], None] = lambda records: None,
) -> tuple[list[Record], int]:
    """Rounds of one evaluation per pair, one at a time; returns the records and how many were skipped
    because `deadline` (time.monotonic()) had passed."""
    records: list[Record] = []
    skipped = 0
    for repeat in range(repeats):
        for case in cases:
            if deadline is not None and time.monotonic() > deadline:
                skipped += 1
                continue
            record = evaluate_one(client, case, options, "sequential", repeat)
            records.append(record)
            on_record(records)
            log(f"  L1/{case.problem_id} repeat {repeat}: {_brief(record)}")
    return records, skipped


def run_harness_phase(harness_dir: Path, cases: list[Case], options: EvalOptions, budget_s: float | None,
                      timeout_s: float, log: Callable[[str], None]) -> HarnessPhase:
    """Each case once through KernelBench's harness as eval_from_generations runs on one GPU: one at a
    time, a fresh process each, the sandbox's trials and timed runs; none started after `budget_s`."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    pairs = [(case.reference, case.candidate) for case in cases]
    results: dict[int, HarnessResult] = {}
    started = time.monotonic()
    for index, result in run_many(harness_dir, pairs, concurrency=1, deadline=deadline, trials=options.trials,
                                  perf_trials=options.timing_runs, perf=True, timeout_s=timeout_s):
        results[cases[index].problem_id] = result
        log(f"  L1/{cases[index].problem_id}: {result.describe()}, {result.process_s:.1f} s"
            + (f", runtime {result.runtime_ms:.3f} ms" if result.runtime_ms is not None else ""))
    return HarnessPhase(results, time.monotonic() - started, len(cases) - len(results))


# --------------------------------------------------------------------------------------------------
# Reporting


def _brief(record: Record) -> str:
    r = record.result
    text = f"{r.status.value}, {r.duration_s:.2f} s in the server, {record.wall_s:.2f} s at the client"
    if r.candidate_time_us is not None:
        text += f", ref {r.ref_time_us:.1f} us, candidate {r.candidate_time_us:.1f} us"
    if r.status != Status.OK:
        text += f"\n    error: {(r.error or '; '.join(v.message for v in r.violations))[:1500]}"
    return text


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _server_info(client: SandboxClient) -> dict[str, Any]:
    try:
        info = client.server_info()[0]
    except Exception as exc:  # noqa: BLE001 - informational only
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "server_version": info.server_version,
        "backend": info.backend,
        "devices": list(info.devices),
        "workers": info.workers,
        "queue_capacity": info.queue_capacity,
        "python": info.python_version,
        "torch": info.torch_version,
        "triton": info.triton_version,
    }


def problem_rows(cases, concurrent, sequential, baselines, options) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        mine = [r for r in sequential if r.problem_id == case.problem_id]
        first = next((r for r in concurrent if r.problem_id == case.problem_id), None)
        row = {
            "problem_id": case.problem_id,
            "name": case.name,
            "candidate_file": case.candidate_file,
            "concurrent_status": first.result.status.value if first else None,
            "sequential_statuses": [r.result.status.value for r in mine],
            "sequential_overhead_s": describe([overhead_s(r.result, options) for r in mine if r.ok]),
            **stability(mine),
        }
        row["speedup"] = (
            row["ref_us"] / row["candidate_us"] if row["ref_us"] is not None and row["candidate_us"] else None
        )
        row["published_us"] = {label: table.get(case.name) for label, table in baselines.items()}
        row["ratio_to_published"] = {
            label: (row["ref_mean_us"] / published if row["ref_mean_us"] is not None and published else None)
            for label, published in row["published_us"].items()
        }
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any], labels: list[str]) -> None:
    short = {label: label.split("_")[0] + ("-pcie" if "PCIe" in label else "") for label in labels}
    head = (f"{'id':>3} {'problem':<28} {'conc':<8} {'ref_us':>9} {'cand_us':>9} {'speedup':>7} "
            f"{'cv_ref':>6} {'cv_cand':>7} {'ovh_s':>6}")
    for label in labels:
        head += f" {'pub_ms ' + short[label]:>16} {'ratio':>5}"
    with_harness = any("harness" in row for row in rows)
    if with_harness:
        head += f"  {'kernelbench harness':<24} {'kb_ms':>8}"
    print("\n" + head)
    for row in rows:
        overhead = row["sequential_overhead_s"]
        line = (
            f"{row['problem_id']:>3} {row['name'][:28]:<28} {str(row['concurrent_status'])[:8]:<8} "
            f"{_fmt(row['ref_us'], '.1f'):>9} {_fmt(row['candidate_us'], '.1f'):>9} {_fmt(row['speedup'], '.2f'):>7} "
            f"{_fmt(row['cv_ref'], '.2%'):>6} {_fmt(row['cv_candidate'], '.2%'):>7} "
            f"{_fmt(overhead['median'] if overhead else None, '.2f'):>6}"
        )
        for label in labels:
            published = row["published_us"].get(label)
            published_ms = published / 1000 if published else None
            line += f" {_fmt(published_ms, '.3f'):>16} {_fmt(row['ratio_to_published'][label], '.2f'):>5}"
        if with_harness:
            verdict = row.get("harness") or {}
            line += (f"  {str(verdict.get('harness', 'not run'))[:24]:<24} "
                     f"{_fmt(verdict.get('harness_runtime_ms'), '.3f'):>8}")
        print(line)
    print()
    for line in summary["lines"]:
        print(line)


def summarise(warmup: Record | None, concurrent, concurrent_wall, sequential, skipped, rows, options) -> dict[str, Any]:
    conc, seq = overhead_summary(concurrent, options), overhead_summary(sequential, options)
    per_minute = len(concurrent) / concurrent_wall * 60 if concurrent_wall > 0 else None
    lines = []
    if warmup is not None:
        lines.append(f"warm-up: L1/{warmup.problem_id} {_brief(warmup)}")
    lines.append(
        f"throughput: {len(concurrent)} evaluations ({conc['ok']} ok) submitted at once took {concurrent_wall:.1f} s "
        f"-> {_fmt(per_minute, '.1f')} evaluations/min"
    )
    part_records = {"sequential": sequential, "concurrent": concurrent}
    for name, part in (("sequential", seq), ("concurrent", conc)):
        o = part["overhead_s"]
        if o is None:
            lines.append(f"overhead ({name}): no ok evaluation")
            continue
        within = sum(1 for r in part_records[name] if r.ok and overhead_s(r.result, options) <= OVERHEAD_TARGET_S)
        lines.append(
            f"overhead ({name}, n={o['n']}): mean {o['mean']:.2f} s, median {o['median']:.2f} s, max {o['max']:.2f} s "
            f"-> {within}/{o['n']} within the {OVERHEAD_TARGET_S:.0f} s target"
            + (f"; client-server transport median {part['client_beyond_server_s']['median'] * 1000:.0f} ms"
               if name == "sequential" else "")
        )
    verdict, timing = seq["until_verdict_s"], seq["timing_phase_overhead_s"]
    if verdict is not None:
        lines.append(
            f"overhead split (sequential): until verdict median {verdict['median']:.2f} s ("
            + ", ".join(f"{name} {seq[f'{name}_layer_s']['median']:.2f} s" for name in VERDICT_PHASES
                        if seq.get(f"{name}_layer_s"))
            + ")"
            + (f"; the rest (hand-over, timing beyond the timed runs, teardown) median {timing['median']:.2f} s"
               if timing else "")
        )
    flags = [f"L1/{row['problem_id']} {flag}" for row in rows for flag in row["flags"]]
    timed_rows = [row for row in rows if row["cv_candidate"] is not None]
    if timed_rows:
        lines.append(
            f"timing stability: {len(flags)} flag(s) among {len(timed_rows)} timed problems "
            f"(time >= {CV_MIN_TIME_US:.0f} us and CV > {CV_TARGET:.0%})"
        )
        lines += [f"  FLAG {flag}" for flag in flags]
    else:
        lines.append("timing stability: not timed (no GPU)")
    far = [
        f"L1/{row['problem_id']} x{ratio:.2f} vs {label}"
        for row in rows
        for label, ratio in row["ratio_to_published"].items()
        if ratio is not None and not 1 / RATIO_PLAUSIBLE <= ratio <= RATIO_PLAUSIBLE
    ]
    if far:
        lines.append(f"reference times more than {RATIO_PLAUSIBLE:.0f}x off the published ones (another GPU, or the "
                     f"problem changed since they were measured): {', '.join(far)}")
    if skipped:
        lines.append(f"time budget spent: {skipped} sequential evaluation(s) not run")
    failures = [r for r in ([warmup] if warmup else []) + concurrent + sequential if not r.ok]
    lines.append(f"not ok: {len(failures)} evaluation(s)" + ("" if not failures else ":"))
    lines += [f"  L1/{r.problem_id} {r.phase}#{r.repeat}: {_brief(r)}" for r in failures[:10]]
    return {
        "evaluations_per_minute": per_minute,
        "concurrent_wall_s": concurrent_wall,
        "concurrent": conc,
        "sequential": seq,
        "cv_flags": flags,
        "ratios_far_from_published": far,
        "sequential_skipped": skipped,
        "not_ok": len(failures),
        "lines": lines,
    }


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def harness_comparison(cases: list[Case], concurrent: list[Record], concurrent_wall: float,
                       harness: HarnessPhase) -> dict[str, Any]:
    """Evaluations per minute of both (same candidates, same GPU, same job), their ratio against the
    target, and each problem's verdicts side by side; `lines` go at the end of the summary."""
    done = list(harness.results.values())
    harness_rate = len(done) / harness.wall_s * 60 if done and harness.wall_s > 0 else None
    sandbox_rate = len(concurrent) / concurrent_wall * 60 if concurrent and concurrent_wall > 0 else None
    ratio = sandbox_rate / harness_rate if sandbox_rate and harness_rate else None
    ours = {record.problem_id: record.result.status for record in concurrent}
    verdicts = [
        {"problem_id": case.problem_id, "sandbox": ours[case.problem_id].value if case.problem_id in ours else None,
         "harness": result.describe(), "harness_correct": result.correct, "harness_error_class": result.error_class,
         "harness_runtime_ms": result.runtime_ms, "agree": (ours.get(case.problem_id) == Status.OK) == result.correct}
        for case in cases if (result := harness.results.get(case.problem_id)) is not None
    ]
    disagree = [v for v in verdicts if not v["agree"]]
    process_s, eval_s = _mean([r.process_s for r in done]), _mean([r.eval_s for r in done if r.eval_s is not None])
    unfinished = sum(r.outcome != "ran" for r in done)
    lines = [
        f"KernelBench harness (eval_kernel_against_ref, one at a time, a fresh process each): {len(done)} evaluations "
        f"in {harness.wall_s:.1f} s -> {_fmt(harness_rate, '.1f')} evaluations/min (mean {_fmt(process_s, '.1f')} s "
        f"a process, of which {_fmt(eval_s, '.1f')} s in eval_kernel_against_ref)",
        f"sandbox, the same candidates submitted at once: {_fmt(sandbox_rate, '.1f')} evaluations/min -> "
        f"{_fmt(ratio, '.1f')}x the harness (target >= {HARNESS_RATIO_TARGET:.0f}x: "
        + _ratio_verdict(ratio, unfinished, harness.skipped) + ")",
        f"correctness verdicts agree on {len(verdicts) - len(disagree)}/{len(verdicts)}"
        + (" (KernelBench compares fp32 at atol = rtol = 1e-4, the sandbox at 1e-2)"
           if any(v["harness_error_class"] == "mismatch" for v in disagree) else "")
        + "".join(f"; L1/{v['problem_id']} sandbox {v['sandbox']}, harness {v['harness']}" for v in disagree),
    ]
    return {"harness_evaluations_per_minute": harness_rate, "sandbox_evaluations_per_minute": sandbox_rate,
            "ratio": ratio, "ratio_target": HARNESS_RATIO_TARGET, "harness_wall_s": harness.wall_s,
            "harness_skipped": harness.skipped, "harness_unfinished": unfinished, "verdicts": verdicts,
            "lines": lines}


def _ratio_verdict(ratio: float | None, unfinished: int, skipped: int) -> str:
    """Judged only when the harness gave every candidate a verdict: a crashed or timed-out harness process
    (a broken set-up, a hang) or a skipped candidate would make its rate mean something else."""
    if unfinished or skipped:
        return (f"not judged: {unfinished} harness evaluation(s) crashed or timed out, {skipped} not run "
                "(--harness-budget spent)")
    return "met" if ratio is not None and ratio >= HARNESS_RATIO_TARGET else "NOT met"


# --------------------------------------------------------------------------------------------------


def parse_ids(text: str) -> list[int] | None:
    if text == "all":
        return None
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        ids = []
    if not ids:
        raise argparse.ArgumentTypeError(f"--ids takes comma-separated problem ids or 'all', got {text!r}")
    return ids


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=None,
                        help="KernelBench JSONL or folder (default: found as jaxrl.data.kernelbench_source says)")
    parser.add_argument("--baselines", type=Path, default=None,
                        help="folder of KernelBench baseline-time JSON files (default: beside the dataset, if there)")
    parser.add_argument("--kernels", type=Path, default=KERNELS_DIR, help="folder of <problem_id>_<short>.py candidates")
    parser.add_argument("--ids", type=parse_ids, default=None,
                        help="problem ids, comma-separated, or 'all' (default: every candidate in --kernels)")
    parser.add_argument("--target", action="append",
                        help="HOST:PORT of a running server (repeatable); default: start an embedded one")
    parser.add_argument("--backend", choices=["cuda", "interpreter"], default=None,
                        help="embedded server's backend (default: cuda; interpreter with --dry-run-cpu)")
    parser.add_argument("--workers", type=int, default=None, help="embedded server's concurrent evaluations per GPU")
    parser.add_argument("--server-log", type=Path, default=None,
                        help="keep the embedded server's log (INFO: memory waits, retries) in this file")
    parser.add_argument("--repeats", type=int, default=5, help="sequential evaluations of each pair")
    parser.add_argument("--trials", type=int, default=5, help="correctness trials per evaluation")
    parser.add_argument("--warmup-runs", type=int, default=3)
    parser.add_argument("--timing-runs", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per evaluation (the sandbox's timeout_s)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds from the start after which no new sequential evaluation starts")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file for the full numbers")
    parser.add_argument("--dry-run-cpu", action="store_true",
                        help="interpreter backend, CPU-sized problems, 2 trials, untimed (overhead = duration)")
    parser.add_argument("--kernelbench-harness", type=Path, default=None,
                        help="folder with KernelBench's src/eval.py and run_one.py (kept outside the repository): "
                             "also run its harness on the same candidates and compare")
    parser.add_argument("--harness-budget", type=float, default=None,
                        help="seconds after which the harness phase starts no new evaluation "
                             "(default: every case once)")
    parser.add_argument("--harness-timeout", type=float, default=180.0,
                        help="seconds per harness evaluation (eval_from_generations' timeout)")
    return parser


def log(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.repeats < 2:
        raise SystemExit("--repeats must be at least 2 (a coefficient of variation needs two values)")
    backend = args.backend or ("interpreter" if args.dry_run_cpu else "cuda")
    try:
        harness_dir = check_harness_dir(args.kernelbench_harness) if args.kernelbench_harness else None
    except HarnessFolderError as exc:
        raise SystemExit(f"error: {exc}") from None
    if not args.dry_run_cpu and (harness_dir or (backend == "cuda" and not args.target)):
        require_cuda()
    if args.dry_run_cpu:
        options = EvalOptions(trials=2, warmup_runs=1, timing_runs=3, timeout_s=args.timeout)
    else:
        options = EvalOptions(trials=args.trials, warmup_runs=args.warmup_runs, timing_runs=args.timing_runs,
                              timeout_s=args.timeout)
    try:
        dataset = resolve_kernelbench(args.dataset)
        cases = load_cases(dataset, args.kernels, args.ids, cpu_sized=args.dry_run_cpu)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.baselines is not None and not args.baselines.is_dir():
        raise SystemExit(f"--baselines: no such folder: {args.baselines}")
    baselines_dir = args.baselines or dataset.parent / BASELINES_NAME
    baselines = load_baselines(baselines_dir) if baselines_dir.is_dir() else {}
    if args.target and args.workers:
        log("note: --workers applies to an embedded server only; the running server keeps its own setting")
    log(f"{len(cases)} pairs: " + ", ".join(f"L1/{c.problem_id}" for c in cases))
    log(f"options: trials {options.trials}, warm-up runs {options.warmup_runs}, timing runs {options.timing_runs}, "
        f"repeats {args.repeats}; published baselines: {', '.join(baselines) or 'none found'}")

    document: dict[str, Any] = {
        "definitions": {
            "timed_work_s": "(warmup_runs + timing_runs) * (ref median + candidate median)",
            "overhead_s": "result.duration_s - timed_work_s",
            "until_verdict_s": "compile + runtime (trials) + correctness (comparison) layer durations",
            "timing_phase_overhead_s": "duration_s - until_verdict_s - timed_work_s",
            "cv": "sample stdev / mean of the per-evaluation medians across sequential repeats",
            "ratio_to_published": "measured reference mean / published KernelBench eager mean",
        },
        "options": options.to_dict(),
        "repeats": args.repeats,
        "dry_run_cpu": args.dry_run_cpu,
    }
    started = time.monotonic()
    if args.target:
        client = SandboxClient(args.target, timeout_s=args.timeout + 600)
        document["server_start_s"] = None
    else:
        client = SandboxClient.embedded(backend=backend, workers=args.workers, server_log=args.server_log,
                                        timeout_s=args.timeout + 600)
        document["server_start_s"] = time.monotonic() - started
        log(f"embedded server ({backend}) started in {document['server_start_s']:.1f} s")
    with client:
        document["server"] = _server_info(client)
        log(f"server: {json.dumps(document['server'])}")

        log("warm-up ...")
        warmup = evaluate_one(client, cases[0], options, "warmup", 0)
        log(f"  L1/{warmup.problem_id}: {_brief(warmup)}")
        document["warmup"] = _record_dict(warmup, options)

        log(f"concurrent: {len(cases)} evaluations at once ...")
        concurrent, concurrent_wall = run_concurrent(client, cases, options)
        for record in concurrent:
            log(f"  L1/{record.problem_id}: {_brief(record)}")
        document["concurrent"] = [_record_dict(r, options) for r in concurrent]
        _write(args.out, document)

        log(f"sequential: {len(cases)} pairs x {args.repeats} repeats, in rounds ...")
        deadline = None if args.time_budget is None else started + args.time_budget

        def save(records: list[Record]) -> None:
            document["sequential"] = [_record_dict(r, options) for r in records]
            _write(args.out, document)

        sequential, skipped = run_sequential(client, cases, options, args.repeats, log, deadline, save)
        document["sequential"] = [_record_dict(r, options) for r in sequential]

    harness = None
    if harness_dir:  # after the server has stopped: the harness gets the GPU to itself, as it would alone
        log(f"KernelBench harness: {len(cases)} evaluations, one at a time, a fresh process each ...")
        harness = run_harness_phase(harness_dir, cases, options, args.harness_budget, args.harness_timeout, log)
        document["harness_results"] = {pid: result.to_dict() for pid, result in harness.results.items()}

    rows = problem_rows(cases, concurrent, sequential, baselines, options)
    summary = summarise(warmup, concurrent, concurrent_wall, sequential, skipped, rows, options)
    if harness:
        summary["harness"] = harness_comparison(cases, concurrent, concurrent_wall, harness)
        summary["lines"] += summary["harness"]["lines"]
        by_id = {v["problem_id"]: v for v in summary["harness"]["verdicts"]}
        for row in rows:
            row["harness"] = by_id.get(row["problem_id"])
    document["problems"] = rows
    document["summary"] = summary
    document["total_wall_s"] = time.monotonic() - started
    _write(args.out, document)
    print_table(rows, summary, list(baselines))
    print(f"full numbers: {args.out}  (total {document['total_wall_s']:.0f} s)")
    return 0


def _record_dict(record: Record, options: EvalOptions) -> dict[str, Any]:
    return {
        "problem_id": record.problem_id,
        "phase": record.phase,
        "repeat": record.repeat,
        "wall_s": record.wall_s,
        "timed_work_s": timed_work_s(record.result, options),
        "overhead_s": overhead_s(record.result, options),
        "until_verdict_s": until_verdict_s(record.result),
        "result": record.result.to_dict(),
    }


def _write(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
