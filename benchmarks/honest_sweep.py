"""Honest Triton kernels through both sandbox designs, side by side (issue 20, target 4 "Honest code").

Every pair is an honest (reference, candidate) pair; each is evaluated on the CPU Triton interpreter by
`sandbox_service.evaluation.evaluate` on a lane of the executor design and on a lane of the in-process design
(the baseline), with the same options. Reported per source: pairs, `ok` per design, and every pair that is
not `ok` with its status and the first line of its error, grouped by reason; evaluations per minute per
design and the executor's ratio to the in-process design (the two run one after the other, not at once).

Sources:
  corpus   the hack corpus's honest cases (tests/sandbox_service/corpus/manifest.yaml, expected_status ok),
           with their problems' input sets
  kernels  benchmarks/kernels/level1 against the CPU-sized variant of each KernelBench problem (the full-size
           problems are far too big for the interpreter; every one is skipped and counted as such)
  teacher  the data engine's teacher pairs: tasks of `generate_tasks(seed, scale="cpu")` in order, those with
           a template solution, the completion text the data build verifies (`rows.answer_text`) against the
           task with its input sets, with the build's verify options but trials and timeout from here. The
           engine's own verification is not run first: the in-process design's verdict plays that part
           (a pair not `ok` under both designs is a teacher defect, not the new path's).

    python benchmarks/honest_sweep.py --sources corpus,kernels,teacher --pairs 500 \\
        --designs executor,in-process --workers 2 --out benchmarks/results/honest_sweep_cpu.json

`--baseline-pairs N` evaluates only the first N teacher pairs on the in-process design (a time box).
`--drop-element-ty-casts` is a probe, not the measure: it removes every `.to(<ptr>.dtype.element_ty)` cast
from the candidates before evaluating them (`tl.store` casts to the pointer's element type anyway, so the
kernels compute the same), to see what the executor design does with them past that first refusal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from sandbox_service.lane import EXECUTOR_DESIGN, IN_PROCESS_DESIGN, Lane  # noqa: E402
from sandbox_service.options import CandidateFormat, EvalOptions, InputSet, Policy  # noqa: E402
from sandbox_service.results import EvalResult, Status  # noqa: E402

CORPUS = REPO_ROOT / "tests" / "sandbox_service" / "corpus"
KERNELS = REPO_ROOT / "benchmarks" / "kernels" / "level1"
SOURCES = ("corpus", "kernels", "teacher")
DESIGNS = (EXECUTOR_DESIGN, IN_PROCESS_DESIGN)
BASELINE = IN_PROCESS_DESIGN
TRIALS = 2
ELEMENT_TY_CAST = re.compile(r"\.to\(\s*\w+\.dtype\.element_ty\s*\)")
TIMEOUT_S = 180.0
MEMORY_LIMIT_MB = 4096


@dataclasses.dataclass(frozen=True)
class HonestPair:
    source: str
    key: str
    reference: str
    candidate: str
    input_sets: tuple[InputSet, ...] = ()
    completion: bool = False  # the candidate is a completion (`<think>` ... code block), as the data build sends


def options_for(pair: HonestPair) -> EvalOptions:
    """The same for both designs; teacher pairs as the data build verifies them (completion text, strict)."""
    return EvalOptions(trials=TRIALS, time=False, timeout_s=TIMEOUT_S, memory_limit_mb=MEMORY_LIMIT_MB,
                       policy=Policy.STRICT,
                       candidate_format=CandidateFormat.COMPLETION if pair.completion else CandidateFormat.AUTO)


# -- sources ---------------------------------------------------------------------------------------
def corpus_pairs(corpus: Path = CORPUS) -> list[HonestPair]:
    import yaml

    manifest = yaml.safe_load((corpus / "manifest.yaml").read_text())
    sets = manifest.get("input_sets", {}) or {}
    pairs = []
    for entry in manifest["candidates"]:
        if entry["expected_status"] != "ok":
            continue
        input_sets = tuple(InputSet(Path(f).stem, (corpus / f).read_text()) for f in sets.get(entry["problem"], []))
        pairs.append(HonestPair("corpus", entry["file"], (corpus / entry["problem"]).read_text(),
                                (corpus / entry["file"]).read_text(), input_sets))
    return pairs


def kernel_pairs(dataset: Path | None, kernels: Path = KERNELS) -> tuple[list[HonestPair], dict[str, Any]]:
    """(pairs on the CPU-sized problems, what was skipped): full-size level-1 problems do not fit the
    interpreter (e.g. 1: two 4096x4096 matrices; the CPU-sized variant is what the tests evaluate)."""
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from sandbox_throughput import load_cases

    from jaxrl.data.kernelbench import resolve_kernelbench

    cases = load_cases(resolve_kernelbench(dataset), kernels, None, cpu_sized=True)
    pairs = [HonestPair("kernels", f"{c.candidate_file} ({c.name}, cpu-sized)", c.reference, c.candidate)
             for c in cases]
    skipped = {"full_size": len(cases),
               "reason": "full-size KernelBench level-1 problems are too big for the CPU interpreter; "
                         "each candidate runs on its problem's CPU-sized variant instead"}
    return pairs, skipped


def teacher_pairs(count: int, seed: int) -> tuple[list[HonestPair], dict[str, Any]]:
    """The first `count` tasks with a template solution of `generate_tasks(seed, ..., scale="cpu")`; task i
    does not depend on how many are generated, so the sample is the same whatever the batch size."""
    from jaxrl.data.engine.generator import generate_tasks
    from jaxrl.data.engine.rows import answer_text

    chosen, generated, untemplated, teacher_errors = [], 0, 0, 0
    batch = max(count, 64)
    while len(chosen) < count:
        tasks = generate_tasks(seed, generated + batch, scale="cpu")[generated:]
        generated += batch
        for task in tasks:
            if task.solution is None:
                untemplated += 1
                teacher_errors += bool(task.teacher_error)
            elif len(chosen) < count:
                chosen.append(task)
        if generated > 20 * count + 1000:
            raise RuntimeError(f"only {len(chosen)} templated tasks in {generated}")
    pairs = [HonestPair("teacher", f"{t.task_id} [{t.family}]", t.code, answer_text(t.solution), t.input_sets,
                        completion=True) for t in chosen]
    families = Counter(t.family.split(":")[0] for t in chosen)
    return pairs, {"seed": seed, "scale": "cpu", "tasks_drawn_up_to_last_pair": _last_index(chosen, seed),
                   "without_template_skipped": untemplated, "of_which_teacher_error": teacher_errors,
                   "families": len(families)}


def _last_index(tasks: list, seed: int) -> int | None:
    if not tasks:
        return None
    return int(tasks[-1].task_id.rsplit("-", 1)[1]) + 1


# -- evaluation --------------------------------------------------------------------------------------
def first_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


TRACEBACK = "Traceback (most recent call last):"


def traceback_summary(text: str) -> str:
    """For an error that is a Python traceback: what precedes it on its line, the exception (its last line) and
    the innermost frame in the evaluated code (not the sandbox's, not a library's): file name and source."""
    before = text.split(TRACEBACK, 1)[0].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    exception = lines[-1].strip() if lines else ""
    where = ""
    for index, line in enumerate(lines):
        match = re.match(r'\s*File "([^"]+)", line \d+, in (\S+)', line)
        if match and "site-packages" not in match[1] and "/sandbox_service/" not in match[1]:
            source = lines[index + 1].strip() if index + 1 < len(lines) and not lines[index + 1].lstrip().startswith(
                "File ") else ""
            where = f" (in {Path(match[1]).name}, {match[2]}: {source})"
    return f"{before} {exception}{where}".strip()


def reason_of(result: EvalResult) -> str:
    """Status and the first line of the error (a traceback: see traceback_summary), or the violated rules for a
    cheat without an error."""
    line = first_line(result.error)
    if TRACEBACK in line:
        line = traceback_summary(result.error)[:400]
    if not line and result.violations:
        line = "; ".join(sorted({f"{v.rule}" for v in result.violations}))
    return f"{result.status.value}: {line}" if line else result.status.value


def pattern_of(reason: str) -> str:
    """A reason with what differs between pairs of the same pattern masked: kernel names and numbers."""
    reason = re.sub(r"\bkernel [A-Za-z_]\w*", "kernel <name>", reason)
    return re.sub(r"\b\d+(\.\d+)?\b", "<n>", reason)


def kind_of(result: EvalResult) -> str:
    """A coarse group: the status, plus the error's leading word where it names a kind (`unsupported:`)."""
    line = first_line(result.error)
    head = line.split(":", 1)[0] if ":" in line else ""
    if head and len(head) <= 40 and " " not in head.strip():
        return f"{result.status.value}/{head.strip()}"
    return result.status.value


