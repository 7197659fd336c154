"""The learning demonstration's figures and tables: training curves as PNG files, the comparison of models
(untrained, SFT, GRPO+HRD, GRPO uniform) on every evaluation set, and issue 21's `results.json`.

    python -m jaxrl.evaluation.learning_report --sft runs/issue21-sft --grpo grpo_hrd=runs/issue21-grpo-hrd \
        --grpo grpo_uniform=runs/issue21-grpo-uniform \
        --eval "untrained:A (temperature 0)=runs/issue21-eval-untrained-A-greedy" ... --out docs/learning

Inputs are the run folders the commands write (`metrics.jsonl` of `sft`/`grpo`, `metrics.json` and
`samples.jsonl` of `eval`); outputs are PNG plots and `comparison.md`. matplotlib draws off-screen (Agg).
`--result MODEL:SET=GREEDY_RUN` (with `--result-sampled` for the same label's pass@k run) writes
`results.json` (jaxrl.evaluation.stats: 95% intervals, means over seeds with each seed's figures beside them,
a MODEL written `grpo_hrd/s0` being seed s0 of grpo_hrd) and the paired comparisons of `PAIRS` in
`comparison.md`. `--selection` and `--filter` add the recipe's SFT checkpoint choice and GRPO task filter.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxrl.evaluation.stats import SETS, SetSummary, correct_t0_scores, paired_difference, results_json, set_summary

GRPO_PANELS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("reward", (("reward/correct_mean", "R_correct"), ("reward/speedup_mean", "R_speedup"))),
    ("rates", (("rate/correct", "correct"), ("rate/valid", "valid"), ("rate/cheat", "cheat"))),
    ("response length", (("length/response_mean", "tokens"),)),
    ("entropy", (("train/entropy", "entropy"),)),
)
COMPARISON_METRICS = ("valid", "compiled", "correct", "fast_1", "fast_2")
# (B, A) pairs compared problem by problem (correct at temperature 0, B minus A), on each set and on A and B
# together: what issue 21's targets are stated in.
PAIRS = (("sft", "untrained"), ("grpo_hrd", "sft"), ("grpo_uniform", "sft"), ("grpo_hrd", "grpo_uniform"))


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The per-step records of a training run (`metrics.jsonl`), in step order; later lines win."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {run_dir}")
    by_step: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            by_step.setdefault(int(record["step"]), {}).update(record)
    return [by_step[s] for s in sorted(by_step)]


def _series(records: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in points], [float(p[1]) for p in points]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sft(run_dir: Path, out: Path) -> Path:
    """Training (and held-out, when logged) loss against step."""
    plt = _pyplot()
    records = read_metrics(run_dir)
    figure, axis = plt.subplots(figsize=(6, 3.6))
    for key, label in (("train/loss", "train"), ("eval/loss", "held-out")):
        steps, values = _series(records, key)
        if steps:
            axis.plot(steps, values, label=label, marker="o" if len(steps) < 30 else None)
    axis.set_xlabel("step")
    axis.set_ylabel("loss")
    axis.set_title("SFT loss")
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def plot_grpo(arms: Mapping[str, Path], out: Path) -> Path:
    """One panel per quantity (rewards, rates, response length, entropy), every arm on each."""
    plt = _pyplot()
    runs = {name: read_metrics(path) for name, path in arms.items()}
    figure, axes = plt.subplots(2, 2, figsize=(11, 7))
    styles = ("-", "--", ":", "-.")
    for axis, (title, keys) in zip(axes.flat, GRPO_PANELS):
        for arm_index, (arm, records) in enumerate(runs.items()):
            for key, label in keys:
                steps, values = _series(records, key)
                if steps:
                    axis.plot(steps, values, styles[arm_index % len(styles)], label=f"{arm}: {label}")
        axis.set_title(title)
        axis.set_xlabel("GRPO step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def eval_summary(run_dir: Path, k: int | None = None) -> dict[str, Any]:
    """The overall group of an eval run: rates @1 (and @k), mean speedup, cheat share, per-family correct."""
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    groups = metrics["metrics"]["groups"] if "metrics" in metrics else metrics["groups"]
    overall = next(g for g in groups if g["name"] == "all")
    summary: dict[str, Any] = {name: overall["rates"]["1"].get(name) for name in COMPARISON_METRICS}
    if k is not None and str(k) in overall["rates"]:
        summary[f"correct@{k}"] = overall["rates"][str(k)].get("correct")
    summary["mean_speedup"] = overall.get("mean_speedup")
    summary["problems"] = overall["problems"]
    summary["samples"] = overall["samples"]
    summary["infra_errors"] = overall.get("infra_errors", 0)
    samples = _samples(run_dir)
    summary["cheat"] = (sum(1 for s in samples if s.get("status") == "cheat") / len(samples)) if samples else None
    summary["families"] = family_correct(samples)
    return summary


def _samples(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "samples.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def family_correct(samples: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Share of correct samples per task family (samples without a family are grouped as "-")."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sample in samples:
        family = sample.get("family") or "-"
        totals[family][0] += sample.get("status") == "ok"
        totals[family][1] += 1
    return {family: ok / n for family, (ok, n) in sorted(totals.items())}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def comparison_table(evals: Mapping[str, Mapping[str, Path]], k: int | None = None) -> str:
    """Markdown: one table per evaluation set, one row per model. Infra errors (the sandbox failed, not the
    model) are counted apart: a set with many of them measured the machine, not the model."""
    sets = sorted({s for per_set in evals.values() for s in per_set})
    lines = []
    for eval_set in sets:
        columns = ["model", "problems", "samples", *COMPARISON_METRICS, *([f"correct@{k}"] if k else []),
                   "mean speedup", "cheat", "infra errors"]
        lines += [f"### {eval_set}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for model, per_set in evals.items():
            if eval_set not in per_set:
                continue
            s = eval_summary(per_set[eval_set], k)
            cells = [model, str(s["problems"]), str(s["samples"]), *(_pct(s[m]) for m in COMPARISON_METRICS)]
            if k:
                cells.append(_pct(s.get(f"correct@{k}")))
            cells += ["-" if s["mean_speedup"] is None else f"{s['mean_speedup']:.2f}x", _pct(s["cheat"]),
                      str(s["infra_errors"])]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def family_table(evals: Mapping[str, Path]) -> str:
    """Markdown: correct rate per family (rows) for each model (columns) on one evaluation set."""
    per_model = {model: eval_summary(path)["families"] for model, path in evals.items()}
    families = sorted({f for table in per_model.values() for f in table})
    lines = ["| family | " + " | ".join(per_model) + " |", "|---|" + "---|" * len(per_model)]
    for family in families:
        lines.append(f"| {family} | " + " | ".join(_pct(per_model[m].get(family)) for m in per_model) + " |")
    return "\n".join(lines) + "\n"


def first_step_entropy(run_dir: Path) -> float | None:
    """A GRPO run's `train/entropy` at its first step when that step updated the policy: the token entropy of
    the policy it started from (the update's forward pass runs on it) over the samples trained on. None when the
    first step made no update (dynamic sampling kept no group)."""
    records = read_metrics(run_dir)
    first = records[0] if records else {}
    return first.get("train/entropy") if first.get("train/updated", 1.0) else None


def sft_section(selection: Mapping[str, Any], grpo: Mapping[str, Path]) -> str:
    """Markdown: which SFT checkpoint every later stage started from and why, and its entropy as the GRPO runs
    measured it (the SFT run itself logs no entropy)."""
    lines = ["## The SFT policy", "", f"Chosen: `{selection['chosen']}`, by {selection['criterion']}.", "",
             "| candidate | correct | tasks | infra errors |", "|---|---|---|---|"]
    lines += [f"| {r['policy']} | {r['correct']} | {r['tasks']} | {r['infra_errors']} |"
              for r in selection["candidates"]]
    entropies = {name: first_step_entropy(path) for name, path in grpo.items()}
    if entropies:
        cells = ", ".join(f"{name} {'-' if e is None else f'{e:.3f}'}" for name, e in entropies.items())
        lines += ["", f"Its token entropy at GRPO's temperature (each GRPO run's first step): {cells}."]
    return "\n".join(lines) + "\n"


ResultRuns = Mapping[tuple[str, str], Path]  # (MODEL or MODEL/SEED, SET) -> an eval run folder


def _summaries(greedy: ResultRuns, sampled: ResultRuns) -> dict[str, dict[str, SetSummary | list[SetSummary]]]:
    """stats.set_summary per set (in SETS order) and model, a list of them (in the order given) for a model with
    seeds."""
    out: dict[str, dict[str, Any]] = {}
    for (label, eval_set), run in greedy.items():
        model, seeded, _ = label.partition("/")
        extra = _samples(sampled[label, eval_set]) if (label, eval_set) in sampled else ()
        summary = set_summary(_samples(run), extra)
        if seeded:
            out.setdefault(eval_set, {}).setdefault(model, []).append(summary)
        else:
            out.setdefault(eval_set, {})[model] = summary
    return dict(sorted(out.items(), key=lambda item: SETS.index(item[0]) if item[0] in SETS else len(SETS)))


def _seed_mean_scores(greedy: ResultRuns, model: str, sets: Sequence[str]) -> dict[str, float]:
    """Per problem of `sets`: correct at temperature 0, averaged over the model's seeds (runs labelled `model`
    or `model/SEED`)."""
    per_problem: dict[str, list[float]] = defaultdict(list)
    for (label, eval_set), run in greedy.items():
        if label.partition("/")[0] == model and eval_set in sets:
            for problem, score in correct_t0_scores(_samples(run)).items():
                per_problem[problem].append(score)
    return {problem: sum(v) / len(v) for problem, v in per_problem.items()}


def paired_table(greedy: ResultRuns) -> str:
    """Markdown: each pair of `PAIRS` on each set and on A and B together: the mean difference in correct at
    temperature 0 (B minus A, seeds averaged per problem), its paired bootstrap 95% interval, the problems where
    each is better and the sign test's p-value."""
    lines = ["| set | B - A | problems | difference | 95% interval | B better | A better | p |",
             "|---|---|---|---|---|---|---|---|"]
    present = [s for s in SETS if any(key[1] == s for key in greedy)]
    for sets in [*([s] for s in present), *([["A", "B"]] if {"A", "B"} <= set(present) else [])]:
        for b, a in PAIRS:
            scores_a, scores_b = _seed_mean_scores(greedy, a, sets), _seed_mean_scores(greedy, b, sets)
            if not set(scores_a) & set(scores_b):
                continue
            d = paired_difference(scores_a, scores_b)
            interval = "-" if d.ci is None else f"[{100 * d.ci[0]:+.1f}, {100 * d.ci[1]:+.1f}]"
            lines.append(f"| {'+'.join(sets)} | {b} - {a} | {d.n} | {100 * d.mean:+.1f} pts | {interval} | "
                         f"{d.better} | {d.worse} | {d.p_value:.3g} |")
    return "\n".join(lines) + "\n"


