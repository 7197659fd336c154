"""Coverage: can the sandbox evaluate every KernelBench level 1-3 reference at full size, wherever
KernelBench's own harness can?

Phase 1, the sandbox: each reference is validated against itself through an embedded server (the
`Validate` call: built and run on 2 seeds, finite, deterministic, not degenerate, following its inputs,
within the memory limit, timed on the GPU with 20 runs), --concurrency at a time. A validation that failed
in a way sharing the GPU can cause (out of memory, a crash, an exception, a timeout) is then run again
alone; both verdicts are kept, the one alone is final.
Phase 2, with --kernelbench-harness DIR (after the server has stopped and freed the GPU): KernelBench's
eval_kernel_against_ref on the same problems, the reference itself as the candidate (`class ModelNew(Model):
pass` appended, since the harness needs a ModelNew), correctness only (--harness-trials), each in a fresh
process, up to --harness-concurrency at a time (this is about coverage, not timing) and only while the
peak GPU memory our validation measured for each fits --harness-gpu-memory-gb together; its failures other
than a mismatch or a compile error are run again alone too.

--time-budget: no new work starts once it is spent (the sandbox phase may use --sandbox-share of it when
the harness runs, the harness the rest); work already running finishes, so a run can last up to about
the budget plus one --timeout. What was skipped is reported.

Per problem: our status, reason and its class, reference time, peak GPU memory, duration; the harness's
compiled / correct / error class. The summary (printed last) counts ours as ok / invalid (by reason class) /
timeout / infra_error and the harness's as correct / failed, and lists the problems we fail to run where
the harness succeeds: the target is none, and no infra_error. Invalid verdicts that are judgments on a
reference that did run at full size (degenerate, non-deterministic, ignoring its inputs, non-finite) are
listed apart: the sandbox evaluates such problems, a task generator would reject them.

Device commands: three parts, each under the 10-minute limit (the run may pass --time-budget by one
--timeout). Level 1 is split because 44 of its problems take 4-17 GB of inputs (224 GB for ids 1-50), which
the harness generates on the CPU at about 1 GB/s a process; two validations at a time keep the sandbox's
(up to about 35 GB each) within the 80 GB. The harness copy and the dataset are carried under .device_carry:
    python3 benchmarks/sandbox_coverage.py --dataset .device_carry/datasets/kernelbench.jsonl \\
        --kernelbench-harness .device_carry/kb_harness --harness-concurrency 6 --time-budget 450 --timeout 120 \\
        --levels 1 --ids 1-50 --concurrency 2 --out $OUT/sandbox_coverage_l1a.json      # about 7-8 min
    (the same with --levels 1 --ids 51-100 --concurrency 2 --out $OUT/sandbox_coverage_l1b.json, about 5 min,
    and with --levels 2,3 --out $OUT/sandbox_coverage_l23.json, about 6 min)
CPU dry run (Triton interpreter, CPU-sized problems, untimed; no harness unless one is named):
    python benchmarks/sandbox_coverage.py --dry-run --levels 1,2 --limit 3
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:  # run as a script from anywhere
        sys.path.insert(0, str(path))

from jaxrl.data.kernelbench import Problem, default_source, load_problems  # noqa: E402
from kernelbench_harness import (  # noqa: E402
    HarnessFolderError, HarnessResult, bounded_map, check_harness_dir, first_line, require_cuda, run_harness,
)
from sandbox_service.client import SandboxClient  # noqa: E402
from sandbox_service.options import ValidateOptions  # noqa: E402
from sandbox_service.results import ValidationResult, ValidationStatus  # noqa: E402

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "sandbox_coverage.json"
DEFAULT_LEVELS = (1, 2, 3)

# Our invalid verdicts, by a phrase of the reason the validator gives (the first match wins).
REASON_CLASSES = (
    ("out of memory", "gpu_oom"),  # the validator's "out of GPU memory: CUDA out of memory...", or a crash's output
    ("exceeds the memory limit", "host_memory_limit"),
    ("does not load", "load_error"),
    ("raises:", "raises"),
    ("non-finite outputs", "non_finite"),
    ("not deterministic", "not_deterministic"),
    ("degenerate outputs", "degenerate"),
    ("do not change with the inputs", "ignores_inputs"),
    ("fails when timed", "timing_error"),
    ("was not timed", "untimed"),
    ("us floor", "too_fast"),
    ("validator", "crashed"),
)
# The reference ran at full size; the verdict is a judgment on it as a task, not a failure to run it.
POLICY_CLASSES = frozenset({"non_finite", "not_deterministic", "degenerate", "ignores_inputs", "too_fast"})
# Failures a neighbour on the same GPU can cause (its memory, a cuBLAS workspace it took, its load).
SANDBOX_RETRY_CLASSES = frozenset({"gpu_oom", "host_memory_limit", "raises", "crashed", "timing_error", "untimed",
                                   "timeout", "infra_error", "other"})
HARNESS_NO_RETRY_CLASSES = frozenset({"mismatch", "compile_error"})
GPU_MEMORY_MARGIN_MB = 1024.0  # CUDA context and workspaces beyond the peak torch reports

R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class SandboxOutcome:
    """Our verdict on one reference validated against itself."""

    status: str  # ok, invalid, timeout, infra_error
    reason: str
    reason_class: str  # "ok", a REASON_CLASSES name, "timeout", "infra_error" or "other"
    ref_time_us: float | None
    peak_memory_mb: float | None
    duration_s: float

    @classmethod
    def from_validation(cls, result: ValidationResult) -> SandboxOutcome:
        report = result.input_sets[0] if result.input_sets else None
        return cls(result.status.value, result.reason, reason_class(result), result.ref_time_us,
                   report.peak_memory_mb if report else None, result.duration_s)

    def describe(self) -> str:
        return "ok" if self.status == "ok" else f"{self.reason_class}: {first_line(self.reason)}"


@dataclasses.dataclass
class Row:
    """One problem: each side's final verdict, and the concurrent one it replaced when run again alone."""

    problem: Problem
    sandbox: SandboxOutcome | None = None
    sandbox_concurrent: SandboxOutcome | None = None
    harness: HarnessResult | None = None
    harness_concurrent: HarnessResult | None = None

    @property
    def key(self) -> str:
        return self.problem.key

    def fails_to_run(self) -> bool:
        """Our sandbox could not run the reference (not a policy judgment on one that ran)."""
        ours = self.sandbox
        return ours is not None and ours.status != "ok" and ours.reason_class not in POLICY_CLASSES

    def to_dict(self) -> dict[str, Any]:
        def plain(value):
            if value is None:
                return None
            return value.to_dict() if isinstance(value, HarnessResult) else dataclasses.asdict(value)

        return {"key": self.key, "level": self.problem.level, "problem_id": self.problem.problem_id,
                "name": self.problem.name, "sandbox": plain(self.sandbox),
                "sandbox_concurrent": plain(self.sandbox_concurrent), "harness": plain(self.harness),
                "harness_concurrent": plain(self.harness_concurrent)}