def evaluate_design(design: str, pairs: list[HonestPair], workers: int, log) -> tuple[list[dict], float]:
    """Verdict records for `pairs` on one fresh lane of `design`, and the wall time of the evaluations."""
    from sandbox_service.evaluation import evaluate

    with tempfile.TemporaryDirectory(prefix=f"honest-sweep-{design}-") as root:
        lane = Lane.create("interpreter", None, warm=max(2, workers), work_root=Path(root), design=design)
        done = [0]

        def one(pair: HonestPair) -> dict:
            started = time.monotonic()
            try:
                result = evaluate(pair.reference, pair.candidate, options_for(pair), lane,
                                  input_sets=pair.input_sets)
            except Exception as exc:  # noqa: BLE001 - a crash of the harness is a result to report
                result = EvalResult(Status.INFRA_ERROR, error=f"evaluate raised {type(exc).__name__}: {exc}")
            wall = time.monotonic() - started
            done[0] += 1
            if result.status != Status.OK or done[0] % 25 == 0:
                log(f"  [{design}] {done[0]}/{len(pairs)} {pair.source} {pair.key}: {reason_of(result)} ({wall:.1f} s)")
            reason = reason_of(result)
            return {"source": pair.source, "key": pair.key, "status": result.status.value, "reason": reason,
                    "pattern": pattern_of(reason), "kind": kind_of(result), "wall_s": round(wall, 3),
                    "trials_passed": result.trials_passed, "trials": result.trials}

        try:
            started = time.monotonic()
            with ThreadPoolExecutor(workers) as pool:
                records = list(pool.map(one, pairs))
            wall = time.monotonic() - started
        finally:
            lane.close()
    return records, wall


