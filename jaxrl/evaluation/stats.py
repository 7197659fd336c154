"""Intervals and paired comparisons for evaluation results, and the results.json of issue 21.

- `wilson`: the 95% Wilson score interval of a proportion (correct at temperature 0, cheat share), right
  near 0 and 1 where the normal approximation is not.
- `bootstrap`: a percentile interval from resampling problems (not samples: samples of one problem are not
  independent) for pass@k, fast_p and the geometric-mean speedup of correct samples.
- `paired_difference`: two models on the same problems. Per problem, the difference of their scores (e.g.
  correct at temperature 0: -1, 0 or 1); its mean with a paired bootstrap interval and the exact two-sided
  sign test (McNemar's exact test for 0/1 scores) p-value over the problems where they differ.
- `set_summary` / `results_json`: every figure the issue's report asks for, per set and model, and the
  `docs/learning/results.json` layout {"sets": {SET: {MODEL: {...}}}} with `<arm>_seeds` lists beside
  means over seeds.

Records are the evaluation runner's samples.jsonl rows: `problem`, `sample`, `status`, `speedup`.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jaxrl.evaluation.metrics import pass_at_k

Z95 = 1.959963984540054
SETS = ("A", "B", "C", "D", "E")
MODELS = ("untrained", "sft", "grpo_hrd", "grpo_uniform")


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of successes / n ((0, 1) when n is 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(values: Sequence[Any], statistic: Callable[[Sequence[Any]], float | None], resamples: int = 2000,
              seed: int = 0) -> tuple[float, float] | None:
    """The 95% percentile interval of `statistic` over resamples of `values` (None when undefined)."""
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        value = statistic([values[rng.randrange(len(values))] for _ in values])
        if value is not None:
            stats.append(value)
    if not stats:
        return None
    stats.sort()
    return (stats[int(0.025 * (len(stats) - 1))], stats[int(math.ceil(0.975 * (len(stats) - 1)))])


def by_problem(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        out[record["problem"]].append(record)
    return {k: sorted(v, key=lambda r: r["sample"]) for k, v in out.items()}


def _ok(r: Mapping[str, Any]) -> bool:
    return r["status"] == "ok"


def _fast(r: Mapping[str, Any], p: float) -> bool:
    return _ok(r) and r.get("speedup") is not None and r["speedup"] > p


def _pass_k(groups: Sequence[list[Mapping[str, Any]]], k: int, good: Callable[[Mapping[str, Any]], bool]
            ) -> float | None:
    if not groups or any(len(g) < k for g in groups):
        return None
    return sum(pass_at_k(len(g), sum(map(good, g)), k) for g in groups) / len(groups)


def _geomean_speedup(groups: Sequence[list[Mapping[str, Any]]]) -> float | None:
    timed = [r["speedup"] for g in groups for r in g if _ok(r) and r.get("speedup")]
    return math.exp(sum(map(math.log, timed)) / len(timed)) if timed else None


@dataclasses.dataclass(frozen=True)
class SetSummary:
    """One model on one set. correct_t0 is over each problem's first sample of a greedy run."""

    n: int
    correct_t0: float
    correct_t0_ci: tuple[float, float]
    pass_at: dict[int, float | None]
    pass_at_ci: dict[int, tuple[float, float] | None]
    fast_1: float | None
    fast_1_ci: tuple[float, float] | None
    fast_2: float | None
    fast_2_ci: tuple[float, float] | None
    mean_speedup: float | None
    mean_speedup_ci: tuple[float, float] | None
    cheat_share: float
    cheat_share_ci: tuple[float, float]
    infra_errors: int

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["pass_at"] = {str(k): v for k, v in self.pass_at.items()}
        data["pass_at_ci"] = {str(k): v for k, v in self.pass_at_ci.items()}
        return data