def reason_class(result: ValidationResult) -> str:
    if result.status == ValidationStatus.OK:
        return "ok"
    if result.status in (ValidationStatus.TIMEOUT, ValidationStatus.INFRA_ERROR):
        return result.status.value
    return next((name for phrase, name in REASON_CLASSES if phrase in result.reason), "other")


def as_model_new(reference: str) -> str:
    """The reference as a harness candidate: KernelBench's harness needs a ModelNew."""
    return reference.rstrip() + "\n\n\nclass ModelNew(Model):\n    pass\n"


# --------------------------------------------------------------------------------------------------
# Phases


def run_phase(
    work: Callable[[Problem], R],
    problems: Sequence[Problem],
    concurrency: int,
    deadline: float,
    retry_alone: Callable[[R], bool],
    describe: Callable[[R], str],
    log: Callable[[str], None],
    label: str,
) -> tuple[dict[str, R], dict[str, R]]:
    """`work` on each problem, `concurrency` at a time, none started after `deadline`; then, when that
    was concurrent, `work` again alone on those whose result `retry_alone` picks. Returns the final
    results and, for the problems run again, the concurrent results they replaced (by problem key)."""
    final: dict[str, R] = {}
    for index, result in bounded_map(work, problems, concurrency, deadline):
        if result is not None:  # None: `work` found the budget spent (it waited for memory)
            final[problems[index].key] = result
            log(f"  [{label} {len(final)}/{len(problems)}] {problems[index].key}: {describe(result)}")
    replaced: dict[str, R] = {}
    again = [p for p in problems if p.key in final and retry_alone(final[p.key])] if concurrency > 1 else []
    for index, result in bounded_map(work, again, 1, deadline):
        if result is not None:
            key = again[index].key
            replaced[key], final[key] = final[key], result
            log(f"  [{label} alone] {key}: {describe(result)} (concurrently: {describe(replaced[key])})")
    return final, replaced