def summarise(pairs_by_source: dict[str, list[HonestPair]], runs: dict[str, dict]) -> dict[str, Any]:
    sources = {}
    for source, pairs in pairs_by_source.items():
        row: dict[str, Any] = {"total": len(pairs), "designs": {}}
        verdicts: dict[str, dict[str, dict]] = {}
        for design, run in runs.items():
            records = [r for r in run["records"] if r["source"] == source]
            verdicts[design] = {r["key"]: r for r in records}
            bad = [r for r in records if r["status"] != "ok"]
            row["designs"][design] = {
                "evaluated": len(records),
                "ok": len(records) - len(bad),
                "not_ok_by_kind": dict(Counter(r["kind"] for r in bad).most_common()),
                "not_ok_by_pattern": dict(Counter(r["pattern"] for r in bad).most_common()),
                "not_ok": [{"key": r["key"], "status": r["status"], "reason": r["reason"]} for r in bad],
            }
        if EXECUTOR_DESIGN in verdicts and BASELINE in verdicts:
            both = set(verdicts[EXECUTOR_DESIGN]) & set(verdicts[BASELINE])
            row["executor_only_not_ok"] = sorted(
                k for k in both if verdicts[EXECUTOR_DESIGN][k]["status"] != "ok" and verdicts[BASELINE][k]["status"] == "ok")
            row["baseline_only_not_ok"] = sorted(
                k for k in both if verdicts[BASELINE][k]["status"] != "ok" and verdicts[EXECUTOR_DESIGN][k]["status"] == "ok")
            row["both_not_ok"] = sorted(
                k for k in both if verdicts[BASELINE][k]["status"] != "ok" and verdicts[EXECUTOR_DESIGN][k]["status"] != "ok")
            row["compared"] = len(both)
        sources[source] = row
    rates = {}
    for design, run in runs.items():
        n = len(run["records"])
        rates[design] = {"evaluations": n, "wall_s": round(run["wall_s"], 1),
                         "evaluations_per_minute": round(60.0 * n / run["wall_s"], 2) if run["wall_s"] else None}
    if BASELINE in rates and EXECUTOR_DESIGN in rates and rates[BASELINE]["evaluations_per_minute"]:
        rates["ratio_executor_to_in_process"] = round(
            rates[EXECUTOR_DESIGN]["evaluations_per_minute"] / rates[BASELINE]["evaluations_per_minute"], 3)
        rates["where_both_ok"] = both_ok_rates(runs)
    return {"sources": sources, "rates": rates}