def set_summary(greedy: Iterable[Mapping[str, Any]], sampled: Iterable[Mapping[str, Any]] = (),
                ks: Sequence[int] = (1, 4, 8)) -> SetSummary:
    """Figures with 95% intervals from a greedy run (one sample per problem) and optionally a sampled one."""
    g = by_problem(greedy)
    if not g:
        raise ValueError("no greedy records")
    first = [v[0] for v in g.values()]
    correct = sum(map(_ok, first))
    s = list(by_problem(sampled).values())
    fast_source = s or [[r] for r in first]
    all_records = [r for v in g.values() for r in v] + [r for v in s for r in v]
    cheats = sum(r["status"] == "cheat" for r in all_records)
    pass_at = {k: _pass_k(s, k, _ok) for k in ks} if s else {}
    return SetSummary(
        n=len(first),
        correct_t0=correct / len(first),
        correct_t0_ci=wilson(correct, len(first)),
        pass_at=pass_at,
        pass_at_ci={k: bootstrap(s, lambda groups, k=k: _pass_k(groups, k, _ok)) for k in pass_at},
        fast_1=_pass_k(fast_source, 1, lambda r: _fast(r, 1.0)),
        fast_1_ci=bootstrap(fast_source, lambda groups: _pass_k(groups, 1, lambda r: _fast(r, 1.0))),
        fast_2=_pass_k(fast_source, 1, lambda r: _fast(r, 2.0)),
        fast_2_ci=bootstrap(fast_source, lambda groups: _pass_k(groups, 1, lambda r: _fast(r, 2.0))),
        mean_speedup=_geomean_speedup(fast_source),
        mean_speedup_ci=bootstrap(fast_source, _geomean_speedup),
        cheat_share=cheats / len(all_records),
        cheat_share_ci=wilson(cheats, len(all_records)),
        infra_errors=sum(r["status"] == "infra_error" for r in all_records),
    )


@dataclasses.dataclass(frozen=True)
class PairedDifference:
    """Model B minus model A on the problems both were evaluated on."""

    n: int
    mean: float
    ci: tuple[float, float]
    better: int  # problems where B scores higher
    worse: int
    p_value: float  # exact two-sided sign test over the problems where they differ


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact binomial test of better vs worse at p = 1/2 (1.0 when no problem differs)."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(better, worse) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_difference(scores_a: Mapping[str, float], scores_b: Mapping[str, float], seed: int = 0
                      ) -> PairedDifference:
    """Per-problem scores (e.g. 1.0 correct at temperature 0) of two models; only shared problems count."""
    shared = sorted(set(scores_a) & set(scores_b))
    if not shared:
        raise ValueError("the two models share no problem")
    diffs = [scores_b[p] - scores_a[p] for p in shared]
    ci = bootstrap(diffs, lambda d: sum(d) / len(d), seed=seed)
    better, worse = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return PairedDifference(len(shared), sum(diffs) / len(diffs), ci, better, worse, sign_test(better, worse))


def correct_t0_scores(greedy: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per problem: 1.0 when its greedy sample is correct."""
    return {p: float(_ok(v[0])) for p, v in by_problem(greedy).items()}


def results_json(summaries: Mapping[str, Mapping[str, SetSummary | Sequence[SetSummary]]]) -> dict[str, Any]:
    """docs/learning/results.json: {"sets": {SET: {MODEL: {n, correct_t0, correct_t0_ci, fast_1, infra_errors},
    "<arm>_seeds": [...]}}}. A model given several summaries (one per seed) gets their means, its seeds listed
    beside it."""
    out: dict[str, Any] = {"sets": {}}
    for set_name, models in summaries.items():
        if set_name not in SETS:
            raise ValueError(f"unknown set {set_name!r}; sets are {SETS}")
        entry: dict[str, Any] = {}
        for model, value in models.items():
            if model not in MODELS:
                raise ValueError(f"unknown model {model!r}; models are {MODELS}")
            seeds = list(value) if isinstance(value, Sequence) else [value]
            rows = [_row(s) for s in seeds]
            entry[model] = _mean_row(rows)
            if isinstance(value, Sequence):
                entry[f"{model}_seeds"] = rows
        out["sets"][set_name] = entry
    return out


def _row(s: SetSummary) -> dict[str, Any]:
    return {"n": s.n, "correct_t0": s.correct_t0, "correct_t0_ci": list(s.correct_t0_ci), "fast_1": s.fast_1,
            "infra_errors": s.infra_errors}


def _mean_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if len(rows) == 1:
        return rows[0]

    def mean(key):
        values = [r[key] for r in rows if r[key] is not None]
        return sum(values) / len(values) if values else None

    # The interval of the mean over seeds: Wilson on the pooled greedy samples of every seed.
    successes = sum(round(r["correct_t0"] * r["n"]) for r in rows)
    return {"n": rows[0]["n"], "correct_t0": mean("correct_t0"),
            "correct_t0_ci": list(wilson(successes, sum(r["n"] for r in rows))), "fast_1": mean("fast_1"),
            "infra_errors": sum(r["infra_errors"] for r in rows)}
