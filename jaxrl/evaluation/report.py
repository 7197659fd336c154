"""The human-readable side of an evaluation run: per-problem summaries and `report.md`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxrl.config import Config
from jaxrl.data.task_source import TaskSpec
from jaxrl.evaluation.metrics import Metrics
from sandbox_service.results import Status

STATUS_ORDER = [s.value for s in Status]
MAX_EXAMPLES = 5
_EXCERPT_CHARS = 800


def per_problem_summary(problems: Sequence[TaskSpec], records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per problem in problem order: sample count, count per status, best speedup of a correct sample."""
    by_problem: dict[str, list[Mapping[str, Any]]] = {p.key: [] for p in problems}
    for record in records:
        by_problem[record["problem"]].append(record)
    summary = []
    for problem in problems:
        samples = by_problem[problem.key]
        statuses = Counter(r["status"] for r in samples)
        speedups = [r["speedup"] for r in samples if r["status"] == Status.OK.value and r.get("speedup") is not None]
        summary.append({
            "problem": problem.key,
            "name": problem.name,
            "level": problem.level,
            "family": problem.family,
            "split": problem.split,
            "samples": len(samples),
            "statuses": {s: statuses[s] for s in STATUS_ORDER if statuses[s]},
            "best_speedup": max(speedups) if speedups else None,
        })
    return summary


def write_report(
    path: Path,
    config: Config,
    problems: Sequence[TaskSpec],
    records: Sequence[Mapping[str, Any]],
    metrics: Metrics,
    timing: Mapping[str, Any],
    by_family: Metrics | None = None,
) -> None:
    sections = [
        "# Evaluation",
        _config_summary(config, problems, len(records), timing),
        "## Metrics\n\n"
        "Rates are per sample (`@1`) or unbiased pass@k estimates; `speedup` is the geometric mean over\n"
        "correct, timed samples; `-` means undefined (e.g. nothing was timed under the Triton interpreter).\n\n"
        + metrics.table(markdown=True),
    ]
    if by_family is not None:
        sections.append("## Per family\n\nThe same rates with the tasks grouped by operator family.\n\n"
                        + by_family.table(markdown=True))
    sections += [
        "## Problems\n\n" + _problem_table(per_problem_summary(problems, records)),
        "## Example failures\n\n" + _examples(records),
    ]
    path.write_text("\n\n".join(sections) + "\n", encoding="utf-8")


def _config_summary(config: Config, problems: Sequence[TaskSpec], samples: int, timing: Mapping[str, Any]) -> str:
    s, e, b = config.sampling, config.eval, config.sandbox
    ids = "all" if e.ids is None else ", ".join(map(str, e.ids))
    where = ", ".join(b.targets) if b.targets else f"embedded ({b.workers} worker(s))"
    rate = timing.get("tokens_per_s")
    speed = f" ({rate:.1f} tokens/s)" if rate else ""
    kernelbench = any(p.level is not None for p in problems)
    selection = f"levels {', '.join(map(str, e.levels))}; ids {ids}" if kernelbench else f"split {e.split or 'all'}"
    lines = [
        f"- model: `{config.model.source}` ({config.model.dtype})",
        f"- problems: {len(problems)} ({selection}{'; CPU-sized' if e.cpu_sized else ''}; dataset {e.dataset})",
        f"- sampling: {s.num_samples} per problem, temperature {s.temperature}, top_p {s.top_p}, top_k {s.top_k},"
        f" max_new_tokens {s.max_new_tokens}, seed {s.seed}",
        f"- sandbox: {where}, backend {b.backend}, policy {b.policy}, {b.trials} trials, timeout {b.timeout_s:g} s",
        f"- samples: {samples}; generated {timing.get('generated_tokens', 0)} tokens in"
        f" {timing.get('generation_s', 0):.1f} s{speed}; total {timing.get('total_s', 0):.1f} s",
    ]
    origins = list(dict.fromkeys(p.origin for p in problems if p.origin))
    if origins:  # generated tasks may stand in for a KernelBench that was not found
        lines.insert(2, f"- tasks evaluated: {'; '.join(origins)}")
    return "## Run\n\n" + "\n".join(lines)


def _problem_table(summary: list[dict[str, Any]]) -> str:
    present = [s for s in STATUS_ORDER if any(s in row["statuses"] for row in summary)]
    header = ["problem", "name", "samples", *present, "best speedup"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|"]
    for row in summary:
        best = "-" if row["best_speedup"] is None else f"{row['best_speedup']:.2f}x"
        cells = [row["problem"], _cell(row["name"]), str(row["samples"])]
        cells += [str(row["statuses"].get(s, 0)) for s in present]
        lines.append("| " + " | ".join([*cells, best]) + " |")
    return "\n".join(lines)


def _examples(records: Sequence[Mapping[str, Any]]) -> str:
    """Up to MAX_EXAMPLES failures, one per status first so the variety of failures shows."""
    failures = sorted(
        (r for r in records if r["status"] != Status.OK.value), key=lambda r: (r["problem"], r["sample"])
    )
    firsts = {}
    for i, record in enumerate(failures):
        firsts.setdefault(record["status"], i)
    firsts_set = set(firsts.values())
    order = sorted(firsts_set) + [i for i in range(len(failures)) if i not in firsts_set]
    chosen = [failures[i] for i in order[:MAX_EXAMPLES]]
    if not chosen:
        return "None: every sample was correct."
    blocks = []
    for record in chosen:
        details = [f"[{v['layer']}/{v['rule']}] {v['message']}" for v in record.get("violations", [])]
        if record.get("error"):
            details.append(record["error"])
        text = "\n".join(details) or "(no message)"
        if len(text) > _EXCERPT_CHARS:
            text = text[:_EXCERPT_CHARS] + " ..."
        title = f"### {record['problem']} sample {record['sample']}: `{record['status']}`"
        blocks.append(f"{title}\n\n````text\n{text}\n````")
    return "\n\n".join(blocks)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