class MemoryGate:
    """Admits work while the GPU memory it needs fits `total_mb` together with the work already admitted;
    work that needs more, or an unknown amount, waits until it can run alone."""

    def __init__(self, total_mb: float):
        self.total_mb = int(total_mb)
        self._used_mb = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, need_mb: float | None) -> Iterator[None]:
        need = self.total_mb if need_mb is None else min(math.ceil(need_mb), self.total_mb)
        with self._changed:
            self._changed.wait_for(lambda: self._used_mb + need <= self.total_mb)
            self._used_mb += need
        try:
            yield
        finally:
            with self._changed:
                self._used_mb -= need
                self._changed.notify_all()


def validate_one(client: SandboxClient, problem: Problem, options: ValidateOptions) -> SandboxOutcome:
    """One validation; a client-side failure becomes an infra_error outcome instead of stopping the run."""
    try:
        result = client.validate(problem.code, options=options, request_id=problem.key)
    except Exception as exc:  # noqa: BLE001 - one failing call must not end the benchmark
        result = ValidationResult(ValidationStatus.INFRA_ERROR, reason=f"client error: {type(exc).__name__}: {exc}")
    return SandboxOutcome.from_validation(result)


def sandbox_phase(client, problems, options, concurrency, deadline, log) -> tuple[dict, dict]:
    """client.validate in a bounded pool (as validate_many does), so that the time budget can stop new work."""
    return run_phase(lambda p: validate_one(client, p, options), problems, concurrency, deadline,
                     retry_alone=lambda o: o.reason_class in SANDBOX_RETRY_CLASSES, describe=SandboxOutcome.describe,
                     log=log, label="sandbox")


def harness_phase(harness_dir: Path, problems, trials: int, timeout_s: float, concurrency: int, deadline: float,
                  gate: MemoryGate | None, needs_mb: dict[str, float | None], log) -> tuple[dict, dict]:
    """The harness on each problem (the reference as ModelNew), correctness only; with a `gate`, a problem
    starts only when its GPU memory (`needs_mb`, None: unknown, alone) fits beside the running ones."""

    def work(problem: Problem) -> HarnessResult | None:
        with gate.hold(needs_mb.get(problem.key)) if gate else contextlib.nullcontext():
            if time.monotonic() > deadline:
                return None
            return run_harness(harness_dir, problem.code, as_model_new(problem.code), trials=trials, perf_trials=1,
                               perf=False, timeout_s=timeout_s)

    return run_phase(work, problems, concurrency, deadline,
                     retry_alone=lambda r: not r.correct and r.error_class not in HARNESS_NO_RETRY_CLASSES,
                     describe=HarnessResult.describe, log=log, label="harness")


def harness_memory_needs(rows: dict[str, Row]) -> dict[str, float | None]:
    """Each problem's GPU memory for the harness: the peak our validation measured, plus a margin; unknown
    (None) where the validation failed."""
    return {key: (row.sandbox.peak_memory_mb + GPU_MEMORY_MARGIN_MB
                  if row.sandbox and row.sandbox.status == "ok" and row.sandbox.peak_memory_mb else None)
            for key, row in rows.items()}


# --------------------------------------------------------------------------------------------------
# Reporting


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _keys(rows: list[Row], reason: Callable[[Row], str]) -> list[str]:
    return [f"{row.key} ({reason(row)})" for row in rows]


