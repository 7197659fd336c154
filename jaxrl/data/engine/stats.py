"""The build's figures, derived from task outcomes alone (so they are the same however the shards were made).

Funnel: generated -> dropped as KernelBench twins (decontaminate) or repeats (duplicate) -> dropped by
reference validation -> validated (RL tasks, every split) -> train tasks' teacher pairs (template, then
Inductor) -> verified pairs -> pairs within max_tokens -> the rows written (the first `sft_pairs` /
`rl_tasks` in task order).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

from jaxrl.data.engine.outcomes import DECONTAMINATE, INDUCTOR, TEMPLATE, TaskOutcome
from jaxrl.data.engine.rows import pair_tokens

SPLIT_ORDER = ("train", "rl", "val", "heldout")
TOKEN_BINS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
MAX_DECONTAM_EXAMPLES = 10
MAX_REASONS = 5
REASON_CHARS = 120


@dataclasses.dataclass(frozen=True)
class PathYield:
    """One way to a teacher pair: how many tasks tried it, how many verified, the failures by status and
    the most frequent failure reasons."""

    attempted: int
    ok: int
    failures: dict[str, int]
    reasons: list[tuple[str, int]]

    @property
    def rate(self) -> float | None:
        return self.ok / self.attempted if self.attempted else None


@dataclasses.dataclass(frozen=True)
class FamilyRow:
    family: str
    split: str
    generated: int
    dropped: int
    rl_tasks: int
    sft_pairs: int


@dataclasses.dataclass(frozen=True)
class BuildStats:
    shards: int
    generated: int
    drops: list[tuple[str, str, int]]           # (stage, reason, count), most frequent first
    decontaminated: int
    decontam_by_matcher: dict[str, int]
    decontam_examples: list[dict[str, str]]
    validated: int
    no_template: int
    template: PathYield
    inductor: PathYield
    verified_pairs: int
    too_long: int
    sft_written: int
    rl_written: int
    splits: dict[str, dict[str, int]]           # split -> {"rl_tasks", "sft_pairs"} written
    families: list[FamilyRow]
    token_histogram: list[tuple[str, int]]      # (range, count) of written pairs' total tokens
    token_quantiles: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["drops"] = [{"stage": s, "reason": r, "count": n} for s, r, n in self.drops]
        data["token_histogram"] = [{"tokens": label, "pairs": n} for label, n in self.token_histogram]
        data["template"]["rate"] = self.template.rate
        data["inductor"]["rate"] = self.inductor.rate
        return data


def compute_stats(outcomes: Sequence[TaskOutcome], shards: int, max_tokens: int, sft_rows: Sequence[dict[str, Any]],
                  rl_rows: Sequence[dict[str, Any]]) -> BuildStats:
    """Figures over `outcomes` (every task of the shards used) and the rows written from them."""
    drops = Counter((o.drop.stage, o.drop.reason) for o in outcomes if o.drop is not None)
    hits = [o for o in outcomes if o.drop is not None and o.drop.stage == DECONTAMINATE]
    kept = [o for o in outcomes if o.rl_row is not None]
    train = [o for o in kept if o.split == "train"]
    verified = [o for o in outcomes if o.sft_row is not None]
    fitting = [o for o in verified if pair_tokens(o.sft_row) <= max_tokens]
    totals = sorted(pair_tokens(row) for row in sft_rows)
    return BuildStats(
        shards=shards,
        generated=len(outcomes),
        drops=[(stage, reason, n) for (stage, reason), n in sorted(drops.items(), key=lambda kv: (-kv[1], kv[0]))],
        decontaminated=len(hits),
        decontam_by_matcher=dict(sorted(Counter(o.decontam["matcher"] for o in hits).items())),
        decontam_examples=[{"task_id": o.task_id, "family": o.family, **o.decontam}
                           for o in hits[:MAX_DECONTAM_EXAMPLES]],
        validated=len(kept),
        no_template=sum(1 for o in train if not any(a.origin == TEMPLATE for a in o.attempts)),
        template=_path_yield(train, TEMPLATE),
        inductor=_path_yield(train, INDUCTOR),
        verified_pairs=len(verified),
        too_long=len(verified) - len(fitting),
        sft_written=len(sft_rows),
        rl_written=len(rl_rows),
        splits={split: {"rl_tasks": sum(r["split"] == split for r in rl_rows),
                        "sft_pairs": sum(r["split"] == split for r in sft_rows)} for split in SPLIT_ORDER},
        families=_family_rows(outcomes, sft_rows, rl_rows),
        token_histogram=_histogram(totals),
        token_quantiles=_quantiles(totals),
    )


def _path_yield(tasks: Sequence[TaskOutcome], origin: str) -> PathYield:
    attempts = [a for o in tasks for a in o.attempts if a.origin == origin]
    failures = Counter(a.status for a in attempts if not a.ok)
    reasons = Counter(f"{a.status}: {a.reason}"[:REASON_CHARS] for a in attempts if not a.ok)
    top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_REASONS]
    return PathYield(len(attempts), sum(a.ok for a in attempts), dict(sorted(failures.items())), top)


def _family_rows(outcomes: Sequence[TaskOutcome], sft_rows: Sequence[dict[str, Any]],
                 rl_rows: Sequence[dict[str, Any]]) -> list[FamilyRow]:
    keys = sorted({(o.family, o.split) for o in outcomes}, key=lambda k: (k[0], _split_rank(k[1])))
    generated = Counter((o.family, o.split) for o in outcomes)
    dropped = Counter((o.family, o.split) for o in outcomes if o.drop is not None)
    rl = Counter((r["family"], r["split"]) for r in rl_rows)
    sft = Counter((r["family"], r["split"]) for r in sft_rows)
    return [FamilyRow(f, s, generated[f, s], dropped[f, s], rl[f, s], sft[f, s]) for f, s in keys]


def _split_rank(split: str) -> int:
    return SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER)


def _histogram(totals: Sequence[int]) -> list[tuple[str, int]]:
    edges = (0, *TOKEN_BINS)
    bins = [(f"{lo}-{hi - 1}", sum(lo <= t < hi for t in totals)) for lo, hi in zip(edges, edges[1:])]
    bins.append((f">={TOKEN_BINS[-1]}", sum(t >= TOKEN_BINS[-1] for t in totals)))
    filled = [i for i, (_, n) in enumerate(bins) if n]
    return bins[filled[0] : filled[-1] + 1] if filled else []  # no empty bins before the first or after the last


def _quantiles(totals: Sequence[int]) -> dict[str, int]:
    if not totals:
        return {}
    pick = lambda q: totals[min(len(totals) - 1, int(q * len(totals)))]  # noqa: E731
    return {"min": totals[0], "median": pick(0.5), "p90": pick(0.9), "max": totals[-1]}