def filter_section(summary: Mapping[str, Any]) -> str:
    """Markdown: the SFT policy's pass@k on the rl split's tasks (how many tasks had 0..k correct) and what GRPO
    kept."""
    k = summary["samples_per_task"]
    low, high = summary["kept_correct"]
    lines = ["## GRPO's tasks", "", f"The SFT policy's correct samples of {k} on each of the {summary['tasks']} rl "
             f"tasks ({summary['infra_errors']} infra errors); GRPO trains on the {summary['kept']} with {low} to "
             f"{high} correct.", "", "| correct of " + str(k) + " | " + " | ".join(map(str, range(k + 1))) + " |",
             "|---|" + "---|" * (k + 1),
             "| tasks | " + " | ".join(str(summary["distribution"][str(c)]) for c in range(k + 1)) + " |"]
    return "\n".join(lines) + "\n"


def _runs_by_label(values: Sequence[str], what: str) -> dict[tuple[str, str], Path]:
    out = {}
    for value in values:
        label, sep, path = value.partition("=")
        model, colon, eval_set = label.partition(":")
        if not (sep and colon):
            raise SystemExit(f"--{what} wants MODEL:SET=RUN_DIR, got {value!r}")
        out[model, eval_set] = Path(path)
    return out


def _pairs(values: Sequence[str], what: str) -> dict[str, Path]:
    out = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            raise SystemExit(f"--{what} wants NAME=RUN_DIR, got {value!r}")
        out[name] = Path(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", type=Path, help="the SFT run folder")
    parser.add_argument("--grpo", action="append", default=[], help="ARM=RUN_DIR of a GRPO run (repeatable)")
    parser.add_argument("--eval", action="append", default=[],
                        help="MODEL:SET=RUN_DIR of an eval run (repeatable), e.g. sft:A=runs/issue21-eval-sft-A")
    parser.add_argument("--family-set", default="A (temperature 0)",
                        help="the evaluation set (its label in --eval) of the per-family table")
    parser.add_argument("--k", type=int, help="also report correct@k")
    parser.add_argument("--selection", type=Path, help="the SFT checkpoint selection (the recipe's selection.json)")
    parser.add_argument("--filter", type=Path, help="the GRPO task filter's distribution (the recipe's pass_at_k.json)")
    parser.add_argument("--result", action="append", default=[],
                        help="MODEL:SET=GREEDY_RUN for results.json (repeatable); MODEL/SEED for one seed of MODEL")
    parser.add_argument("--result-sampled", action="append", default=[],
                        help="MODEL:SET=SAMPLED_RUN: the pass@k run of a --result label (repeatable)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the PNG files and comparison.md")
    args = parser.parse_args(argv)
    written = []
    if args.sft:
        written.append(plot_sft(args.sft, args.out / "sft_loss.png"))
    if args.grpo:
        written.append(plot_grpo(_pairs(args.grpo, "grpo"), args.out / "grpo_curves.png"))
    greedy = _runs_by_label(args.result, "result")
    if greedy:
        path = args.out / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            results = results_json(_summaries(greedy, _runs_by_label(args.result_sampled, "result-sampled")))
        except ValueError as exc:
            raise SystemExit(f"--result: {exc}") from None
        path.write_text(json.dumps(results, indent=2) + "\n")
        written.append(path)
    if args.eval:
        evals: dict[str, dict[str, Path]] = defaultdict(dict)
        for (model, eval_set), path in _runs_by_label(args.eval, "eval").items():
            evals[model][eval_set] = path
        text = "## Comparison\n\n" + comparison_table(evals, args.k)
        if greedy:
            text += "\n## Paired comparisons (correct at temperature 0)\n\n" + paired_table(greedy)
        if args.selection:
            text += "\n" + sft_section(json.loads(args.selection.read_text()), _pairs(args.grpo, "grpo"))
        if args.filter:
            text += "\n" + filter_section(json.loads(args.filter.read_text()))
        family_runs = {m: sets[args.family_set] for m, sets in evals.items() if args.family_set in sets}
        if family_runs:
            text += f"\n## Correct per family ({args.family_set})\n\n" + family_table(family_runs)
        path = args.out / "comparison.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