def summarise(rows: list[Row], harness_run: bool, phase_s: dict[str, float]) -> dict[str, Any]:
    """Counts per side, the comparison lists, and the target verdict; `lines` is what is printed last."""
    ours = [row for row in rows if row.sandbox is not None]
    status = collections.Counter(row.sandbox.status for row in ours)
    invalid = collections.Counter(row.sandbox.reason_class for row in ours if row.sandbox.status == "invalid")
    retried = [row for row in rows if row.sandbox_concurrent is not None]
    lines = [
        f"sandbox: {len(ours)} of {len(rows)} problems validated ({len(rows) - len(ours)} skipped: time budget) in "
        f"{phase_s.get('sandbox', 0.0):.0f} s with the server's start and stop: ok {status['ok']}, "
        f"invalid {status['invalid']}"
        + (f" ({', '.join(f'{name} {n}' for name, n in invalid.most_common())})" if invalid else "")
        + f", timeout {status['timeout']}, infra_error {status['infra_error']}",
    ]
    if retried:
        lines.append(f"  failed while concurrent, validated again alone: {len(retried)}, ok alone "
                     f"{sum(row.sandbox.status == 'ok' for row in retried)}: "
                     + ", ".join(f"{row.key} -> {row.sandbox.reason_class}" for row in retried))
    summary: dict[str, Any] = {
        "problems": len(rows), "sandbox_validated": len(ours), "sandbox_status": dict(status),
        "sandbox_invalid_classes": dict(invalid), "sandbox_retried_alone": [row.key for row in retried],
        "infra_errors": [row.key for row in ours if "infra_error" in
                         (row.sandbox.status, row.sandbox_concurrent and row.sandbox_concurrent.status)],
        "cannot_run": [row.key for row in ours if row.fails_to_run()],
    }
    if harness_run:
        lines += _harness_lines(rows, summary, phase_s)
    else:
        cannot_run = _keys([row for row in ours if row.fails_to_run()], lambda row: row.sandbox.reason_class)
        lines.append(f"KernelBench harness: not run; problems we fail to run: {', '.join(cannot_run) or 'none'}")
    # Judged only against a harness that worked: one that passes nothing (a broken set-up) proves nothing.
    judged = harness_run and summary["harness_correct"] > 0
    summary["target_met"] = (not summary["gaps"] and not summary["infra_errors"]) if judged else None
    verdict = {True: "MET", False: "NOT MET"}.get(
        summary["target_met"], "not judged (" + ("the harness judged no problem correct: check that it runs)"
                                                 if harness_run else "no harness run)"))
    lines.append(f"TARGET (no problem we fail to run where the harness succeeds, no infra_error): {verdict} - "
                 f"gaps {len(summary.get('gaps', []))}, infra_error {len(summary['infra_errors'])}")
    summary["lines"] = lines
    return summary


def _harness_lines(rows: list[Row], summary: dict[str, Any], phase_s: dict[str, float]) -> list[str]:
    ran = [row for row in rows if row.harness is not None]
    failed = collections.Counter(row.harness.error_class for row in ran if not row.harness.correct)
    both = [row for row in ran if row.sandbox is not None]
    gaps = [row for row in both if row.harness.correct and row.fails_to_run()]
    policy = [row for row in both if row.harness.correct and row.sandbox.status != "ok" and not row.fails_to_run()]
    harness_only = [row for row in both if row.sandbox.status == "ok" and not row.harness.correct]
    both_fail = [row for row in both if row.sandbox.status != "ok" and not row.harness.correct]
    retried = [row for row in rows if row.harness_concurrent is not None]
    summary.update({
        "harness_run": len(ran), "harness_correct": sum(row.harness.correct for row in ran),
        "harness_failed_classes": dict(failed), "harness_retried_alone": [row.key for row in retried],
        "gaps": [row.key for row in gaps], "policy_invalid_harness_correct": [row.key for row in policy],
        "harness_fails_sandbox_ok": [row.key for row in harness_only], "both_fail": [row.key for row in both_fail],
    })
    lines = [
        f"KernelBench harness: {len(ran)} of {len(both)} problems run ({len(both) - len(ran)} skipped: time budget) "
        f"in {phase_s.get('harness', 0.0):.0f} s: correct {summary['harness_correct']}, "
        f"failed {len(ran) - summary['harness_correct']}"
        + (f" ({', '.join(f'{name} {n}' for name, n in failed.most_common())})" if failed else ""),
    ]
    if retried:
        lines.append(f"  failed while concurrent, run again alone: {len(retried)}, correct alone "
                     f"{sum(row.harness.correct for row in retried)}: "
                     + ", ".join(f"{row.key} -> {row.harness.error_class or 'correct'}" for row in retried))
    lines += [
        "we judge invalid, the reference ran, harness correct (policy, expected): "
        + (", ".join(_keys(policy, lambda r: r.sandbox.reason_class)) or "none"),
        "harness fails, we ok: " + (", ".join(_keys(harness_only, lambda r: r.harness.error_class)) or "none"),
        "both fail: " + (", ".join(_keys(both_fail, lambda r: f"{r.sandbox.reason_class} / {r.harness.error_class}"))
                         or "none"),
        "WE FAIL TO RUN, HARNESS CORRECT (gaps): " + (", ".join(_keys(gaps, lambda r: r.sandbox.describe())) or "none"),
    ]
    return lines