def both_ok_rates(runs: dict[str, dict]) -> dict[str, Any]:
    """A refusal is quick, so the rates above favour the design that refuses more: the same comparison on only
    the pairs `ok` under both, from each evaluation's own wall time (mean; the lanes ran `workers` at a time)."""
    walls = {d: {(r["source"], r["key"]): r["wall_s"] for r in run["records"] if r["status"] == "ok"}
             for d, run in runs.items()}
    common = set(walls[EXECUTOR_DESIGN]) & set(walls[BASELINE])
    if not common:
        return {"pairs": 0}
    mean = {d: sum(walls[d][k] for k in common) / len(common) for d in (EXECUTOR_DESIGN, BASELINE)}
    return {"pairs": len(common), **{f"{d}_mean_wall_s": round(mean[d], 3) for d in mean},
            "ratio_executor_to_in_process": round(mean[BASELINE] / mean[EXECUTOR_DESIGN], 3)}


def render(summary: dict[str, Any], designs: list[str]) -> list[str]:
    lines = [f"{'source':<9} {'pairs':>6} " + " ".join(f"{d + ' ok':>20}" for d in designs)]
    for source, row in summary["sources"].items():
        cells = []
        for d in designs:
            info = row["designs"].get(d)
            cells.append(f"{info['ok']}/{info['evaluated']}" if info else "-")
        lines.append(f"{source:<9} {row['total']:>6} " + " ".join(f"{c:>20}" for c in cells))
    for source, row in summary["sources"].items():
        for d in designs:
            info = row["designs"].get(d)
            if info and info["not_ok_by_pattern"]:
                lines.append(f"{source} / {d}: not ok (kernel names and numbers masked)")
                lines.extend(f"  {count:>4} x {reason}" for reason, count in info["not_ok_by_pattern"].items())
        if row.get("executor_only_not_ok"):
            lines.append(f"{source}: not ok only under the executor design: {len(row['executor_only_not_ok'])}")
    rates = summary["rates"]
    for d in designs:
        if d in rates:
            lines.append(f"{d}: {rates[d]['evaluations']} evaluations in {rates[d]['wall_s']} s = "
                         f"{rates[d]['evaluations_per_minute']} per minute")
    if "ratio_executor_to_in_process" in rates:
        lines.append(f"executor / in-process (baseline, same job): x{rates['ratio_executor_to_in_process']}"
                     " evaluations per minute (on all the pairs each evaluated)")
        both = rates["where_both_ok"]
        if both["pairs"]:
            lines.append(f"on the {both['pairs']} pairs ok under both: mean wall per evaluation "
                         f"{both[EXECUTOR_DESIGN + '_mean_wall_s']} s (executor) vs {both[BASELINE + '_mean_wall_s']} s"
                         f" (in-process): x{both['ratio_executor_to_in_process']} evaluations per unit of time")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated: corpus,kernels,teacher")
    parser.add_argument("--pairs", type=int, default=500, help="teacher pairs (and at most this many per source)")
    parser.add_argument("--baseline-pairs", type=int, default=None,
                        help="teacher pairs evaluated on the in-process design (default: all of them)")
    parser.add_argument("--designs", default=f"{EXECUTOR_DESIGN},{IN_PROCESS_DESIGN}")
    parser.add_argument("--workers", type=int, default=2, help="evaluations at once on a lane (threads)")
    parser.add_argument("--seed", type=int, default=0, help="the data engine's seed for the teacher pairs")
    parser.add_argument("--dataset", type=Path, default=None, help="KernelBench jsonl (default: the shared one)")
    parser.add_argument("--drop-element-ty-casts", action="store_true",
                        help="probe: remove .to(<ptr>.dtype.element_ty) casts from every candidate first")
    parser.add_argument("--out", type=Path, default=Path("honest_sweep.json"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    designs = [d.strip() for d in args.designs.split(",") if d.strip()]
    if unknown := [s for s in sources if s not in SOURCES]:
        raise SystemExit(f"unknown source(s) {unknown}: choose from {SOURCES}")
    if unknown := [d for d in designs if d not in DESIGNS]:
        raise SystemExit(f"unknown design(s) {unknown}: choose from {DESIGNS}")
    if args.pairs < 1 or args.workers < 1:
        raise SystemExit("--pairs and --workers must be positive")
    os.environ.setdefault("TRITON_INTERPRET", "1")

    def log(text: str) -> None:
        print(text, flush=True)

    pairs_by_source: dict[str, list[HonestPair]] = {}
    notes: dict[str, Any] = {}
    started = time.monotonic()
    for source in sources:
        if source == "corpus":
            pairs_by_source[source] = corpus_pairs()[:args.pairs]
        elif source == "kernels":
            pairs, notes["kernels_skipped"] = kernel_pairs(args.dataset)
            pairs_by_source[source] = pairs[:args.pairs]
        else:
            pairs, notes["teacher"] = teacher_pairs(args.pairs, args.seed)
            pairs_by_source[source] = pairs
        log(f"{source}: {len(pairs_by_source[source])} pairs")
    if args.drop_element_ty_casts:
        rewritten = Counter()
        for source, pairs in pairs_by_source.items():
            pairs_by_source[source] = [dataclasses.replace(p, candidate=ELEMENT_TY_CAST.sub("", p.candidate))
                                       for p in pairs]
            rewritten[source] = sum(bool(ELEMENT_TY_CAST.search(p.candidate)) for p in pairs)
        notes["probe_dropped_element_ty_casts_in"] = dict(rewritten)
    notes["prepare_s"] = round(time.monotonic() - started, 1)

    runs = {}
    for design in designs:
        pairs = [p for s in sources for p in pairs_by_source[s]]
        if design == BASELINE and args.baseline_pairs is not None:
            teacher = [p for p in pairs if p.source == "teacher"][:args.baseline_pairs]
            pairs = [p for p in pairs if p.source != "teacher"] + teacher
        log(f"{design}: {len(pairs)} evaluations, {args.workers} at a time")
        records, wall = evaluate_design(design, pairs, args.workers, log)
        runs[design] = {"records": records, "wall_s": wall}

    summary = summarise(pairs_by_source, runs)
    document = {
        "benchmark": "honest_sweep", "backend": "interpreter", "argv": sys.argv[1:] if argv is None else argv,
        "options": {"trials": TRIALS, "time": False, "timeout_s": TIMEOUT_S, "memory_limit_mb": MEMORY_LIMIT_MB,
                    "policy": "strict", "teacher_candidate_format": "completion"},
        "workers": args.workers, "designs": designs, "baseline": BASELINE, "host": platform.node(),
        "cpus": os.cpu_count(), "notes": notes, **summary,
        "records": {design: run["records"] for design, run in runs.items()},
        "total_s": round(time.monotonic() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    for line in render(summary, designs):
        log(line)
    log(f"full results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