def print_table(rows: list[Row]) -> None:
    print(f"\n{'problem':<8} {'name':<34} {'sandbox':<18} {'ref_us':>10} {'peak_mb':>9} {'dur_s':>6}  "
          f"{'harness':<14} {'h_s':>6} {'h_peak_mb':>9}")
    for row in rows:
        ours, theirs = row.sandbox, row.harness
        print(
            f"{row.key:<8} {row.problem.name[:34]:<34} "
            f"{(ours.reason_class if ours else 'skipped')[:18]:<18} {_fmt(ours and ours.ref_time_us, '.1f'):>10} "
            f"{_fmt(ours and ours.peak_memory_mb, '.0f'):>9} {_fmt(ours and ours.duration_s, '.1f'):>6}  "
            f"{('correct' if theirs.correct else theirs.error_class)[:14] if theirs else '-':<14} "
            f"{_fmt(theirs and theirs.process_s, '.1f'):>6} {_fmt(theirs and theirs.peak_memory_mb, '.0f'):>9}"
        )
    print()


# --------------------------------------------------------------------------------------------------


def parse_int_list(text: str) -> list[int]:
    """"1,2,5-7" -> [1, 2, 5, 6, 7]."""
    values: list[int] = []
    try:
        for part in filter(None, (part.strip() for part in text.split(","))):
            low, _, high = part.partition("-")
            values += range(int(low), int(high or low) + 1)
    except ValueError:
        values = []
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers or ranges (1,3,5-9), got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=None, help="KernelBench JSONL (default: the shared one)")
    parser.add_argument("--levels", type=parse_int_list, default=list(DEFAULT_LEVELS), help="e.g. 1,2,3")
    parser.add_argument("--ids", type=parse_int_list, default=None,
                        help="problem ids within the selected levels, e.g. 1-50 or 3,7,9")
    parser.add_argument("--limit", type=int, default=None, help="at most this many problems per level (the first)")
    parser.add_argument("--concurrency", type=int, default=4, help="sandbox validations in flight")
    parser.add_argument("--workers", type=int, default=None, help="embedded server's workers (default: --concurrency)")
    parser.add_argument("--seeds", type=int, default=2, help="input seeds per validation")
    parser.add_argument("--timing-runs", type=int, default=20, help="timed runs of each reference (GPU only)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per validation and per harness run")
    parser.add_argument("--memory-limit-mb", type=int, default=ValidateOptions.memory_limit_mb,
                        help="the validator's host memory (RSS) limit")
    parser.add_argument("--kernelbench-harness", type=Path, default=None,
                        help="folder with KernelBench's src/eval.py and run_one.py (kept outside the repository)")
    parser.add_argument("--harness-concurrency", type=int, default=4, help="harness processes at once")
    parser.add_argument("--harness-trials", type=int, default=1, help="the harness's correctness trials")
    parser.add_argument("--harness-gpu-memory-gb", type=float, default=70.0,
                        help="GPU memory the harness processes may need together, from our measured peaks "
                             "(70 suits an 80 GB H100; 0: no limit; ignored in the dry run)")
    parser.add_argument("--time-budget", type=float, default=480.0,
                        help="seconds after which no new work starts (work in flight finishes)")
    parser.add_argument("--sandbox-share", type=float, default=0.5,
                        help="fraction of the budget after which the sandbox phase starts nothing new, when the "
                             "harness runs too (the harness gets the rest)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file for every row and the summary")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU: Triton interpreter, CPU-sized problems (levels 1-2 have them), untimed")
    return parser


def check_args(args: argparse.Namespace) -> None:
    problems = []
    if args.concurrency < 1 or args.harness_concurrency < 1:
        problems.append("--concurrency and --harness-concurrency must be >= 1")
    if args.limit is not None and args.limit < 1:
        problems.append("--limit must be >= 1")
    if not 0 < args.sandbox_share <= 1:
        problems.append("--sandbox-share must be in (0, 1]")
    if args.time_budget <= 0 or args.timeout <= 0:
        problems.append("--time-budget and --timeout must be positive")
    if args.harness_gpu_memory_gb < 0:
        problems.append("--harness-gpu-memory-gb must be >= 0")
    if problems:
        raise SystemExit("error: " + "; ".join(problems))


def select_problems(args: argparse.Namespace) -> list[Problem]:
    try:
        problems = load_problems(args.dataset or default_source(), levels=args.levels, ids=args.ids,
                                 cpu_sized=args.dry_run)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.limit is None:
        return problems
    per_level: dict[int, int] = collections.Counter()
    kept = []
    for problem in problems:
        per_level[problem.level] += 1
        if per_level[problem.level] <= args.limit:
            kept.append(problem)
    return kept


def log(text: str) -> None:
    print(text, flush=True)


def fill_sandbox(rows: dict[str, Row], args, backend: str, options: ValidateOptions, deadline: float,
                 document: dict[str, Any]) -> float:
    """Phase 1 through an embedded server, stopped at the end so the harness gets the GPU; its seconds."""
    started = time.monotonic()
    problems = [row.problem for row in rows.values()]
    with SandboxClient.embedded(backend=backend, workers=args.workers or args.concurrency,
                                timeout_s=args.timeout + 600) as client:
        document["server_start_s"] = time.monotonic() - started
        log(f"embedded server ({backend}) started in {document['server_start_s']:.1f} s; validating ...")
        final, replaced = sandbox_phase(client, problems, options, args.concurrency, deadline, log)
    for key, outcome in final.items():
        rows[key].sandbox, rows[key].sandbox_concurrent = outcome, replaced.get(key)
    return time.monotonic() - started


def fill_harness(rows: dict[str, Row], args, harness_dir: Path, deadline: float) -> float:
    """Phase 2 on the problems phase 1 reached; its seconds."""
    started = time.monotonic()
    reached = [row.problem for row in rows.values() if row.sandbox is not None]
    log(f"KernelBench harness on the {len(reached)} problems validated ...")
    gated = args.harness_gpu_memory_gb > 0 and not args.dry_run  # dry-run peaks are host memory
    gate = MemoryGate(args.harness_gpu_memory_gb * 1024) if gated else None
    final, replaced = harness_phase(harness_dir, reached, args.harness_trials, args.timeout,
                                    args.harness_concurrency, deadline, gate, harness_memory_needs(rows), log)
    for key, result in final.items():
        rows[key].harness, rows[key].harness_concurrent = result, replaced.get(key)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    try:
        harness_dir = check_harness_dir(args.kernelbench_harness) if args.kernelbench_harness else None
    except HarnessFolderError as exc:
        raise SystemExit(f"error: {exc}") from None
    if not args.dry_run:
        require_cuda()
    problems = select_problems(args)
    backend = "interpreter" if args.dry_run else "cuda"
    options = ValidateOptions(seeds=args.seeds, time=True, timing_runs=args.timing_runs, timeout_s=args.timeout,
                              memory_limit_mb=args.memory_limit_mb)
    log(f"{len(problems)} problems (levels {','.join(map(str, sorted({p.level for p in problems})))}), backend "
        f"{backend}, sandbox concurrency {args.concurrency}, harness "
        + (f"{harness_dir} x{args.harness_concurrency}, {args.harness_trials} trial(s)" if harness_dir else "not run"))
    document: dict[str, Any] = {
        "backend": backend, "dry_run": args.dry_run, "levels": args.levels,
        "validate_options": dataclasses.asdict(options), "sandbox_concurrency": args.concurrency,
        "harness": str(harness_dir) if harness_dir else None, "harness_concurrency": args.harness_concurrency,
        "harness_trials": args.harness_trials, "harness_gpu_memory_gb": args.harness_gpu_memory_gb,
        "time_budget_s": args.time_budget,
    }

    started = time.monotonic()
    rows = {p.key: Row(p) for p in problems}
    share = args.sandbox_share if harness_dir else 1.0
    phase_s = {"sandbox": fill_sandbox(rows, args, backend, options, started + args.time_budget * share, document)}
    if harness_dir:
        phase_s["harness"] = fill_harness(rows, args, harness_dir, started + args.time_budget)

    ordered = list(rows.values())
    summary = summarise(ordered, harness_dir is not None, phase_s)
    document.update({"phase_s": phase_s, "total_s": time.monotonic() - started,
                     "rows": [row.to_dict() for row in ordered], "summary": summary})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    print_table(ordered)
    print(f"full results: {args.out}  (total {document['total_s']:.0f} s)")
    for line in summary["lines"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
